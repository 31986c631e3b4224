// Rate limits a client cannot dodge: per address before authentication, per account
// after it, failed Basic logins per account and per address, every password check per
// account, and the client address taken only from proxies the operator named.
import { createHash } from 'node:crypto';
import request from 'supertest';
import { loadConfig } from '../server/config';
import { customer, expectError, password, setupApp, uniqueEmail } from './helpers';

const fakeKey = (i: number) => ({ Authorization: `Bearer ps_live_made-up-${i}-${Math.random().toString(36).slice(2)}` });

describe('per client address, before authentication', () => {
  it('gives made-up Bearer values no counter of their own', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '3' } });
    for (let i = 0; i < 3; i++) expectError(await request(t.app).get('/pets').set(fakeKey(i)), 401, 'unauthorized');
    const res = await request(t.app).get('/pets').set(fakeKey(3));
    expectError(res, 429, 'rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('limits sign-ups from one address whatever Authorization they carry', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '3' } });
    const signUp = (i: number) =>
      request(t.app)
        .post('/accounts')
        .set(fakeKey(i))
        .send({ email: uniqueEmail('flood'), password });
    for (let i = 0; i < 3; i++) expect((await signUp(i)).status).toBe(201);
    expectError(await signUp(3), 429, 'rate_limited');
  });

  it('answers past the limit without looking the key up (the key table is gone: still 429, not 500)', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '2' } });
    for (let i = 0; i < 2; i++) await request(t.app).get('/pets');
    await t.query('ALTER TABLE api_keys RENAME TO api_keys_gone');
    expectError(await request(t.app).get('/pets').set(fakeKey(0)), 429, 'rate_limited');
  });
});

describe('the IETF headers (draft 8), as express-rate-limit wrote them', () => {
  // The partition key is the base64 of the first 12 hex digits of the counter key's SHA-256.
  const pk = (key: string) => Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');

  it('names each limiter with its remaining budget, reset, quota, window and partition key', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '5', RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '7', TRUST_PROXY: 'loopback' } });
    const caller = await customer(t.app);
    const res = await request(t.app).get('/api-keys').set(caller.auth).set('X-Forwarded-For', '198.51.100.7');
    expect(res.status).toBe(200);
    // customer() spent one request of the account (the key creation); this is the second.
    expect(res.headers['ratelimit']).toMatch(/^"address"; r=6; t=(60|59), "account"; r=3; t=(60|59)$/);
    expect(res.headers['ratelimit-policy']).toBe(
      `"address"; q=7; w=60; pk=:${pk('ip:198.51.100.7')}:, "account"; q=5; w=60; pk=:${pk(`account:${caller.accountId}`)}:`,
    );
  });

  it('leaves them off the probes, which no limiter counts', async () => {
    const t = setupApp({});
    const res = await request(t.app).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.headers['ratelimit']).toBeUndefined();
  });
});

describe('per account, after authentication', () => {
  it('counts an account across its keys and addresses', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '3', RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '1000', TRUST_PROXY: 'loopback' } });
    const caller = await customer(t.app);
    const from = (address: string) => request(t.app).get('/api-keys').set(caller.auth).set('X-Forwarded-For', address);
    // customer() made one authenticated request already: the key creation, with Basic.
    expect((await from('198.51.100.1')).status).toBe(200);
    expect((await from('198.51.100.2')).status).toBe(200);
    expectError(await from('198.51.100.3'), 429, 'rate_limited');
    // Another account from the same addresses is not affected.
    const other = await customer(t.app);
    expect((await request(t.app).get('/api-keys').set(other.auth).set('X-Forwarded-For', '198.51.100.3')).status).toBe(200);
  });
});

