// Text a request sends reaches a database only as both engines store it (domain/text.ts):
// U+0000, bytes that are not UTF-8 (an encoded surrogate among them) and over-long values,
// sent in every place the service decodes or takes text from (HTTP Basic, the Bearer key,
// Idempotency-Key, path and query parameters, X-Forwarded-For behind a trusted proxy,
// X-Request-Id, JSON bodies), are refused in the Error shape, 401 for credentials and 400
// elsewhere, with no error line. The rate limits here keep their counts in the database
// on SQLite too (as on PostgreSQL or with WEB_CONCURRENCY), so a failed login's count
// reaches the engine under test.
import request from 'supertest';
import { createRateLimitStore } from '../server/security/rate-limit-store';
import { loadSpec } from '../server/spec';
import { maxEmailLength } from '../domain/text';
import { captureLog, customer, expectError, password, setupApp, testStorage, uniqueEmail, type Caller } from './helpers';

const logged = captureLog('info');
const { storage, query } = testStorage();
const t = setupApp({
  storage,
  log: logged.log,
  rateLimitStores: (name) => createRateLimitStore(storage, name),
  // The test's loopback client is the proxy: X-Forwarded-For names the client.
  env: { TRUST_PROXY: 'loopback' },
});
let me: Caller;
beforeAll(async () => {
  me = await customer(t.app);
});

/** `Basic` with the base64 of these exact bytes. */
const basic = (...parts: Array<string | Buffer>) =>
  `Basic ${Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p))).toString('base64')}`;
const nul = Buffer.from([0]);
const notUtf8 = Buffer.from([0xff]);
// U+D800 as UTF-8 would write it, were a surrogate a character.
const surrogate = Buffer.from([0xed, 0xa0, 0x80]);
/** Header text whose bytes on the wire are not UTF-8 (Node writes header strings as latin1). */
const latin1 = '\xff\xfe';

// Each test's own lines: none at `error` or above.
let seen = 0;
afterEach(() => {
  const lines = logged.lines().slice(seen);
  seen += lines.length;
  expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
});

describe('HTTP Basic credentials (POST /api-keys)', () => {
  const user = (email: string) => ({
    'U+0000 in the email': basic('a', nul, email, ':', password),
    'bytes that are not UTF-8 in the email': basic('a', notUtf8, email, ':', password),
    'an encoded surrogate in the email': basic(surrogate, email, ':', password),
    'U+0000 in the password': basic(email, ':', 'correct', nul, 'horse'),
    'bytes that are not UTF-8 in the password': basic(email, ':', notUtf8, password),
    'an encoded surrogate in the password': basic(email, ':', password, surrogate),
  });

  it.each(Object.keys(user('x@example.com')))('answers %s with 401, counted nowhere', async (label) => {
    const res = await request(t.app)
      .post('/api-keys')
      .set('Authorization', user(me.email)[label as keyof ReturnType<typeof user>])
      .send({});
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).toBe('The HTTP Basic credentials must be UTF-8 text without U+0000');
    expect(res.headers['www-authenticate']).toBe('Basic realm="petstore", charset="UTF-8"');
    const keys = (await query('select key from rate_limits')).map((r) => String(r.key));
    expect(keys.filter((k) => k.includes('\u0000') || k.includes('\ufffd'))).toEqual([]);
  });

  it(`answers an email longer than ${maxEmailLength} characters with 401 before it is looked up or counted`, async () => {
    const long = `${'a'.repeat(64)}@${'b'.repeat(3000)}.example.com`;
    const res = await request(t.app)
      .post('/api-keys')
      .set('Authorization', basic(long, ':', password))
      .send({});
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).toBe(`The email is longer than any account's (${maxEmailLength} characters)`);
    expect(await query('select key from rate_limits where key like ?', '%bbbbbbbbbb%')).toEqual([]);
  });

  it(`counts a failed login of an email of ${maxEmailLength} characters, the longest an account may have`, async () => {
    const longest = `${'c'.repeat(64)}@${'d'.repeat(maxEmailLength - 64 - 1 - 12)}.example.com`;
    expect(longest).toHaveLength(maxEmailLength);
    const res = await request(t.app)
      .post('/api-keys')
      .set('Authorization', basic(longest, ':', password))
      .send({});
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).toBe('The email or password is wrong');
    expect(await query('select key from rate_limits where key like ?', `%${longest}`)).toHaveLength(2);
  });

  it('takes the email limit from openapi.yaml (NewAccount.email maxLength)', () => {
    const spec = loadSpec() as unknown as { components: { schemas: { NewAccount: { properties: { email: { maxLength: number } } } } } };
    expect(spec.components.schemas.NewAccount.properties.email.maxLength).toBe(maxEmailLength);
  });

  it('still logs the account in with its own credentials afterwards', async () => {
    const res = await request(t.app).post('/api-keys').auth(me.email, password).send({});
    expect(res.status).toBe(201);
  });

  it('answers Basic with U+0000 on an operation that takes a key with 401', async () => {
    const res = await request(t.app)
      .get('/api-keys')
      .set('Authorization', basic('a', nul, 'b@x.io:some password'));
    expectError(res, 401, 'unauthorized');
  });
});

