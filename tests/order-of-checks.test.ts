// One order of checks for every operation (openapi.yaml, info: "Order of checks"):
// framing, route, the per-address limit, authentication, authorisation, input, the store's
// rules. Each test sends a request that fails two neighbouring checks and expects the
// earlier one to answer.
import request from 'supertest';
import { admin, customer, expectError, setupApp, type Caller } from './helpers';

const json = { 'Content-Type': 'application/json' };

describe('the order of checks', () => {
  const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  let boss: Caller;
  let buyer: Caller;
  beforeAll(async () => {
    boss = await admin(t);
    buyer = await customer(t.app);
  });

  describe('framing before route', () => {
    it('refuses a declared Content-Length over the limit on a path that does not exist with 413', async () => {
      const res = await request(t.app)
        .post('/nowhere')
        .set(json)
        .send(`"${'x'.repeat(70 * 1024)}"`);
      expectError(res, 413, 'payload_too_large');
    });
  });

  describe('route before the per-address limit', () => {
    const limited = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '1' } });
    beforeAll(async () => {
      await request(limited.app).get('/pets');
      expectError(await request(limited.app).get('/pets'), 429, 'rate_limited');
    });

    it('answers an unknown path with 404 to a client past its limit', async () => {
      expectError(await request(limited.app).get('/nowhere'), 404, 'not_found');
    });

    it('answers an undeclared method with 405 to a client past its limit', async () => {
      expectError(await request(limited.app).patch('/pets'), 405, 'method_not_allowed');
    });

    it('answers 429, not 401, to a client past its limit that sends no key', async () => {
      expectError(await request(limited.app).get('/store/orders'), 429, 'rate_limited');
    });
  });

  describe('authentication before input', () => {
    it.each([
      ['an unparseable integer in the query', () => request(t.app).get('/pets?limit=abc')],
      ['a query value out of bounds', () => request(t.app).get('/pets?limit=0')],
      ['an unknown query parameter', () => request(t.app).get('/pets?colour=brown')],
      ['a body that is not JSON', () => request(t.app).post('/messages').set(json).send('{"message":')],
      [
        'a body without Content-Type: application/json',
        () => request(t.app).post('/messages').set('Content-Type', 'text/plain').send('hi'),
      ],
      ['a body that breaks the schema', () => request(t.app).post('/messages').set(json).send({ message: '' })],
      ['a path parameter that is not an integer', () => request(t.app).get('/store/orders/1e3')],
    ])('answers %s without a key with 401', async (_what, send) => {
      expectError(await send(), 401, 'unauthorized');
    });
  });

  describe('authorisation before input', () => {
    it.each([
      ['a body that is not JSON', '{"name":'],
      ['a U+0000 in a string', '{"name":"a\\u0000b"}'],
      ['an empty name', '{"name":""}'],
      ['an unknown property', '{"name":"Owls","colour":"brown"}'],
    ])('answers a customer sending %s to an admin operation with 403', async (_what, body) => {
      const res = await request(t.app).post('/categories').set(buyer.auth).set(json).send(body);
      expectError(res, 403, 'forbidden');
    });
  });

  describe('input before the store rules', () => {
    it('answers an admin whose pet names no category and breaks the schema with 400, not 422', async () => {
      const res = await request(t.app).post('/pets').set(boss.auth).set(json).send({ name: '', categoryId: 999_999 });
      expectError(res, 400, 'validation_failed');
    });

    it('and the same pet with a valid name with 422 category_not_found', async () => {
      const res = await request(t.app).post('/pets').set(boss.auth).set(json).send({ name: 'Rex', categoryId: 999_999 });
      expectError(res, 422, 'category_not_found');
    });
  });

  describe('an operation that takes no body', () => {
    it('does not read one: a GET with a body that is not JSON is answered as the GET', async () => {
      const res = await request(t.app).get('/pets').set(buyer.auth).set('Content-Type', 'text/plain').send('not json');
      expect(res.status).toBe(200);
    });
  });
});
