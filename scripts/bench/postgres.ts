// The service on PostgreSQL beside SQLite, and one PostgreSQL instance beside two: GET
// /pets/{id} and POST /store/orders, each server a real process as `npm start` runs it.
// Self-contained; needs a PostgreSQL it may create databases on:
//
//   npm run build && bash scripts/with-postgres.sh bash -c 'BENCH_PG_URL=$PG_URL npx tsx scripts/bench/postgres.ts'
//
// Two instances are loaded at once, each with half the connections, and their req/s
// summed. Rounds are interleaved and ratios are medians of per-round ratios, so drift in
// machine load hits both sides alike. On a 2-core machine the instances, PostgreSQL and
// the load generator share the cores: "two against one" measures contention there, not
// scale-out; run it on a machine with cores to spare for that.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { Client } from 'pg';

const root = join(__dirname, '..', '..');
const adminUrl = process.env.BENCH_PG_URL;
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32);
const password = 'a long bench password';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

async function start(env: Record<string, string>): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  // As `npm start` runs it (package.json).
  const child = spawn(process.execPath, ['dist/server/main.js'], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      SEED_DEMO_DATA: 'false',
      RATE_LIMIT_PER_MINUTE: '1000000',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { port, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('a server did not become ready within 60 s');
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** An admin (account:create), a pet with the contract's maximum stock, a customer's key. */
async function prepare(port: number, dbEnv: Record<string, string>) {
  const base = `http://127.0.0.1:${port}`;
  const json = { 'Content-Type': 'application/json' };
  const basic = (email: string) => `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
  await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'scripts/account-create.ts', '--email', 'boss@example.com', `--password=${password}`, '--admin'],
    {
      cwd: root,
      env: { ...process.env, ...dbEnv },
    },
  );
  const key = async (email: string) =>
    ((await (await fetch(`${base}/api-keys`, { method: 'POST', headers: { Authorization: basic(email) } })).json()) as { key: string }).key;
  const boss = { Authorization: `Bearer ${await key('boss@example.com')}`, ...json };
  const category = (await (
    await fetch(`${base}/categories`, { method: 'POST', headers: boss, body: JSON.stringify({ name: 'Bench' }) })
  ).json()) as { id: number };
  const pet = (await (
    await fetch(`${base}/pets`, { method: 'POST', headers: boss, body: JSON.stringify({ name: 'Benched', categoryId: category.id }) })
  ).json()) as { id: number };
  await fetch(`${base}/store/inventory/${pet.id}`, { method: 'PUT', headers: boss, body: JSON.stringify({ quantity: 1_000_000 }) });
  await fetch(`${base}/accounts`, { method: 'POST', headers: json, body: JSON.stringify({ email: 'buyer@example.com', password }) });
  return { petId: pet.id, auth: `Bearer ${await key('buyer@example.com')}` };
}

interface Load {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

function fire(port: number, load: Load, auth: string, conns: number, duration: number): Promise<number> {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: `http://127.0.0.1:${port}${load.path}`,
        connections: conns,
        duration,
        method: load.method,
        headers: { Authorization: auth, ...(load.body && { 'Content-Type': 'application/json' }) },
        ...(load.body && { body: load.body }),
      },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error('autocannon failed', { cause: err }));
        const bad = result.non2xx + result.errors;
        if (bad > 0) return reject(new Error(`${load.name} on port ${port}: ${bad} non-2xx answers or errors`));
        resolve(result.requests.total / duration);
      },
    );
  });
}

/** Req/s of `ports` loaded at once, connections split between them. */
async function measure(ports: number[], load: Load, auth: string, duration: number): Promise<number> {
  const each = Math.max(1, Math.floor(connections / ports.length));
  const rates = await Promise.all(ports.map((port) => fire(port, load, auth, each, duration)));
  return rates.reduce((a, b) => a + b, 0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function createPgDatabase(name: string): Promise<string> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  await client.query(`drop database if exists ${name}`);
  await client.query(`create database ${name}`);
  await client.end();
  const url = new URL(adminUrl!);
  url.pathname = `/${name}`;
  return url.toString();
}

async function main(): Promise<void> {
  if (!adminUrl) throw new Error('BENCH_PG_URL must name a PostgreSQL server (see the usage at the top of this file)');
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-pg-'));
  const children: ChildProcess[] = [];
  try {
    const sqliteEnv = { DATABASE_PATH: join(dir, 'petstore.db') };
    const pgEnv = { DATABASE_URL: await createPgDatabase('petstore_bench') };
    const sqlite = await start(sqliteEnv);
    const pgA = await start(pgEnv);
    const pgB = await start(pgEnv);
    children.push(sqlite.child, pgA.child, pgB.child);
    const lite = await prepare(sqlite.port, sqliteEnv);
    const pg = await prepare(pgA.port, pgEnv);

    const loads = (petId: number): Load[] => [
      { name: 'GET /pets/{id}', method: 'GET', path: `/pets/${petId}` },
      { name: 'POST /store/orders', method: 'POST', path: '/store/orders', body: JSON.stringify({ petId }) },
    ];
    const targets = [
      { name: 'SQLite, 1 instance', ports: [sqlite.port], who: lite },
      { name: 'PostgreSQL, 1 instance', ports: [pgA.port], who: pg },
      { name: 'PostgreSQL, 2 instances', ports: [pgA.port, pgB.port], who: pg },
    ];
    const samples = new Map<string, number[]>();
    for (const target of targets) for (const load of loads(target.who.petId)) await measure(target.ports, load, target.who.auth, 1); // warm-up
    for (let round = 0; round < rounds; round++) {
      for (const target of targets) {
        for (const load of loads(target.who.petId)) {
          const key = `${target.name}|${load.name}`;
          samples.set(key, [...(samples.get(key) ?? []), await measure(target.ports, load, target.who.auth, seconds)]);
        }
      }
    }

    console.log(
      `PostgreSQL beside SQLite: ${rounds} interleaved rounds of ${seconds} s, ${connections} connections in all (two instances: half each, req/s summed)\n`,
    );
    console.log('| load | SQLite, 1 instance | PostgreSQL, 1 instance | PostgreSQL, 2 instances | PostgreSQL / SQLite | 2 instances / 1 |');
    console.log('|---|---|---|---|---|---|');
    for (const load of ['GET /pets/{id}', 'POST /store/orders']) {
      const rate = (target: string) => samples.get(`${target}|${load}`)!;
      const ratio = (a: string, b: string) => median(rate(a).map((x, i) => x / (rate(b)[i] as number))).toFixed(2);
      const rps = targets.map((target) => `${median(rate(target.name)).toFixed(0)} req/s`);
      console.log(
        `| ${load} | ${rps.join(' | ')} | ${ratio('PostgreSQL, 1 instance', 'SQLite, 1 instance')} | ${ratio('PostgreSQL, 2 instances', 'PostgreSQL, 1 instance')} |`,
      );
    }
    console.log('');
  } finally {
    await Promise.all(children.map(stop));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
