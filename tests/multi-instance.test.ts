// Several processes on one database behave as one service (docs/deployment.md): three
// instances on one PostgreSQL (when the suite runs with TEST_DATABASE_URL), and
// WEB_CONCURRENCY=2 workers on one SQLite file (always). Real HTTP on 127.0.0.1, requests
// spread over the instances (round-robin; the cluster's own scheduler for the workers).
//
// The instances trust X-Forwarded-For, so each set-up call can come from its own address
// and only the rate-limit check spends a client's 30 requests a minute.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createPgDatabase, password, testDatabaseUrl, uniqueEmail } from './helpers';
import { eventually, repoRoot, startServer, type ServerProcess } from '../scripts/server-process';

const tsx = join(repoRoot, 'node_modules', '.bin', 'tsx');
const limit = 30;

interface Answer {
  status: number;
  headers: Headers;
  // Read as untyped JSON, like supertest's body; expect() checks it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

let addresses = 0;
/** A client address of its own (10.x.y.z), so set-up calls never share a rate-limit counter. */
const nextAddress = () => {
  const n = ++addresses;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
};

let spread = 0;

async function call(
  bases: string[],
  method: string,
  path: string,
  init: { auth?: string; body?: object; headers?: Record<string, string>; base?: string } = {},
): Promise<Answer> {
  const base = init.base ?? bases[spread++ % bases.length]!;
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      'X-Forwarded-For': nextAddress(),
      ...(init.auth && { Authorization: init.auth }),
      ...(init.body && { 'Content-Type': 'application/json' }),
      ...init.headers,
    },
    ...(init.body && { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
}

/**
 * A set-up call made as a careful client makes it: a 503 `overloaded` (too many passwords
 * being hashed at once, which 20 new customers at once can be on a small machine) is waited
 * out for its Retry-After and sent again, a bounded number of times.
 */
async function patiently(send: () => Promise<Answer>): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    const res = await send();
    if (res.status !== 503 || res.body.code !== 'overloaded' || attempt === 30) return res;
    await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000));
  }
}

async function keyOf(bases: string[], email: string): Promise<string> {
  const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
  const res = await patiently(() => call(bases, 'POST', '/api-keys', { auth: basic }));
  if (res.status !== 201) throw new Error(`POST /api-keys answered ${res.status}: ${JSON.stringify(res.body)}`);
  return `Bearer ${res.body.key as string}`;
}

async function customer(bases: string[]): Promise<string> {
  const email = uniqueEmail('multi');
  const res = await patiently(() => call(bases, 'POST', '/accounts', { body: { email, password } }));
  if (res.status !== 201) throw new Error(`POST /accounts answered ${res.status}: ${JSON.stringify(res.body)}`);
  return keyOf(bases, email);
}

