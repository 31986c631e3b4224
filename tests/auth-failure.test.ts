// Authentication fails closed and honestly: a storage failure while checking
// credentials is a logged 500 in the Error shape, never a 401 carrying the database's
// own message. Credentials are parsed and hashed once per request.
import crypto from 'node:crypto';
import request from 'supertest';
import { captureLog, customer, expectError, password, setupApp } from './helpers';

describe('a database error while checking credentials', () => {
  it('is a 500 internal_error for a Bearer key, logged with its cause, leaking nothing', async () => {
    const logged = captureLog();
    const t = setupApp({ log: logged.log });
    const caller = await customer(t.app);
    await t.query('ALTER TABLE api_keys RENAME TO api_keys_gone');
    const res = await request(t.app).get('/pets').set(caller.auth);
    expectError(res, 500, 'internal_error');
    expect(res.body.message).not.toMatch(/api_keys|table|sqlite/i);
    const failure = logged.lines().find((line) => line.msg === 'request failed');
    expect(failure).toMatchObject({ level: 50, requestId: res.headers['x-request-id'] });
    // The engine's own words, in the log only: SQLite's or PostgreSQL's.
    expect(JSON.stringify(failure)).toMatch(/no such table: api_keys|relation \\"api_keys\\" does not exist/);
  });

  it('is a 500 internal_error for HTTP Basic', async () => {
    const t = setupApp();
    const caller = await customer(t.app);
    await t.query('ALTER TABLE accounts RENAME TO accounts_gone');
    const res = await request(t.app).post('/api-keys').auth(caller.email, password);
    expectError(res, 500, 'internal_error');
    expect(res.body.message).not.toMatch(/accounts|table|sqlite/i);
  });
});

describe('credentials per request', () => {
  it('hashes a Bearer key once', async () => {
    const t = setupApp();
    const caller = await customer(t.app);
    const hashed: unknown[] = [];
    const createHash = crypto.createHash;
    const spy = jest.spyOn(crypto, 'createHash').mockImplementation((...args: Parameters<typeof createHash>) => {
      const hash = createHash(...args);
      const update = hash.update.bind(hash);
      hash.update = (data: unknown, ...rest: never[]) => {
        hashed.push(data);
        return (update as (...args: unknown[]) => crypto.Hash)(data, ...rest);
      };
      return hash;
    });
    // And the one-call form (crypto.hash), which server/security/auth.ts uses.
    const oneShot = crypto.hash;
    const oneShotSpy = jest.spyOn(crypto, 'hash').mockImplementation((...args: Parameters<typeof oneShot>) => {
      hashed.push(args[1]);
      return oneShot(...args);
    });
    try {
      expect((await request(t.app).get('/pets').set(caller.auth)).status).toBe(200);
    } finally {
      spy.mockRestore();
      oneShotSpy.mockRestore();
    }
    // (express-rate-limit hashes its own counter keys for the RateLimit header; those are not credentials.)
    expect(hashed.filter((data) => String(data).includes(caller.key))).toHaveLength(1);
  });
});
