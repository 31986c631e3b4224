// Reference for npm run bench: the app one would write first on this service's stack.
// Express 5, express-openapi-validator checking requests and responses against a small
// spec, a Bearer key looked up per request, better-sqlite3: GET /pets/{petId}.
// PORT and DATABASE_PATH from the environment.
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { errorSchema, openReferenceDb, petSchema } from './reference-db';

const db = openReferenceDb(process.env.DATABASE_PATH as string);

const spec = {
  openapi: '3.1.0',
  info: { title: 'naive reference', version: '1' },
  components: {
    securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
    schemas: { Pet: petSchema, Error: errorSchema },
  },
  security: [{ bearerAuth: [] }],
  paths: {
    '/pets/{petId}': {
      get: {
        operationId: 'getPetById',
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer', minimum: 1, maximum: 9007199254740991 } }],
        responses: {
          '200': { description: 'the pet', content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } } },
          default: { description: 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        },
      },
    },
  },
};

const app = express();
app.disable('x-powered-by');
app.use(
  OpenApiValidator.middleware({
    apiSpec: spec as never,
    validateRequests: true,
    validateResponses: true,
    validateSecurity: { handlers: { bearerAuth: async (req) => db.bearerOk(req.headers.authorization) } },
  }) as unknown as RequestHandler[],
);
app.get('/pets/:petId', (req, res) => {
  const pet = db.petById(Number(req.params.petId));
  if (!pet) {
    res.status(404).json({ code: 'not_found', message: 'no such pet', status: 404 });
    return;
  }
  res.json(pet);
});
const errors: ErrorRequestHandler = (err: { status?: number; message?: string }, _req, res, _next) => {
  const status = err.status ?? 500;
  res.status(status).json({ code: 'error', message: err.message ?? 'error', status });
};
app.use(errors);
app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
