// docs/decisions.md, Store rules: with any number of requests or processes, N orders
// against stock K sell exactly K units and stock never goes below 0. Real HTTP on
// 127.0.0.1: first one server, then two server processes sharing one SQLite file.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { createDatabase } from '../db/client';
import { createSqliteStorage } from '../db/sqlite-storage';
import { createStore } from '../domain/store';
import { admin, customer, password, setupApp, uniqueEmail } from './helpers';
import { startServer, type ServerProcess } from '../scripts/server-process';

const repoRoot = join(__dirname, '..');
const tsx = join(repoRoot, 'node_modules', '.bin', 'tsx');

interface Client {
  base: string;
  auth: { Authorization: string };
}

async function call(client: Client, method: string, path: string, body?: object) {
  const res = await fetch(`${client.base}${path}`, {
    method,
    headers: { ...client.auth, ...(body && { 'Content-Type': 'application/json' }) },
    ...(body && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Fires every order at once and tallies the answers by status and code. */
async function orderAllAtOnce(clients: Client[], petId: number, count: number) {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) => call(clients[i % clients.length] as Client, 'POST', '/store/orders', { petId })),
  );
  const tally: Record<string, number> = {};
  for (const a of answers) {
    const label = a.status === 201 ? '201' : `${a.status} ${a.body?.code}`;
    tally[label] = (tally[label] ?? 0) + 1;
  }
  return { answers, tally };
}

/** Units sold for a pet, from the admin's view of every order (all pages). */
async function unitsOrdered(boss: Client, petId: number): Promise<number> {
  let total = 0;
  let path: string | undefined = '/store/orders?limit=100';
  for (let pages = 0; path !== undefined && pages < 100; pages++) {
    const res = await fetch(`${boss.base}${path}`, { headers: boss.auth });
    const orders = (await res.json()) as Array<{ petId: number; quantity: number }>;
    total += orders.filter((o) => o.petId === petId).reduce((sum, o) => sum + o.quantity, 0);
    path = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
  }
  return total;
}

describe('100 simultaneous orders against one server on 127.0.0.1', () => {
  const t = setupApp();
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = await new Promise<Server>((resolve) => {
      const s = t.app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const address = server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('sell exactly the 10 in stock; the other 90 are 409, the pet is pending, nothing is 5xx', async () => {
    const boss: Client = { base, auth: (await admin(t)).auth };
    const buyers: Client[] = [];
    for (let i = 0; i < 5; i++) buyers.push({ base, auth: (await customer(t.app)).auth });
    const category = await call(boss, 'POST', '/categories', { name: 'Concurrent' });
    const pet = await call(boss, 'POST', '/pets', { name: 'Popular', categoryId: category.body.id });
    expect((await call(boss, 'PUT', `/store/inventory/${pet.body.id}`, { quantity: 10 })).status).toBe(200);

    const { tally } = await orderAllAtOnce(buyers, pet.body.id, 100);

    expect(tally['201']).toBe(10);
    expect((tally['409 insufficient_stock'] ?? 0) + (tally['409 pet_not_available'] ?? 0)).toBe(90);
    expect(Object.keys(tally).filter((label) => label.startsWith('5'))).toEqual([]);
    expect((await call(boss, 'GET', `/store/inventory/${pet.body.id}`)).body).toEqual({
      petId: pet.body.id,
      quantity: 0,
      status: 'pending',
    });
    expect(await unitsOrdered(boss, pet.body.id)).toBe(10);
  });

  it('place one order for 20 simultaneous retries with the same Idempotency-Key', async () => {
    const boss: Client = { base, auth: (await admin(t)).auth };
    const buyer: Client = { base, auth: (await customer(t.app)).auth };
    const category = await call(boss, 'POST', '/categories', { name: 'Retried' });
    const pet = await call(boss, 'POST', '/pets', { name: 'Retry me', categoryId: category.body.id });
    await call(boss, 'PUT', `/store/inventory/${pet.body.id}`, { quantity: 5 });

    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${base}/store/orders`, {
          method: 'POST',
          headers: { ...buyer.auth, 'Content-Type': 'application/json', 'Idempotency-Key': 'same-click' },
          body: JSON.stringify({ petId: pet.body.id }),
        }).then(async (res) => ({
          status: res.status,
          replayed: res.headers.get('idempotent-replayed'),
          body: (await res.json()) as { id: number },
        })),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(201));
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(answers.filter((a) => a.replayed === 'true')).toHaveLength(19);
    expect((await call(boss, 'GET', `/store/inventory/${pet.body.id}`)).body.quantity).toBe(4);
  });
});

/** A port nothing listens on right now: the OS picks it, we release it. */
describe('two server processes sharing one SQLite file', () => {
  let dir = '';
  let databasePath = '';
  const servers: ServerProcess[] = [];
  const bases: string[] = [];
  const logs = () => servers.map((server) => server.log()).join('');

  async function start(): Promise<string> {
    const server = await startServer({
      DATABASE_PATH: databasePath,
      SEED_DEMO_DATA: 'false',
      RATE_LIMIT_PER_MINUTE: '100000',
      SIGNUPS_PER_ADDRESS_PER_HOUR: '100000',
    });
    servers.push(server);
    return server.url;
  }

  /** What a new user does: an admin from the command line, customers through the API. */
  async function signUp(base: string, role: 'admin' | 'customer'): Promise<Client> {
    const email = uniqueEmail(role);
    if (role === 'admin') {
      await promisify(execFile)(tsx, ['scripts/account-create.ts', '--email', email, '--password', password, '--admin'], {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_PATH: databasePath },
      });
    } else {
      const res = await fetch(`${base}/accounts`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email, password }),
      });
      expect(res.status).toBe(201);
    }
    const key = await fetch(`${base}/api-keys`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
    });
    expect(key.status).toBe(201);
    return { base, auth: { Authorization: `Bearer ${((await key.json()) as { key: string }).key}` } };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-two-processes-'));
    databasePath = join(dir, 'petstore.db');
    // The first applies the migrations; the second then opens a migrated file.
    bases.push(await start());
    bases.push(await start());
  }, 90_000);

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('sell exactly the 10 in stock to 100 orders split between them, with no 5xx and no SQLITE_BUSY', async () => {
    const [a, b] = bases as [string, string];
    const boss = await signUp(a, 'admin');
    const buyers: Client[] = [];
    for (let i = 0; i < 6; i++) {
      const buyer = await signUp(i % 2 ? b : a, 'customer');
      buyers.push(buyer, { ...buyer, base: i % 2 ? a : b });
    }
    const category = await call(boss, 'POST', '/categories', { name: 'Shared' });
    const pet = await call(boss, 'POST', '/pets', { name: 'Shared pet', categoryId: category.body.id });
    expect((await call({ ...boss, base: b }, 'PUT', `/store/inventory/${pet.body.id}`, { quantity: 10 })).status).toBe(200);

    const { tally } = await orderAllAtOnce(buyers, pet.body.id, 100);

    expect(tally['201']).toBe(10);
    expect((tally['409 insufficient_stock'] ?? 0) + (tally['409 pet_not_available'] ?? 0)).toBe(90);
    for (const base of bases) {
      expect((await call({ ...boss, base }, 'GET', `/store/inventory/${pet.body.id}`)).body).toEqual({
        petId: pet.body.id,
        quantity: 0,
        status: 'pending',
      });
    }
    expect(await unitsOrdered({ ...boss, base: b }, pet.body.id)).toBe(10);
    expect(logs()).not.toMatch(/SQLITE_BUSY|database is locked/i);
  }, 60_000);

  it('keep stock plus open orders equal to what was stocked while orders and cancels race', async () => {
    const [a, b] = bases as [string, string];
    const boss = await signUp(b, 'admin');
    const buyer = await signUp(a, 'customer');
    const both = [buyer, { ...buyer, base: b }];
    const category = await call(boss, 'POST', '/categories', { name: 'Churn' });
    const pet = await call(boss, 'POST', '/pets', { name: 'Churned', categoryId: category.body.id });
    await call(boss, 'PUT', `/store/inventory/${pet.body.id}`, { quantity: 20 });
    const first = await orderAllAtOnce(both, pet.body.id, 20);
    const placed = first.answers.filter((x) => x.status === 201).map((x) => x.body.id as number);
    expect(placed).toHaveLength(20);

    const racing = await Promise.all([
      ...placed.slice(0, 10).map((id, i) => call(both[i % 2] as Client, 'DELETE', `/store/orders/${id}`)),
      ...Array.from({ length: 40 }, (_, i) => call(both[i % 2] as Client, 'POST', '/store/orders', { petId: pet.body.id })),
    ]);

    expect(racing.filter((x) => x.status >= 500)).toEqual([]);
    expect(racing.slice(0, 10).map((x) => x.status)).toEqual(Array(10).fill(204));
    const stock = (await call(boss, 'GET', `/store/inventory/${pet.body.id}`)).body.quantity as number;
    expect(stock).toBeGreaterThanOrEqual(0);
    expect(stock + (await unitsOrdered(boss, pet.body.id))).toBe(20);
  }, 60_000);
});

// HTTP spends far longer parsing and validating than the placing transaction holds the
// lock, so two servers rarely collide inside it. Threads calling the repository in a
// tight loop, each on its own connection to one file, collide all the time: this is the
// test that fails if placing an order stops being one IMMEDIATE transaction.
describe('placing orders from four threads, each with its own connection to one file', () => {
  const workerSource = `
    require('tsx/cjs');
    const { workerData, parentPort } = require('node:worker_threads');
    const { openDatabase } = require(workerData.root + '/db/client.ts');
    const { createSqliteStorage } = require(workerData.root + '/db/sqlite-storage.ts');
    const { createStore } = require(workerData.root + '/domain/store.ts');
    const db = openDatabase(workerData.databasePath);
    const { orders } = createStore(createSqliteStorage(db));
    const start = new Int32Array(workerData.start);
    parentPort.postMessage('ready');
    Atomics.wait(start, 0, 0, 30000);
    (async () => {
      const tally = { placed: 0, refused: 0, failures: [] };
      for (let i = 0; i < workerData.attempts; i++) {
        try {
          const { outcome } = await orders.place({ accountId: workerData.accountId, petId: workerData.petId, quantity: 1 });
          if (outcome.ok) tally.placed++;
          else tally.failures.push(outcome.error.code);
        } catch (error) {
          if (error.code === 'insufficient_stock' || error.code === 'pet_not_available') tally.refused++;
          else tally.failures.push(String(error && error.message));
        }
      }
      db.$client.close();
      parentPort.postMessage(tally);
    })();
  `;

  it('sell exactly the stock: 1,600 attempts against 1,000 units give 1,000 orders and stock 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-threads-'));
    const databasePath = join(dir, 'petstore.db');
    try {
      const db = createDatabase(databasePath);
      const repos = createStore(createSqliteStorage(db));
      const account = await repos.accounts.create({ email: uniqueEmail('threads'), passwordHash: 'unused', role: 'customer' });
      const category = await repos.categories.create({ name: 'Threads' });
      const pet = await repos.pets.create({ name: 'Contended', categoryId: category.id, status: 'available' });
      await repos.inventory.setQuantity(pet.id, 1000);

      const start = new SharedArrayBuffer(4);
      const workerData = { root: repoRoot, databasePath, accountId: account?.id, petId: pet.id, attempts: 400, start };
      const workers = Array.from({ length: 4 }, () => new Worker(workerSource, { eval: true, workerData }));
      const ready = workers.map((w) => new Promise((resolve) => w.once('message', resolve)));
      const done = workers.map(
        (w) =>
          new Promise<{ placed: number; refused: number; failures: string[] }>((resolve, reject) => {
            w.once('error', reject);
            w.on('message', (m) => typeof m === 'object' && resolve(m));
          }),
      );
      await Promise.all(ready);
      Atomics.store(new Int32Array(start), 0, 1);
      Atomics.notify(new Int32Array(start), 0);
      const tallies = await Promise.all(done);

      expect(tallies.flatMap((t) => t.failures)).toEqual([]);
      expect(tallies.reduce((sum, t) => sum + t.placed, 0)).toBe(1000);
      expect(tallies.reduce((sum, t) => sum + t.refused, 0)).toBe(600);
      expect(await repos.inventory.findByPetId(pet.id)).toEqual({ petId: pet.id, quantity: 0, status: 'pending' });
      const sold = db.$client.prepare('select count(*) as n, sum(quantity) as units from orders where pet_id = ?').get(pet.id);
      expect(sold).toEqual({ n: 1000, units: 1000 });
      db.$client.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
