// Reference for npm run bench: bare Express 5 answering a small JSON, the framework's
// own floor on this machine. PORT from the environment.
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.get('/hello', (_req, res) => {
  res.json({ hello: 'world' });
});
app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