describe('failed HTTP Basic logins', () => {
  const env = { LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '1000', TRUST_PROXY: 'loopback' };

  it('locks password logins of one account after repeated failures, from any address, with 429 and Retry-After', async () => {
    const t = setupApp({ env });
    const victim = await customer(t.app);
    for (let i = 0; i < 3; i++) {
      const res = await request(t.app).post('/api-keys').auth(victim.email, `guess ${i}`).set('X-Forwarded-For', `203.0.113.${i}`);
      expectError(res, 401, 'unauthorized');
    }
    // Even the right password, from yet another address, waits out the lockout.
    const locked = await request(t.app).post('/api-keys').auth(victim.email, password).set('X-Forwarded-For', '203.0.113.99');
    expectError(locked, 429, 'rate_limited');
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
    // The victim's API key keeps working: a guesser cannot lock them out of it.
    expect((await request(t.app).get('/api-keys').set(victim.auth)).status).toBe(200);
  });

  it('does not count successful logins', async () => {
    const t = setupApp({ env });
    const user = await customer(t.app);
    for (let i = 0; i < 5; i++) expect((await request(t.app).post('/api-keys').auth(user.email, password)).status).toBe(201);
  });

  it('limits failures per address across accounts', async () => {
    const t = setupApp({ env: { LOGIN_FAILURES_PER_ACCOUNT: '1000', LOGIN_FAILURES_PER_ADDRESS: '3' } });
    for (let i = 0; i < 3; i++)
      expectError(await request(t.app).post('/api-keys').auth(uniqueEmail('spray'), 'guess'), 401, 'unauthorized');
    expectError(await request(t.app).post('/api-keys').auth(uniqueEmail('spray'), 'guess'), 429, 'rate_limited');
  });
});

describe('password checks per account, successful ones too', () => {
  const env = { PASSWORD_CHECKS_PER_MINUTE: '3', LOGIN_FAILURES_PER_ACCOUNT: '1000', TRUST_PROXY: 'loopback' };
  const makeKey = (email: string, pw = password, from = '198.51.100.20') =>
    request(t().app).post('/api-keys').auth(email, pw).set('X-Forwarded-For', from);
  let app: ReturnType<typeof setupApp> | undefined;
  const t = () => app as ReturnType<typeof setupApp>;
  beforeEach(() => {
    app = setupApp({ env });
  });

  it('refuses the right password past the limit, from any address, with 429 and the Retry-After of its minute', async () => {
    const began = Date.now();
    // customer() checked the password once to make its key; two more, from other addresses.
    const user = await customer(t().app);
    expect((await makeKey(user.email, password, '198.51.100.21')).status).toBe(201);
    expect((await makeKey(user.email, password, '198.51.100.22')).status).toBe(201);
    const refused = await makeKey(user.email, password, '198.51.100.23');
    expectError(refused, 429, 'rate_limited');
    expect(refused.body.message).toMatch(/password checks/);
    // The minute began with the first check: what is left of it, whole seconds rounded up.
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor(60 - (Date.now() - began) / 1000));
    // A wrong password is refused the same way, before it is checked: no 401, no failed login.
    expectError(await makeKey(user.email, 'a guess'), 429, 'rate_limited');
    // The email is matched whatever its case.
    expectError(await makeKey(user.email.toUpperCase()), 429, 'rate_limited');
    // The account's key keeps working.
    expect((await request(t().app).get('/api-keys').set(user.auth)).status).toBe(200);
  });

  it('leaves other accounts alone', async () => {
    const busy = await customer(t().app);
    for (let i = 0; i < 2; i++) expect((await makeKey(busy.email)).status).toBe(201);
    expectError(await makeKey(busy.email), 429, 'rate_limited');
    // Another account, from the same address: its own three checks.
    const other = await customer(t().app);
    for (let i = 0; i < 2; i++) expect((await makeKey(other.email)).status).toBe(201);
    expectError(await makeKey(other.email), 429, 'rate_limited');
  });

  it('counts wrong passwords as checks too', async () => {
    const user = await customer(t().app);
    expectError(await makeKey(user.email, 'guess 1'), 401, 'unauthorized');
    expectError(await makeKey(user.email, 'guess 2'), 401, 'unauthorized');
    const refused = await makeKey(user.email);
    expectError(refused, 429, 'rate_limited');
    expect(refused.body.message).toMatch(/password checks/);
  });

  it('keeps the failed-login lockout of an account, which answers first', async () => {
    const both = setupApp({ env: { PASSWORD_CHECKS_PER_MINUTE: '4', LOGIN_FAILURES_PER_ACCOUNT: '2', TRUST_PROXY: 'loopback' } });
    const victim = await customer(both.app);
    for (let i = 0; i < 2; i++)
      expectError(await request(both.app).post('/api-keys').auth(victim.email, `guess ${i}`), 401, 'unauthorized');
    // Three checks so far, one left; the lockout refuses before it, again and again.
    for (let i = 0; i < 3; i++) {
      const locked = await request(both.app).post('/api-keys').auth(victim.email, password);
      expectError(locked, 429, 'rate_limited');
      expect(locked.body.message).toMatch(/failed logins/);
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(60);
    }
    // Another account is neither locked out nor limited.
    const other = await customer(both.app);
    expect((await request(both.app).post('/api-keys').auth(other.email, password)).status).toBe(201);
  });

  it('does not count what the failed-login limits refuse', async () => {
    const both = setupApp({ env: { PASSWORD_CHECKS_PER_MINUTE: '4', LOGIN_FAILURES_PER_ADDRESS: '2', TRUST_PROXY: 'loopback' } });
    const user = await customer(both.app);
    const from = (address: string, pw = password) =>
      request(both.app).post('/api-keys').auth(user.email, pw).set('X-Forwarded-For', address);
    for (let i = 0; i < 2; i++) expectError(await from('203.0.113.1', `guess ${i}`), 401, 'unauthorized');
    // That address is locked out; its refusals check no password and spend none of the account's checks.
    for (let i = 0; i < 5; i++) {
      const locked = await from('203.0.113.1');
      expectError(locked, 429, 'rate_limited');
      expect(locked.body.message).toMatch(/failed logins/);
    }
    // Three checks so far: a fourth from elsewhere, then the account's limit.
    expect((await from('203.0.113.2')).status).toBe(201);
    const refused = await from('203.0.113.3');
    expectError(refused, 429, 'rate_limited');
    expect(refused.body.message).toMatch(/password checks/);
  });

  it('is 30 a minute by default', () => {
    expect(loadConfig({}).passwordChecksPerMinute).toBe(30);
  });
});

