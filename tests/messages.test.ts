// docs/decisions.md, Messages: the quickstart operation, its 400 and 401 cases, and delivery.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import request from 'supertest';
import { startDeliveryWorker, type DeliveryWorker, type SetTimer } from '../server/delivery-worker';
import { createLogger } from '../server/observability/log';
import { customer, expectError, password, postWithoutContentType, setupApp, uniqueEmail, type Caller } from './helpers';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';

const silent = createLogger('silent');

describe('POST /messages', () => {
  const t = setupApp();
  let me: Caller;

  beforeAll(async () => {
    me = await customer(t.app);
  });

  it('queues the message: 202 with {id, message, status: "queued", createdAt} and a Location', async () => {
    const before = Date.now();
    const res = await request(t.app).post('/messages').set(me.auth).send({ message: 'Hello from the pet store' });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^msg_[a-f0-9]{24}$/),
      message: 'Hello from the pet store',
      status: 'queued',
      createdAt: expect.any(String),
    });
    expect(Date.parse(res.body.createdAt)).toBeGreaterThanOrEqual(before - 1);
    expect(res.headers.location).toBe(`/messages/${res.body.id}`);
  });

  it('gives every message its own id', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      ids.add(
        (
          await request(t.app)
            .post('/messages')
            .set(me.auth)
            .send({ message: `m${i}` })
        ).body.id,
      );
    }
    expect(ids.size).toBe(5);
  });

  describe('400', () => {
    it('invalid JSON is invalid_json', async () => {
      const res = await request(t.app).post('/messages').set(me.auth).set('Content-Type', 'application/json').send('{"message": "Hello"');
      expectError(res, 400, 'invalid_json');
    });

    it('a missing message is validation_failed naming it', async () => {
      const res = await request(t.app).post('/messages').set(me.auth).send({});
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/body/message is required');
    });

    it('no Content-Type: application/json is invalid_content_type, not 415', async () => {
      expect(await postWithoutContentType(t.app, '/messages', me.auth, '{"message":"Hello"}')).toEqual({
        status: 400,
        body: { code: 'invalid_content_type', message: expect.any(String), status: 400 },
      });
      const asText = await request(t.app).post('/messages').set(me.auth).set('Content-Type', 'text/plain').send('{"message":"Hello"}');
      expectError(asText, 400, 'invalid_content_type');
    });

    it('an empty, too long or non-string message, or an unknown property, is validation_failed', async () => {
      for (const body of [{ message: '' }, { message: 'x'.repeat(2001) }, { message: 42 }, { message: 'hi', to: 'bob' }]) {
        expectError(await request(t.app).post('/messages').set(me.auth).send(body), 400, 'validation_failed');
      }
      const longest = await request(t.app)
        .post('/messages')
        .set(me.auth)
        .send({ message: 'x'.repeat(2000) });
      expect(longest.status).toBe(202);
    });
  });

  describe('401', () => {
    const post = () => request(t.app).post('/messages').send({ message: 'Hello' });

    it('a missing key', async () => {
      const res = await post();
      expectError(res, 401, 'unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="petstore"');
    });

    it('an invalid key', async () => {
      const res = await post().set('Authorization', `Bearer ${me.key}x`);
      expectError(res, 401, 'unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="petstore", error="invalid_token"');
    });

    it('a valid key not in the Bearer form', async () => {
      for (const authorization of [
        me.key,
        `Token ${me.key}`,
        `Bearer ${me.key} extra`,
        `Basic ${Buffer.from(`${me.email}:${password}`).toString('base64')}`,
      ]) {
        expectError(await post().set('Authorization', authorization), 401, 'unauthorized');
      }
    });

    it('queues nothing when refused', async () => {
      const [before] = await t.query('select count(*) as n from messages');
      await post();
      await post().set('Authorization', `Token ${me.key}`);
      const [after] = await t.query('select count(*) as n from messages');
      expect(Number(after?.n)).toBe(Number(before?.n));
    });
  });
});

