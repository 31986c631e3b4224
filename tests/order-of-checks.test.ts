// One order of checks for every operation (openapi.yaml, info: "Order of checks"):
// framing, route, the per-address limit, authentication, authorisation, input, the store's
// rules. Each test sends a request that fails two neighbouring checks and expects the
// earlier one to answer.
import { connect } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { startServer, type ServerProcess } from '../scripts/server-process';
import { admin, customer, expectError, password, setupApp, type Caller } from './helpers';

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

    it('and on an operation, without a key, with 413, not 401', async () => {
      const res = await request(t.app)
        .post('/messages')
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

  describe('the password-check limit before the password and the input', () => {
    it('answers 429, not 400, to an account past its password checks sending a bad body with its right password', async () => {
      const limited = setupApp({ env: { PASSWORD_CHECKS_PER_MINUTE: '1' } });
      const user = await customer(limited.app);
      const res = await request(limited.app).post('/api-keys').auth(user.email, password).set(json).send({ name: 7 });
      expectError(res, 429, 'rate_limited');
      expect(res.body.message).toMatch(/password checks/);
      // The same body with the check to spare is the body's 400.
      const other = await customer(t.app);
      const bad = await request(t.app).post('/api-keys').auth(other.email, password).set(json).send({ name: 7 });
      expectError(bad, 400, 'validation_failed');
    });
  });

  describe('authentication before authorisation', () => {
    it.each([
      ['no key', {}],
      ['a key the service never issued', { Authorization: `Bearer ps_live_${'x'.repeat(43)}` }],
      ['another scheme', { Authorization: 'Basic YTpi' }],
    ])('answers %s on an admin operation with 401, not 403', async (_what, headers) => {
      const res = await request(t.app).post('/categories').set(headers).set(json).send({ name: 'Owls' });
      expectError(res, 401, 'unauthorized');
    });
  });

  describe('authorisation before the per-account limit', () => {
    const limited = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '2', RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '100000' } });
    let spent: Caller;
    beforeAll(async () => {
      spent = await customer(limited.app);
      await request(limited.app).get('/pets').set(spent.auth);
      await request(limited.app).get('/pets').set(spent.auth);
      expectError(await request(limited.app).get('/pets').set(spent.auth), 429, 'rate_limited');
    });

    it('answers a customer past its own limit on an admin operation with 403', async () => {
      expectError(await request(limited.app).post('/categories').set(spent.auth).set(json).send({ name: 'Owls' }), 403, 'forbidden');
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

    it('answers a body that breaks the schema for a record that does not exist with 400, not 404', async () => {
      const res = await request(t.app).put('/categories/999999').set(boss.auth).set(json).send({ name: 'Owls', colour: 'brown' });
      expectError(res, 400, 'validation_failed');
      const valid = await request(t.app).put('/categories/999999').set(boss.auth).set(json).send({ name: 'Owls' });
      expectError(valid, 404, 'not_found');
    });

    it('answers a duplicate name with an unknown property with 400, not 409', async () => {
      const name = `Dup ${Date.now()}`;
      expect((await request(t.app).post('/categories').set(boss.auth).set(json).send({ name })).status).toBe(201);
      const res = await request(t.app).post('/categories').set(boss.auth).set(json).send({ name, colour: 'brown' });
      expectError(res, 400, 'validation_failed');
      expectError(await request(t.app).post('/categories').set(boss.auth).set(json).send({ name }), 409, 'conflict');
    });
  });

  describe('an operation that takes no body', () => {
    it('does not read one: a GET with a body that is not JSON is answered as the GET', async () => {
      const res = await request(t.app).get('/pets').set(buyer.auth).set('Content-Type', 'text/plain').send('not json');
      expect(res.status).toBe(200);
    });
  });
});

// What Node's parser refuses never reaches routing: the same requests, well formed, would
// be a 404 (no such path) or a 405 (no such method). A real server, as the parser is its.
describe('the order of checks: framing, on a real server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-order-'));
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({ DATABASE_PATH: join(dir, 'order.db'), SEED_DEMO_DATA: 'false', HEADERS_TIMEOUT_MS: '300' });
  }, 60_000);
  afterAll(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Writes `text` on a new connection and resolves with the status and code of what comes back before the close. */
  const exchange = (text: string) =>
    new Promise<{ status: number; code: unknown }>((resolve) => {
      const { hostname, port } = new URL(server.url);
      const socket = connect({ host: hostname, port: Number(port) });
      let out = '';
      socket.on('data', (chunk) => (out += chunk.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => {
        const [head = '', body = ''] = out.split('\r\n\r\n', 2);
        resolve({ status: Number(head.split(' ')[1]), code: (JSON.parse(body) as { code: unknown }).code });
      });
      socket.write(text);
    });

  it.each([
    [
      'headers over 16 KiB to a path that does not exist',
      `GET /nowhere HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'headers_too_large',
    ],
    ['a DEL in a header on an undeclared method', 'PATCH /pets HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \x7f\r\n\r\n', 400, 'bad_request'],
    ['headers that never finish, to a path that does not exist', 'GET /nowhere HTTP/1.1\r\nHost: x\r\n', 408, 'request_timeout'],
  ])('answers %s with its framing status, not the route', async (_what, text, status, code) => {
    expect(await exchange(text)).toEqual({ status, code });
  });
});