describe('TRUST_PROXY', () => {
  it('takes the right-most address not written by a trusted proxy, so a spoofed left-most entry changes nothing', async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '2', TRUST_PROXY: '1' } });
    const via = (spoofed: string) => request(t.app).get('/pets').set('X-Forwarded-For', `${spoofed}, 192.0.2.7`);
    expect((await via('10.0.0.1')).status).toBe(401);
    expect((await via('10.0.0.2')).status).toBe(401);
    expectError(await via('10.0.0.3'), 429, 'rate_limited');
    // Another client behind the same proxy has its own counter.
    expect((await request(t.app).get('/pets').set('X-Forwarded-For', '192.0.2.8')).status).toBe(401);
  });

  it.each([
    ['false', false],
    ['1', 1],
    ['2', 2],
    ['loopback', ['loopback']],
    ['10.0.0.0/8, 192.0.2.1, ::1, fd00::/8', ['10.0.0.0/8', '192.0.2.1', '::1', 'fd00::/8']],
  ])("takes Express's form %s", (value, expected) => {
    expect(loadConfig({ TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it.each(['true', 'yes', '10.0.0.0/33', 'proxy.example.com'])('refuses %s at start-up, naming the variable', (value) => {
    expect(() => loadConfig({ TRUST_PROXY: value })).toThrow(/TRUST_PROXY/);
  });
});

describe('the 429 message', () => {
  /** Every client over its limit, its window ending `inMs` from now: a store at the end of a window. */
  const overUntil = (inMs: number) => () => ({
    localKeys: true,
    init: () => {},
    increment: () => ({ totalHits: Number.MAX_SAFE_INTEGER, resetTime: new Date(Date.now() + inMs) }),
    decrement: () => {},
    resetKey: () => {},
  });

  it.each([
    [400, '1 second', '1'],
    [1_500, '2 seconds', '2'],
  ])('reads right for a window ending in %i ms: "retry in %s"', async (inMs, words, retryAfter) => {
    const t = setupApp({ rateLimitStores: overUntil(inMs) });
    const res = await request(t.app).get('/pets');
    expectError(res, 429, 'rate_limited');
    expect(res.body.message).toBe(`Too many requests; retry in ${words}`);
    expect(res.headers['retry-after']).toBe(retryAfter);
  });
});