/** The scenarios every multi-process shape must pass. */
function behavesAsOneService(
  shape: string,
  setup: () => Promise<{
    bases: string[];
    adminEnv: Record<string, string>;
    logs: () => string;
    processes: ServerProcess[];
    stoppedLines: number;
    restart?: (i: number) => Promise<ServerProcess>;
  }>,
  restartable = false,
) {
  describe(shape, () => {
    let bases: string[];
    let boss: string;
    let logs: () => string;
    let processes: ServerProcess[];
    let stoppedLines: number;
    let restart: ((i: number) => Promise<ServerProcess>) | undefined;
    let restarted = 0;

    beforeAll(async () => {
      const started = await setup();
      bases = started.bases;
      logs = started.logs;
      processes = started.processes;
      stoppedLines = started.stoppedLines;
      restart = started.restart;
      const email = uniqueEmail('multi-admin');
      await promisify(execFile)(tsx, ['scripts/account-create.ts', '--email', email, `--password=${password}`, '--admin'], {
        cwd: repoRoot,
        env: { ...process.env, ...started.adminEnv },
      });
      boss = await keyOf(bases, email);
    }, 120_000);

    it('sells exactly 100 to 300 concurrent orders against stock 100, with no 5xx', async () => {
      const category = await call(bases, 'POST', '/categories', { auth: boss, body: { name: `Oversell ${shape}` } });
      const pet = await call(bases, 'POST', '/pets', { auth: boss, body: { name: 'Scarce', categoryId: category.body.id } });
      expect((await call(bases, 'PUT', `/store/inventory/${pet.body.id}`, { auth: boss, body: { quantity: 100 } })).status).toBe(200);
      // 20 buyers, 15 orders each: under the 30-a-minute limit of each key.
      const buyers = await Promise.all(Array.from({ length: 20 }, () => customer(bases)));
      const answers = await Promise.all(
        Array.from({ length: 300 }, (_, i) => call(bases, 'POST', '/store/orders', { auth: buyers[i % 20], body: { petId: pet.body.id } })),
      );
      const tally: Record<string, number> = {};
      for (const a of answers) {
        const k = a.status === 201 ? '201' : `${a.status} ${String(a.body.code)}`;
        tally[k] = (tally[k] ?? 0) + 1;
      }
      expect(answers.filter((a) => a.status >= 500)).toEqual([]);
      expect(tally['201']).toBe(100);
      expect((tally['409 insufficient_stock'] ?? 0) + (tally['409 pet_not_available'] ?? 0)).toBe(200);
      for (const base of bases) {
        const stock = await call(bases, 'GET', `/store/inventory/${pet.body.id}`, { auth: boss, base });
        expect(stock.body).toEqual({ petId: pet.body.id, quantity: 0, status: 'pending' });
      }
    }, 120_000);

    it('delivers each of 50 messages exactly once, whichever process claims it', async () => {
      // Five senders, ten messages each: one POST and one GET per message stay under each key's limit.
      const senders = await Promise.all(Array.from({ length: 5 }, () => customer(bases)));
      const sent = await Promise.all(
        Array.from({ length: 50 }, (_, i) => call(bases, 'POST', '/messages', { auth: senders[i % 5], body: { message: `once ${i}` } })),
      );
      expect(sent.map((s) => s.status)).toEqual(Array(50).fill(202));
      const ids = sent.map((s) => s.body.id as string);
      // Every delivery is logged by the process that claimed it: wait until each id shows,
      // then require each exactly once.
      const claims = () =>
        logs()
          .split('\n')
          .filter((line) => line.includes('messages delivered'))
          .flatMap((line) => (JSON.parse(line) as { ids: string[] }).ids);
      await eventually(() => (ids.every((id) => claims().includes(id)) ? true : undefined), 30_000);
      const claimed = claims();
      for (const id of ids) expect({ id, claims: claimed.filter((c) => c === id).length }).toEqual({ id, claims: 1 });
      // And the API says so (one GET per message, within each sender's limit).
      const seen = await Promise.all(ids.map((id, i) => call(bases, 'GET', `/messages/${id}`, { auth: senders[i % senders.length] })));
      expect(seen.map((s) => s.body.status)).toEqual(Array(50).fill('sent'));
    }, 60_000);

    it(`lets exactly ${limit} requests of one client through in a minute, counted across processes`, async () => {
      const me = await customer(bases);
      // Sequential, so the count is exact however the calls are spread.
      const statuses: number[] = [];
      for (let i = 0; i < limit * 2; i++) statuses.push((await call(bases, 'GET', '/api-keys', { auth: me })).status);
      // The account's limit counts every authenticated request: creating the key (HTTP
      // Basic, in customer()) was the first of its ${limit}.
      expect(statuses.filter((s) => s === 200)).toHaveLength(limit - 1);
      expect(statuses.filter((s) => s === 429)).toHaveLength(limit + 1);
    }, 60_000);

    it('replays an Idempotency-Key placed on one process from another', async () => {
      const category = await call(bases, 'POST', '/categories', { auth: boss, body: { name: `Replay ${shape}` } });
      const pet = await call(bases, 'POST', '/pets', { auth: boss, body: { name: 'Replayed', categoryId: category.body.id } });
      await call(bases, 'PUT', `/store/inventory/${pet.body.id}`, { auth: boss, body: { quantity: 5 } });
      const me = await customer(bases);
      const headers = { 'Idempotency-Key': `replay-${process.pid}-${bases.length}` };
      const first = await call(bases, 'POST', '/store/orders', {
        auth: me,
        body: { petId: pet.body.id, quantity: 2 },
        headers,
        base: bases[0],
      });
      const again = await call(bases, 'POST', '/store/orders', {
        auth: me,
        body: { petId: pet.body.id, quantity: 2 },
        headers,
        base: bases[bases.length - 1],
      });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body).toEqual(first.body);
      expect((await call(bases, 'GET', `/store/inventory/${pet.body.id}`, { auth: boss })).body.quantity).toBe(3);
    }, 60_000);

    // Only shapes made of separate instances are restarted one by one.
    if (restartable)
      it('loses no request while the instances restart one after the other', async () => {
        if (!restart) throw new Error('this shape has no restart');
        const statuses: number[] = [];
        let restarting = true;
        // A stream of requests that touch the database (GET /readyz: not rate-limited), one
        // connection each, spread over whatever instances are up; a connection refused or
        // reset before its request was read goes to the next one, as a balancer does.
        const stream = (async () => {
          for (let i = 0; restarting && i < 5_000; i++) {
            for (let attempt = 0; attempt < bases.length * 20; attempt++) {
              const base = bases[(i + attempt) % bases.length]!;
              try {
                const res = await fetch(`${base}/readyz`, { headers: { Connection: 'close' } });
                const body = (await res.json()) as { message?: string };
                // An instance that has begun draining answers its readiness probe 503 "shutting
                // down" (its listener closes at the same moment; a connection the kernel had
                // already queued can still be read): the probe's designed answer, telling the
                // balancer to stop, not a lost request. Any other answer counts.
                if (!(res.status === 503 && body.message === 'The service is shutting down')) statuses.push(res.status);
                break;
              } catch (error) {
                // Refused: the instance no longer listens. Reset: the kernel had queued the
                // connection when the listener closed, so no request on it was read; a
                // balancer retries both on another instance.
                const code = (error as { cause?: { code?: string } }).cause?.code;
                if (code !== 'ECONNREFUSED' && code !== 'ECONNRESET') throw error;
                await new Promise((r) => setTimeout(r, 20));
              }
            }
          }
        })();
        for (let i = 0; i < processes.length; i++) {
          const next = await restart(i);
          bases[i] = next.url;
          restarted++;
        }
        restarting = false;
        await stream;
        expect(statuses.length).toBeGreaterThan(0);
        expect(statuses.filter((s) => s !== 200)).toEqual([]);
      }, 120_000);

    it('drains and exits 0 on SIGTERM, every process', async () => {
      const codes = await Promise.all(processes.map((p) => p.stop()));
      expect(codes).toEqual(processes.map(() => 0));
      // One "Stopped" per serving process, and the cluster's primary's once all its workers have.
      expect(logs().match(/"Stopped"/g)?.length).toBe(stoppedLines + restarted);
    }, 60_000);
  });
}

