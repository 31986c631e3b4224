// Routing is exact: a path is served only as the spec writes it, so neither case nor a
// trailing slash reaches an operation (or dodges a deprecated operation's headers).
import request from 'supertest';
import { admin, createPet, expectError, setupApp, type Caller } from './helpers';

describe('routing', () => {
  const t = setupApp();
  let boss: Caller;

  beforeAll(async () => {
    boss = await admin(t);
  });

  it.each(['/PETS', '/pets/', '/Pets', '/HEALTHZ', '/healthz/', '/Store/Orders', '/api-keys/', '/OPENAPI.JSON'])(
    'answers GET %s with 404 not_found',
    async (path) => {
      expectError(await request(t.app).get(path).set(boss.auth), 404, 'not_found');
    },
  );

  it.each(['/pets/', '/pets/1/', '/store/orders/', '/PETS'])('answers GET %s with 404 before it looks at the credentials', async (path) => {
    expectError(await request(t.app).get(path).set('Authorization', 'Bearer not-a-key'), 404, 'not_found');
  });

  it('answers GET /PETS/{id} with 404, and GET /pets/{id} with its deprecation headers', async () => {
    const pet = await createPet(t.app, boss);
    expectError(await request(t.app).get(`/PETS/${pet.id}`).set(boss.auth), 404, 'not_found');
    expectError(await request(t.app).get(`/pets/${pet.id}/`).set(boss.auth), 404, 'not_found');
    const res = await request(t.app).get(`/pets/${pet.id}`).set(boss.auth);
    expect(res.status).toBe(200);
    expect(res.headers.deprecation).toBeDefined();
    expect(res.headers.sunset).toBeDefined();
  });

  it('still serves the paths as written', async () => {
    expect((await request(t.app).get('/healthz')).status).toBe(200);
    expect((await request(t.app).get('/pets').set(boss.auth)).status).toBe(200);
  });
});
