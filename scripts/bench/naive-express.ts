// Reference for npm run bench: the app one would write first on this service's stack.
// Express 5, express-openapi-validator checking requests and responses against a small
// spec, a Bearer key looked up per request, better-sqlite3: GET /pets/{petId}, and
// POST /store/orders as one transaction (stock read, checked, taken; the order inserted).
// PORT and DATABASE_PATH from the environment.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { errorSchema, openReferenceDb, petSchema } from './reference-db';

const db = openReferenceDb(process.env.DATABASE_PATH as string);

// Orders write: a connection of their own, with SQLite's defaults but a wait for the lock.
const rw = new Database(process.env.DATABASE_PATH, { fileMustExist: true });
rw.pragma('busy_timeout = 3000');
const ownerOf = rw.prepare('select account_id as accountId from api_keys where key_hash = ?');
const stockOf = rw.prepare('select i.quantity, p.status from inventory i join pets p on p.id = i.pet_id where p.id = ?');
const setStock = rw.prepare('update inventory set quantity = ? where pet_id = ?');
const setPending = rw.prepare("update pets set status = 'pending' where id = ?");
const insertOrder = rw.prepare('insert into orders (account_id, pet_id, quantity, complete, created_at) values (?, ?, ?, 0, ?)');
const placeOrder = rw.transaction((accountId: number, petId: number, quantity: number) => {
  const stock = stockOf.get(petId) as { quantity: number; status: string } | undefined;
  if (!stock) return { status: 422, code: 'pet_not_found' };
  if (stock.status !== 'available') return { status: 409, code: 'pet_not_available' };
  if (stock.quantity < quantity) return { status: 409, code: 'insufficient_stock' };
  setStock.run(stock.quantity - quantity, petId);
  if (stock.quantity === quantity) setPending.run(petId);
  const { lastInsertRowid } = insertOrder.run(accountId, petId, quantity, new Date().toISOString());
  return { status: 201, order: { id: Number(lastInsertRowid), petId, quantity, complete: false } };
});

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
    '/store/orders': {
      post: {
        operationId: 'placeOrder',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                required: ['petId'],
                properties: {
                  petId: { type: 'integer', minimum: 1, maximum: 9007199254740991 },
                  quantity: { type: 'integer', minimum: 1, maximum: 1000, default: 1 },
                },
              },
            },
          },
        },
        responses: {
          '201': {
            description: 'the order',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    id: { type: 'integer' },
                    petId: { type: 'integer' },
                    quantity: { type: 'integer' },
                    complete: { type: 'boolean' },
                  },
                },
              },
            },
          },
          default: { description: 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        },
      },
    },
  },
};

const app = express();
app.disable('x-powered-by');
app.use(express.json());
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
app.post('/store/orders', (req, res) => {
  const token = /^bearer +(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
  const owner = ownerOf.get(createHash('sha256').update(token, 'utf8').digest('hex')) as { accountId: number };
  const body = req.body as { petId: number; quantity: number };
  const result = placeOrder(owner.accountId, body.petId, body.quantity);
  if (result.order) res.status(201).json(result.order);
  else res.status(result.status).json({ code: result.code, message: result.code, status: result.status });
});
const errors: ErrorRequestHandler = (err: { status?: number; message?: string }, _req, res, _next) => {
  const status = err.status ?? 500;
  res.status(status).json({ code: 'error', message: err.message ?? 'error', status });
};
app.use(errors);
app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