const instanceEnv = {
  TRUST_PROXY: 'loopback',
  RATE_LIMIT_PER_MINUTE: String(limit),
  SIGNUPS_PER_ADDRESS_PER_HOUR: '100000',
  MESSAGE_DELIVERY_DELAY_MS: '0',
  SEED_DEMO_DATA: 'false',
  LOG_LEVEL: 'debug',
};

const servers: ServerProcess[] = [];
const dirs: string[] = [];
afterAll(async () => {
  // Already stopped by the SIGTERM test unless it failed first.
  await Promise.all(
    servers
      .splice(0)
      .filter((s) => s.child.exitCode === null && s.child.signalCode === null)
      .map((s) => s.stop()),
  );
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}, 60_000);

if (testDatabaseUrl) {
  const adminUrl = testDatabaseUrl;
  behavesAsOneService(
    'three instances on one PostgreSQL',
    async () => {
      const url = await createPgDatabase(adminUrl, `petstore_multi_${randomBytes(6).toString('hex')}`);
      const env = { ...instanceEnv, DATABASE_URL: url };
      // Started together: the migrations' advisory lock lets one apply them.
      const started = await Promise.all([startServer(env, 60_000), startServer(env, 60_000), startServer(env, 60_000)]);
      servers.push(...started);
      const retired: ServerProcess[] = [];
      const restart = async (i: number) => {
        const old = started[i]!;
        expect(await old.stop()).toBe(0);
        retired.push(old);
        const next = await startServer(env, 60_000);
        started[i] = next;
        servers.push(next);
        return next;
      };
      const logs = () => [...retired, ...started].map((s) => s.log()).join('\n');
      return { bases: started.map((s) => s.url), adminEnv: { DATABASE_URL: url }, logs, processes: started, stoppedLines: 3, restart };
    },
    true,
  );
}