describe('GET /messages/{messageId}', () => {
  const t = setupApp();

  it('shows the current status to its sender', async () => {
    const me = await customer(t.app);
    const sent = await request(t.app).post('/messages').set(me.auth).send({ message: 'status?' });
    const res = await request(t.app)
      .get(sent.headers.location as string)
      .set(me.auth);
    expect(res.status).toBe(200);
    // No worker runs in this app: it stays queued, and has no sentAt.
    expect(res.body).toEqual(sent.body);
  });

  it('answers another account’s message with 404, as if it did not exist', async () => {
    const me = await customer(t.app);
    const other = await customer(t.app);
    const sent = await request(t.app).post('/messages').set(me.auth).send({ message: 'private' });
    expectError(await request(t.app).get(`/messages/${sent.body.id}`).set(other.auth), 404, 'not_found');
    expectError(
      await request(t.app)
        .get(`/messages/msg_${'0'.repeat(24)}`)
        .set(me.auth),
      404,
      'not_found',
    );
  });

  it('answers an id that is not a message id with 400', async () => {
    const me = await customer(t.app);
    expectError(await request(t.app).get('/messages/42').set(me.auth), 400, 'validation_failed');
  });

  it('needs a key', async () => {
    expectError(await request(t.app).get(`/messages/msg_${'0'.repeat(24)}`), 401, 'unauthorized');
  });
});

describe('the delivery worker', () => {
  // A backlog past one batch (100) for one account: above the default bound on queued messages.
  const t = setupApp({ env: { QUEUED_MESSAGES_PER_ACCOUNT: '1000' } });
  const workers: DeliveryWorker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  // No timers: each test drives passes with runOnce() and its own clock.
  let clock = Date.now();
  const manual = (messageDeliveryDelayMs: number) => {
    const worker = startDeliveryWorker({
      storage: t.storage,
      config: { messageDeliveryDelayMs },
      log: silent,
      now: () => clock,
      autostart: false,
    });
    workers.push(worker);
    return worker;
  };
  const statusOf = async (me: Caller, id: string) => (await request(t.app).get(`/messages/${id}`).set(me.auth)).body;

  it('moves a message from queued to sent, with sentAt', async () => {
    const me = await customer(t.app);
    const sent = await request(t.app).post('/messages').set(me.auth).send({ message: 'deliver me' });
    clock = Date.now();
    expect(await manual(0).runOnce()).toContain(sent.body.id);
    const delivered = await statusOf(me, sent.body.id);
    expect(delivered).toEqual({ ...sent.body, status: 'sent', sentAt: expect.any(String) });
    expect(Date.parse(delivered.sentAt)).toBeGreaterThanOrEqual(Date.parse(delivered.createdAt));
  });

  it('waits MESSAGE_DELIVERY_DELAY_MS before delivering', async () => {
    const me = await customer(t.app);
    const sent = await request(t.app).post('/messages').set(me.auth).send({ message: 'not yet' });
    const worker = manual(60_000);
    clock = Date.parse(sent.body.createdAt) + 59_999;
    expect(await worker.runOnce()).not.toContain(sent.body.id);
    expect((await statusOf(me, sent.body.id)).status).toBe('queued');
    clock = Date.parse(sent.body.createdAt) + 60_000;
    expect(await worker.runOnce()).toContain(sent.body.id);
    expect((await statusOf(me, sent.body.id)).status).toBe('sent');
  });

  it('runs passes on its own timer until stopped, and leaves no timer behind', async () => {
    const me = await customer(t.app);
    // A hand-driven timer: a tick runs when the test fires it, and what is pending is visible.
    const pending = new Map<() => void, number>();
    let scheduled: () => void = () => undefined;
    const setTimer: SetTimer = (fn, ms) => {
      pending.set(fn, ms);
      scheduled();
      return () => pending.delete(fn);
    };
    const fire = async () => {
      const [fn] = [...pending.keys()];
      if (!fn) throw new Error('no timer is pending');
      pending.delete(fn);
      const next = new Promise<void>((resolve) => (scheduled = resolve));
      fn();
      await next; // the tick has run its pass and scheduled the next one
    };
    const worker = startDeliveryWorker({ storage: t.storage, config: { messageDeliveryDelayMs: 0 }, log: silent, intervalMs: 5, setTimer });
    workers.push(worker);
    expect([...pending.values()]).toEqual([5]);

    const first = await request(t.app).post('/messages').set(me.auth).send({ message: 'on a timer' });
    expect((await statusOf(me, first.body.id)).status).toBe('queued');
    await fire();
    expect((await statusOf(me, first.body.id)).status).toBe('sent');
    expect([...pending.values()]).toEqual([5]);

    await worker.stop();
    // No timer is left to make another pass.
    expect(pending.size).toBe(0);
    const sent = await request(t.app).post('/messages').set(me.auth).send({ message: 'after stop' });
    expect((await statusOf(me, sent.body.id)).status).toBe('queued');
  });

  it('drains a backlog larger than one batch in one pass', async () => {
    const me = await customer(t.app);
    const ids: string[] = [];
    for (let i = 0; i < 250; i++) ids.push((await t.repos.messages.enqueue(me.accountId, `b${i}`)).id);
    clock = Date.now();
    const delivered = await manual(0).runOnce();
    expect(delivered).toEqual(expect.arrayContaining(ids));
    const [left] = await t.query("select count(*) as n from messages where status = 'queued'");
    expect(Number(left?.n)).toBe(0);
  });
});

