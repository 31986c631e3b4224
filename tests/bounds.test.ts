// What one client can make: sign-ups per address, active API keys and undelivered
// messages per account (openapi.yaml, "Limits"). Each bound refuses only new things:
// an account already past one keeps using what it holds.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { createStore } from '../domain/store';
import { loadConfig } from '../server/config';
import { customer, expectError, password, setupApp, testDatabaseUrl, uniqueEmail, type Caller, type TestApp } from './helpers';

const signUp = (t: TestApp, from = '198.51.100.9', email = uniqueEmail('bound')) =>
  request(t.app).post('/accounts').set('X-Forwarded-For', from).send({ email, password });

describe('the defaults', () => {
  it('are 10 sign-ups an hour per address, 20 active keys and 100 queued messages per account', () => {
    expect(loadConfig({})).toMatchObject({
      signupsPerAddressPerHour: 10,
      bounds: { activeApiKeysPerAccount: 20, queuedMessagesPerAccount: 100 },
    });
  });
});

describe('POST /accounts: sign-ups per client address', () => {
  const env = { SIGNUPS_PER_ADDRESS_PER_HOUR: '3', TRUST_PROXY: 'loopback' };

  it('refuses the sign-up past the limit with 429 rate_limited, Retry-After and its own RateLimit entry', async () => {
    const t = setupApp({ env });
    for (let i = 0; i < 3; i++) {
      const res = await signUp(t);
      expect(res.status).toBe(201);
      expect(res.headers['ratelimit']).toMatch(new RegExp(`"signup"; r=${2 - i}; t=\\d+`));
      expect(res.headers['ratelimit-policy']).toMatch(/"signup"; q=3; w=3600; pk=:[^:]+:/);
    }
    const res = await signUp(t);
    expectError(res, 429, 'rate_limited');
    expect(res.body.message).toMatch(/sign-ups/);
    // The window is an hour, not the request limit's minute.
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(3500);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(3600);
  });

  it('counts only sign-ups that made an account, and only on POST /accounts', async () => {
    const t = setupApp({ env });
    const taken = uniqueEmail('taken');
    expect((await signUp(t, undefined, taken)).status).toBe(201);
    for (let i = 0; i < 4; i++) expectError(await signUp(t, undefined, taken), 409, 'conflict');
    expectError(
      await request(t.app).post('/accounts').set('X-Forwarded-For', '198.51.100.9').send({ email: 'not an email', password }),
      400,
      'validation_failed',
    );
    for (let i = 0; i < 5; i++) await request(t.app).get('/pets').set('X-Forwarded-For', '198.51.100.9');
    expect((await signUp(t)).status).toBe(201);
    expect((await signUp(t)).status).toBe(201);
    expectError(await signUp(t), 429, 'rate_limited');
  });

  it('counts each address on its own', async () => {
    const t = setupApp({ env });
    for (let i = 0; i < 3; i++) expect((await signUp(t, '198.51.100.1')).status).toBe(201);
    expectError(await signUp(t, '198.51.100.1'), 429, 'rate_limited');
    expect((await signUp(t, '198.51.100.2')).status).toBe(201);
  });

  it('counts an address once across the processes sharing the database', async () => {
    const shared = { ...env, WEB_CONCURRENCY: '2' };
    const dir = mkdtempSync(join(tmpdir(), 'petstore-signups-'));
    try {
      // Two apps as two worker processes would have them: each its own connection to one file
      // (or one PostgreSQL database), with the counters in it.
      const first = testDatabaseUrl ? setupApp({ env: shared }) : setupApp({ env: shared, databasePath: join(dir, 'db.sqlite') });
      const second = testDatabaseUrl
        ? setupApp({ env: shared, storage: first.storage })
        : setupApp({ env: shared, databasePath: join(dir, 'db.sqlite') });
      expect((await signUp(first)).status).toBe(201);
      expect((await signUp(second)).status).toBe(201);
      expect((await signUp(first)).status).toBe(201);
      expectError(await signUp(second), 429, 'rate_limited');
      if (!testDatabaseUrl) await Promise.all([first.storage.close(), second.storage.close()]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('POST /api-keys: active keys per account', () => {
  const env = { API_KEYS_PER_ACCOUNT: '3' };
  const createKey = (t: TestApp, me: Caller) => request(t.app).post('/api-keys').auth(me.email, password);

  it('refuses a key past the bound with 409 api_key_limit_reached; a revoked or expired key frees its place', async () => {
    const t = setupApp({ env });
    const me = await customer(t.app); // its first key
    const made = [];
    for (let i = 0; i < 2; i++) {
      const res = await createKey(t, me);
      expect(res.status).toBe(201);
      made.push(res.body.id as number);
    }
    const refused = await createKey(t, me);
    expectError(refused, 409, 'api_key_limit_reached');
    expect(refused.body.message).toMatch(/revoke/);
    expect((await request(t.app).get('/api-keys').set(me.auth)).body).toHaveLength(3);

    expect((await request(t.app).delete(`/api-keys/${made[0]}`).set(me.auth)).status).toBe(204);
    expect((await createKey(t, me)).status).toBe(201);
    expectError(await createKey(t, me), 409, 'api_key_limit_reached');

    await t.query('UPDATE api_keys SET expires_at = ? WHERE id = ?', '2020-01-01T00:00:00.000Z', made[1]);
    expect((await createKey(t, me)).status).toBe(201);
    expectError(await createKey(t, me), 409, 'api_key_limit_reached');
    // Another account has its own bound.
    const other = await customer(t.app);
    expect((await createKey(t, other)).status).toBe(201);
  });

  it('leaves an account already past the bound using, listing and revoking its keys', async () => {
    const t = setupApp({ env });
    const me = await customer(t.app);
    for (let i = 0; i < 61; i++) {
      await t.storage.insertApiKey({
        accountId: me.accountId,
        keyHash: `seeded-${me.accountId}-${i}`,
        prefix: 'ps_live_',
        lastFour: 'abcd',
        createdAt: new Date().toISOString(),
      });
    }
    const listed = await request(t.app).get('/api-keys?limit=100').set(me.auth);
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(62);
    const seeded = (listed.body as Array<{ id: number; lastFour: string }>).find((k) => k.lastFour === 'abcd')!;
    expect((await request(t.app).delete(`/api-keys/${seeded.id}`).set(me.auth)).status).toBe(204);
    expect((await request(t.app).get('/pets').set(me.auth)).status).toBe(200);
    expectError(await createKey(t, me), 409, 'api_key_limit_reached');
  });

  it('holds under concurrent creations: exactly the bound is reached, never passed', async () => {
    const t = setupApp({ env: { API_KEYS_PER_ACCOUNT: '5' } });
    const me = await customer(t.app);
    const answers = await Promise.all(Array.from({ length: 12 }, () => createKey(t, me)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(4);
    expect(statuses.filter((s) => s === 409)).toHaveLength(8);
    const listed = await request(t.app).get('/api-keys').set(me.auth);
    expect(listed.body).toHaveLength(5);
  });

  it('holds when the creations reach the store at the same moment', async () => {
    // Over HTTP each creation first checks a password (scrypt), which spaces them out;
    // here they all count at once, so the account's lock is what keeps the bound.
    const t = setupApp();
    const me = await customer(t.app);
    const store = createStore(t.storage, { activeApiKeysPerAccount: 5, queuedMessagesPerAccount: 1 });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        store.apiKeys.create({ accountId: me.accountId, keyHash: `at-once-${me.accountId}-${i}`, prefix: 'ps_live_', lastFour: 'abcd' }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(4);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'api_key_limit_reached' });
  });
});

describe('POST /messages: undelivered messages per account', () => {
  const env = { QUEUED_MESSAGES_PER_ACCOUNT: '3' };
  const send = (t: TestApp, me: Caller) => request(t.app).post('/messages').set(me.auth).send({ message: 'hello' });

  it('refuses a message past the bound with 429 message_queue_full and Retry-After; delivery frees places', async () => {
    const t = setupApp({ env });
    const me = await customer(t.app);
    for (let i = 0; i < 3; i++) expect((await send(t, me)).status).toBe(202);
    const refused = await send(t, me);
    expectError(refused, 429, 'message_queue_full');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another account has its own queue.
    expect((await send(t, await customer(t.app))).status).toBe(202);

    const now = new Date().toISOString();
    expect(await t.storage.deliverDue(now, now, 100)).toHaveLength(4);
    for (let i = 0; i < 3; i++) expect((await send(t, me)).status).toBe(202);
    expectError(await send(t, me), 429, 'message_queue_full');
  });

  it('leaves an account already past the bound reading its messages', async () => {
    const t = setupApp({ env });
    const me = await customer(t.app);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = `msg_${randomBytes(12).toString('hex')}`;
      await t.storage.insertMessage({ id, accountId: me.accountId, message: `seeded ${i}`, createdAt: new Date().toISOString() });
      ids.push(id);
    }
    const read = await request(t.app).get(`/messages/${ids[7]}`).set(me.auth);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ message: 'seeded 7', status: 'queued' });
    expectError(await send(t, me), 429, 'message_queue_full');
  });

  it('holds under concurrent sends: exactly the bound is queued, never more', async () => {
    const t = setupApp({ env: { QUEUED_MESSAGES_PER_ACCOUNT: '5' } });
    const me = await customer(t.app);
    const answers = await Promise.all(Array.from({ length: 12 }, () => send(t, me)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
    const [row] = await t.query("SELECT count(*) AS n FROM messages WHERE account_id = ? AND status = 'queued'", me.accountId);
    expect(Number(row!.n)).toBe(5);
  });

  it('holds when the sends reach the store at the same moment', async () => {
    const t = setupApp();
    const me = await customer(t.app);
    const store = createStore(t.storage, { activeApiKeysPerAccount: 1, queuedMessagesPerAccount: 5 });
    const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => store.messages.enqueue(me.accountId, 'at once')));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(5);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'message_queue_full' });
  });
});