behavesAsOneService('WEB_CONCURRENCY=2 workers on one SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-cluster-'));
  dirs.push(dir);
  const databasePath = join(dir, 'petstore.db');
  const server = await startServer({ ...instanceEnv, DATABASE_PATH: databasePath, WEB_CONCURRENCY: '2' }, 60_000);
  servers.push(server);
  return { bases: [server.url], adminEnv: { DATABASE_PATH: databasePath }, logs: () => server.log(), processes: [server], stoppedLines: 3 };
});

/** A port free now: the workers open their own sockets only on a port named in advance. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as { port: number };
  await new Promise((r) => probe.close(r));
  return port;
}

async function clusterOnOwnSockets() {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-cluster-'));
  dirs.push(dir);
  const databasePath = join(dir, 'petstore.db');
  const port = await freePort();
  const server = await startServer({ ...instanceEnv, DATABASE_PATH: databasePath, WEB_CONCURRENCY: '2', PORT: String(port) }, 60_000);
  servers.push(server);
  return { server, port, databasePath };
}

behavesAsOneService('WEB_CONCURRENCY=2 workers on a named port (on Linux, a socket each)', async () => {
  const { server, databasePath } = await clusterOnOwnSockets();
  return { bases: [server.url], adminEnv: { DATABASE_PATH: databasePath }, logs: () => server.log(), processes: [server], stoppedLines: 3 };
});

// What the kernel shows: the sockets listening on a port (IPv4), and a process's children.
const listenersOn = (port: number) =>
  readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .filter((line) => {
      const [, local, , state] = line.trim().split(/\s+/);
      return state === '0A' && local?.endsWith(`:${port.toString(16).toUpperCase().padStart(4, '0')}`);
    }).length;
const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);

(process.platform === 'linux' ? describe : describe.skip)('WEB_CONCURRENCY=2 on Linux', () => {
  it('has each worker accept on a socket of its own, and replaces a worker that dies with one that does too', async () => {
    const { server, port } = await clusterOnOwnSockets();
    const primary = server.child.pid as number;
    // Two listeners on the port, the workers'; the primary's socket would be one.
    await eventually(() => (listenersOn(port) === 2 ? true : undefined));
    const [first] = childrenOf(primary);
    process.kill(first as number, 'SIGKILL');
    await eventually(() => (/Worker died; starting another/.test(server.log()) ? true : undefined));
    await eventually(() => {
      const workers = childrenOf(primary);
      return workers.length === 2 && !workers.includes(first as number) && listenersOn(port) === 2 ? true : undefined;
    }, 30_000);
    for (let i = 0; i < 10; i++) expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  }, 90_000);
});
