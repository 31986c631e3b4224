// Reference for npm run bench: bare Express 5 answering a small JSON, the framework's
// own floor on this machine. PORT from the environment. Plain JavaScript, run by node
// alone: a TypeScript file would load Node's type stripper, whose start and memory are
// not Express's.
import { env } from 'node:process';
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.get('/hello', (_req, res) => {
  res.json({ hello: 'world' });
});
app.listen(Number(env.PORT ?? 0), '127.0.0.1');
