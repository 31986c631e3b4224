// Reference for npm run bench: what a user might pick instead. Fastify 5 with its own
// JSON-schema validation of the path parameter and serialization of the answer,
// better-sqlite3, the same Bearer check: GET /pets/:petId. PORT and DATABASE_PATH from
// the environment.
import Fastify from 'fastify';
import { errorSchema, openReferenceDb, petSchema } from './reference-db';

const db = openReferenceDb(process.env.DATABASE_PATH as string);
const app = Fastify({ logger: false });

app.addHook('onRequest', async (req, reply) => {
  if (!db.bearerOk(req.headers.authorization)) {
    return reply.code(401).send({ code: 'unauthorized', message: 'The API key is not valid', status: 401 });
  }
});

app.get<{ Params: { petId: number } }>(
  '/pets/:petId',
  {
    schema: {
      params: {
        type: 'object',
        required: ['petId'],
        properties: { petId: { type: 'integer', minimum: 1, maximum: 9007199254740991 } },
      },
      response: { 200: petSchema, '4xx': errorSchema },
    },
  },
  async (req, reply) => {
    const pet = db.petById(req.params.petId);
    if (!pet) return reply.code(404).send({ code: 'not_found', message: 'no such pet', status: 404 });
    return pet;
  },
);

app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' }).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