describe('the periodic purge', () => {
  const t = setupApp();

  it('forgets Idempotency-Keys past 24 hours and ended rate-limit windows, and nothing else', async () => {
    const me = await customer(t.app);
    const category = await t.repos.categories.create({ name: 'Purged' });
    const pet = await t.repos.pets.create({ name: 'Purgeable', categoryId: category.id, status: 'available' });
    await t.repos.inventory.setQuantity(pet.id, 5);
    await t.repos.orders.place({ accountId: me.accountId, petId: pet.id, quantity: 1 }, 'old-key');
    await t.repos.orders.place({ accountId: me.accountId, petId: pet.id, quantity: 1 }, 'new-key');
    const now = Date.now();
    await t.query(
      "update idempotency_keys set created_at = ? where key = 'old-key'",
      new Date(now - 24 * 60 * 60 * 1000 - 1).toISOString(),
    );
    await t.storage.takeRateLimitLease('ended', 60_000, now - 120_000, 1, 10);
    await t.storage.takeRateLimitLease('running', 60_000, now, 1, 10);

    const worker = startDeliveryWorker({
      storage: t.storage,
      config: { messageDeliveryDelayMs: 0 },
      log: silent,
      now: () => now,
      autostart: false,
    });
    await worker.runOnce();
    await worker.stop();

    const keys = await t.query('select key from idempotency_keys order by key');
    expect(keys.map((r) => r.key)).toEqual(['new-key']);
    // (On PostgreSQL the app's own limiter keeps its counters in the same table.)
    const counters = (await t.query('select key from rate_limits')).map((r) => r.key);
    expect(counters).toContain('running');
    expect(counters).not.toContain('ended');
  });
});

describe('messages survive a restart', () => {
  let dir: string;
  let server: ServerProcess | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-messages-'));
  });
  afterAll(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('delivers after a restart what was still queued at SIGTERM, and stops cleanly', async () => {
    const databasePath = join(dir, 'petstore.db');
    const env = { DATABASE_PATH: databasePath, SEED_DEMO_DATA: 'false' };

    server = await startServer({ ...env, MESSAGE_DELIVERY_DELAY_MS: '60000' });
    const email = uniqueEmail('restart');
    const json = { 'Content-Type': 'application/json' };
    expect(
      (await fetch(`${server.url}/accounts`, { method: 'POST', headers: json, body: JSON.stringify({ email, password }) })).status,
    ).toBe(201);
    const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
    const { key } = (await (await fetch(`${server.url}/api-keys`, { method: 'POST', headers: { Authorization: basic } })).json()) as {
      key: string;
    };
    const auth = { Authorization: `Bearer ${key}` };
    const queued = await fetch(`${server.url}/messages`, {
      method: 'POST',
      headers: { ...auth, ...json },
      body: JSON.stringify({ message: 'survive' }),
    });
    expect(queued.status).toBe(202);
    const { id } = (await queued.json()) as { id: string };

    expect(await server.stop()).toBe(0);
    expect(server.log()).toContain('"msg":"Stopped"');
    const file = new Database(databasePath, { readonly: true });
    try {
      expect(file.prepare('select status, sent_at from messages where id = ?').get(id)).toEqual({ status: 'queued', sent_at: null });
    } finally {
      file.close();
    }

    server = await startServer({ ...env, MESSAGE_DELIVERY_DELAY_MS: '0' });
    const url = `${server.url}/messages/${id}`;
    const delivered = await eventually(async () => {
      const body = (await (await fetch(url, { headers: auth })).json()) as { status: string; sentAt?: string };
      return body.status === 'sent' ? body : undefined;
    }, 10_000);
    expect(delivered).toMatchObject({ id, message: 'survive', status: 'sent', sentAt: expect.any(String) });
    expect(await server.stop()).toBe(0);
  }, 60_000);
});