describe('the Bearer key', () => {
  it('answers a key whose bytes are not UTF-8 with 401 (it is only ever hashed)', async () => {
    const res = await request(t.app).get('/api-keys').set('Authorization', `Bearer ps_live_${latin1}`);
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).toBe('The API key is not valid');
  });
});

describe('parameters', () => {
  it.each([
    ['Idempotency-Key with bytes that are not UTF-8', { 'Idempotency-Key': `key-${latin1}` }],
    ['Idempotency-Key of 256 characters', { 'Idempotency-Key': 'k'.repeat(256) }],
  ])('answers %s with 400 validation_failed, storing nothing', async (_label, headers) => {
    const res = await request(t.app).post('/store/orders').set(me.auth).set(headers).send({ petId: 1, quantity: 1 });
    expectError(res, 400, 'validation_failed');
    expect(Number((await query('select count(*) as n from idempotency_keys'))[0]!.n)).toBe(0);
  });

  it.each([
    '/pets?cursor=%00',
    '/pets?cursor=%FF',
    '/pets?cursor=%ED%A0%80',
    '/pets?status=%00',
    '/pets?ids=1,%00',
    '/pets?name=%00',
    '/store/orders?complete=%00',
    '/messages/msg_%00',
    '/messages/%FF',
    '/messages/%ED%A0%80',
    '/pets/%00',
    '/pets/%ED%A0%80',
  ])('answers GET %s with 400 validation_failed', async (path) => {
    const res = await request(t.app).get(path).set(me.auth);
    expectError(res, 400, 'validation_failed');
  });

  it('answers a DELETE of /api-keys/%00 with 400 validation_failed', async () => {
    expectError(await request(t.app).delete('/api-keys/%00').set(me.auth), 400, 'validation_failed');
  });
});

describe('X-Forwarded-For behind a trusted proxy', () => {
  it.each([
    ['16 KB of text', 'x'.repeat(15_000)],
    ['a name, not an address', 'client.example.com'],
    ['bytes that are not UTF-8', latin1],
  ])('answers a client entry of %s with 400 bad_request, counted nowhere', async (_label, value) => {
    const res = await request(t.app).get('/pets').set(me.auth).set('X-Forwarded-For', value);
    expectError(res, 400, 'bad_request');
    expect(await query('select key from rate_limits where key like ?', '%xxxxxxxxxx%')).toEqual([]);
  });

  it('counts a client it names by address, IPv4 or IPv6', async () => {
    for (const address of ['203.0.113.7', '2001:db8::7']) {
      const res = await request(t.app).get('/pets').set(me.auth).set('X-Forwarded-For', `198.51.100.1, ${address}`);
      expect(res.status).toBe(200);
    }
    const keys = (await query('select key from rate_limits')).map((r) => r.key);
    expect(keys).toEqual(expect.arrayContaining(['address:ip:203.0.113.7', 'address:ip:2001:db8::/56']));
  });
});

describe('X-Request-Id', () => {
  it('is replaced by a new one when its bytes are not UTF-8', async () => {
    const res = await request(t.app).get('/pets').set(me.auth).set('X-Request-Id', `id-${latin1}`);
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('JSON bodies, on the operations that store or look up their text', () => {
  it.each([
    ['POST /accounts', '/accounts', `{"email":"a\\u0000${uniqueEmail()}","password":"${password}"}`],
    ['POST /accounts', '/accounts', `{"email":"${uniqueEmail()}","password":"correct\\u0000horse"}`],
    ['POST /messages', '/messages', '{"message":"hello \\u0000"}'],
    ['POST /api-keys', '/api-keys', '{"name":"\\u0000"}'],
  ])('answers U+0000 in %s with 400 validation_failed', async (_label, path, body) => {
    const auth = path === '/api-keys' ? { Authorization: basic(me.email, ':', password) } : me.auth;
    const res = await request(t.app).post(path).set(auth).set('Content-Type', 'application/json').send(body);
    expectError(res, 400, 'validation_failed');
  });

  it.each([
    ['/accounts', `{"email":"\\ud800${uniqueEmail()}","password":"${password}"}`],
    ['/messages', '{"message":"hello \\udfff"}'],
  ])('answers a lone surrogate in POST %s with 400 invalid_json', async (path, body) => {
    const res = await request(t.app).post(path).set(me.auth).set('Content-Type', 'application/json').send(body);
    expectError(res, 400, 'invalid_json');
  });
});
