// npm run bench, last part: the service's shapes beyond one process, by what each costs.
// One process on a SQLite file, WEB_CONCURRENCY=2 on one file, one and two instances on
// PostgreSQL (when BENCH_PG_URL names a server: scripts/bench.ts starts a throwaway one
// with scripts/with-postgres.sh), each a real process as `npm start` runs it, loaded with
// GET /pets/{id} and POST /store/orders (without and with an Idempotency-Key) by a
// customer's key, from wrk (scripts/bench/wrk.ts: a process of its own, not this one's
// event loop). The cluster is loaded with as many connections a worker as the one process
// holds, and again with the one process's (see main). Standalone:
//
//   npm run build && bash scripts/with-postgres.sh bash -c 'BENCH_PG_URL=$PG_URL npx tsx scripts/bench/postgres.ts'
//
// Besides req/s it reads the CPU time the service's processes (a cluster's primary and
// workers) and the PostgreSQL server's processes (the postmaster and its children, when
// the server runs on this machine) spent, from /proc/PID/stat, and divides it by the
// requests served: on two shared cores, wall-clock rates say who won the cores, CPU per
// request says what a request costs. Nothing is pinned here: WEB_CONCURRENCY is there to
// use every core, so pinning the service to one would measure nothing. Each shape and load
// is warmed until its CPU per request stops falling, then measured in interleaved rounds;
// ratios are medians of per-round ratios, so drift in machine load hits both sides alike.
// Targets are marked met or not; it exits 0 either way.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { builtService, clockTicks, freePort, median, stat, warmUntilStable } from './common';
import { ensureWrk, wrk } from './wrk';

const root = join(__dirname, '..', '..');
const adminUrl = process.env.BENCH_PG_URL;
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const connections = Number(process.env.BENCH_SHAPE_CONNECTIONS ?? 16);
/** Some of the shapes, by key (sqlite, cluster, pg, pg2), while working; all when unset. */
const only = (process.env.BENCH_SHAPES ?? 'sqlite,cluster,pg,pg2').split(',');
const password = 'a long bench password';
const KEYED = 'POST /store/orders, Idempotency-Key';
const cluster = 'SQLite, WEB_CONCURRENCY=2';
const clusterSameTotal = "SQLite, WEB_CONCURRENCY=2, the one process's connections";

async function start(env: Record<string, string>): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  // As `npm start` runs it (package.json).
  const child = spawn(builtService[0] as string, builtService.slice(1), {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      SEED_DEMO_DATA: 'false',
      RATE_LIMIT_PER_MINUTE: '1000000',
      // Stopping is not measured here: no balancer to wait for (docs/operations.md).
      SHUTDOWN_DELAY_MS: '0',
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

// ---- CPU time from /proc -----------------------------------------------------------

/**
 * Seconds of CPU the process and all its descendants have used: its own time, the time of
 * descendants still running, and that of descendants already gone (counted into their
 * parent once reaped).
 */
function treeCpu(pid: number): number {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(Number(entry));
    if (s) parents.set(s.ppid, [...(parents.get(s.ppid) ?? []), Number(entry)]);
  }
  let ticks = 0;
  const visit = (p: number) => {
    const s = stat(p);
    if (!s) return;
    ticks += s.own + s.children;
    for (const child of parents.get(p) ?? []) visit(child);
  };
  visit(pid);
  return ticks / clockTicks;
}

/** The PostgreSQL server's postmaster, when it runs on this machine (the parent of our backend), else null. */
async function postmasterPid(url: string): Promise<number | null> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    const backend = stat(rows[0]!.pid);
    if (!backend) return null;
    const cmdline = readFileSync(`/proc/${backend.ppid}/cmdline`, 'utf8');
    return /postgres/.test(cmdline) ? backend.ppid : null;
  } catch {
    return null;
  } finally {
    await client.end();
  }
}

// ---- load ----------------------------------------------------------------------------

/** An admin (account:create), a pet with the contract's maximum stock, a customer's key. */
async function prepare(port: number, dbEnv: Record<string, string>) {
  const base = `http://127.0.0.1:${port}`;
  const json = { 'Content-Type': 'application/json' };
  const basic = (email: string) => `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
  await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'scripts/account-create.ts', '--email', 'boss@example.com', `--password=${password}`, '--admin'],
    { cwd: root, env: { ...process.env, ...dbEnv } },
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
  /** Each request with an Idempotency-Key of its own (a first request, never a replay). */
  keyed?: boolean;
}

/** `load` on one instance for `duration` seconds from wrk's `conns` connections; every answer must be 2xx. */
async function fire(port: number, load: Load, auth: string, conns: number, duration: number): Promise<number> {
  const result = await wrk(
    port,
    [
      {
        method: load.method,
        path: load.path,
        headers: { Authorization: auth, ...(load.body && { 'Content-Type': 'application/json' }) },
        ...(load.body && { body: load.body }),
        ...(load.keyed && { uniqueHeader: 'Idempotency-Key' }),
      },
    ],
    { connections: conns, seconds: duration },
  );
  const bad = result.non2xx + result.errors;
  if (bad > 0) throw new Error(`${load.name} on port ${port}: ${bad} non-2xx answers or errors`);
  return result.requests;
}

interface Shape {
  name: string;
  /** The main process of each instance (a cluster's primary). */
  pids: number[];
  ports: number[];
  /** The connections it is loaded with, split between its instances. */
  connections: number;
  who: { petId: number; auth: string };
  /** The PostgreSQL server's postmaster, when the shape uses one on this machine. */
  postmaster: number | null;
}

interface Sample {
  rps: number;
  /** Service CPU seconds per request. */
  cpu: number;
  /** PostgreSQL CPU seconds per request (NaN when not measured). */
  dbCpu: number;
}

/** Req/s and CPU per request of a shape's instances loaded at once, connections split between them. */
async function measure(shape: Shape, load: Load, duration: number): Promise<Sample> {
  const each = Math.max(1, Math.floor(shape.connections / shape.ports.length));
  const cpu = () => shape.pids.reduce((sum, pid) => sum + treeCpu(pid), 0);
  const dbCpu = () => (shape.postmaster === null ? NaN : treeCpu(shape.postmaster));
  const [cpu0, db0] = [cpu(), dbCpu()];
  const served = (await Promise.all(shape.ports.map((port) => fire(port, load, shape.who.auth, each, duration)))).reduce(
    (a, b) => a + b,
    0,
  );
  const [cpu1, db1] = [cpu(), dbCpu()];
  return { rps: served / duration, cpu: (cpu1 - cpu0) / served, dbCpu: (db1 - db0) / served };
}

/** Loads in slices of 1 s until the CPU per request stops falling (warmUntilStable). The seconds it fell for. */
const warm = async (shape: Shape, load: Load) => (await warmUntilStable(async () => (await measure(shape, load, 1)).cpu)).seconds;

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
  ensureWrk();
  // scripts/bench.ts pins itself to one core for the previous part; the servers started
  // here (and PostgreSQL) would inherit it.
  if (process.platform === 'linux' && spawnSync('taskset', ['-V']).status === 0) {
    spawnSync(
      'taskset',
      ['-a', '-p', '-c', `0-${Math.max(0, Number(spawnSync('nproc', ['--all']).stdout?.toString().trim() || 1) - 1)}`, String(process.pid)],
      {
        stdio: 'ignore',
      },
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-shapes-'));
  const children: ChildProcess[] = [];
  try {
    const shapes: Shape[] = [];
    const add = async (
      name: string,
      envs: Array<Record<string, string>>,
      dbEnv: Record<string, string>,
      postmaster: number | null,
      shapeConnections = connections,
    ) => {
      const servers = [];
      for (const env of envs) {
        const server = await start(env);
        children.push(server.child);
        servers.push(server);
      }
      const who = await prepare(servers[0]!.port, dbEnv);
      shapes.push({
        name,
        pids: servers.map((s) => s.child.pid!),
        ports: servers.map((s) => s.port),
        connections: shapeConnections,
        who,
        postmaster,
      });
    };
    const one = { DATABASE_PATH: join(dir, 'one.db') };
    const two = { DATABASE_PATH: join(dir, 'two.db') };
    if (only.includes('sqlite')) await add('SQLite, 1 process', [one], one, null);
    if (only.includes('cluster')) {
      // Judged with each worker holding as many connections as the one process: a turn of
      // a process runs together the requests it read, so a process with half the
      // connections pays more a request, clustered or not (docs/performance.md, "Several
      // processes"). The same processes with the one process's connections, beside it.
      await add(cluster, [{ ...two, WEB_CONCURRENCY: '2' }], two, null, 2 * connections);
      shapes.push({ ...shapes.at(-1)!, name: clusterSameTotal, connections });
    }
    if (adminUrl && (only.includes('pg') || only.includes('pg2'))) {
      const pgEnv = { DATABASE_URL: await createPgDatabase('petstore_bench') };
      const postmaster = await postmasterPid(adminUrl);
      await add('PostgreSQL, 1 instance', [pgEnv], pgEnv, postmaster);
      const first = shapes.at(-1)!;
      if (!only.includes('pg')) shapes.pop();
      if (only.includes('pg2')) {
        // The first instance's server and one more, on the same database.
        const second = await start(pgEnv);
        children.push(second.child);
        shapes.push({
          ...first,
          name: 'PostgreSQL, 2 instances',
          pids: [...first.pids, second.child.pid!],
          ports: [...first.ports, second.port],
        });
      }
    }

    const loads = (petId: number): Load[] => [
      { name: 'GET /pets/{id}', method: 'GET', path: `/pets/${petId}` },
      { name: 'POST /store/orders', method: 'POST', path: '/store/orders', body: JSON.stringify({ petId }) },
      { name: KEYED, method: 'POST', path: '/store/orders', body: JSON.stringify({ petId }), keyed: true },
    ];
    const samples = new Map<string, Sample[]>();
    // Each shape and load warmed as the throughput part warms its targets: a process serves
    // a load at full speed only after seconds of it (docs/performance.md, "Warm before ready").
    const warmed: string[] = [];
    for (const shape of shapes) {
      for (const load of loads(shape.who.petId)) warmed.push(`${shape.name}, ${load.name}: ${await warm(shape, load)} s`);
    }
    console.log(`Warm-up, seconds of load until the CPU per request stopped falling: ${warmed.join('; ')}\n`);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < shapes.length; i++) {
        // Each round starts one shape further on, so no shape always follows the same one.
        const shape = shapes[(i + round) % shapes.length]!;
        for (const load of loads(shape.who.petId)) {
          const key = `${shape.name}|${load.name}`;
          samples.set(key, [...(samples.get(key) ?? []), await measure(shape, load, seconds)]);
        }
      }
    }
    report(shapes, samples, adminUrl ? null : 'no BENCH_PG_URL');
  } finally {
    await Promise.all(children.map(stop));
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(shapes: Shape[], samples: Map<string, Sample[]>, pgSkipped: string | null): void {
  const us = (s: number) => (Number.isFinite(s) ? `${(s * 1e6).toFixed(0)} µs` : '-');
  console.log(
    `Shapes: ${rounds} interleaved rounds of ${seconds} s, ${connections} keep-alive connections (two instances: half each, summed; ` +
      `WEB_CONCURRENCY=2: ${2 * connections}, as many a worker as the one process holds, and again with ${connections}); ` +
      `CPU per request from /proc/PID/stat of the service's processes and of PostgreSQL's${pgSkipped ? ` (PostgreSQL skipped: ${pgSkipped})` : ''}\n`,
  );
  console.log('| shape | load | req/s | service CPU per request | PostgreSQL CPU per request |');
  console.log('|---|---|---|---|---|');
  const loadNames = ['GET /pets/{id}', 'POST /store/orders', KEYED];
  for (const shape of shapes) {
    for (const load of loadNames) {
      const xs = samples.get(`${shape.name}|${load}`) ?? [];
      const m = (k: keyof Sample) => median(xs.map((x) => x[k]));
      console.log(`| ${shape.name} | ${load} | ${m('rps').toFixed(0)} | ${us(m('cpu'))} | ${us(m('dbCpu'))} |`);
    }
  }
  /** Median over rounds of a's `ka` / b's `kb`, both measured in the same round. */
  const ratio = (a: string, ka: keyof Sample, b: string, kb: keyof Sample, load: string) => {
    const x = samples.get(`${a}|${load}`) ?? [];
    const y = samples.get(`${b}|${load}`) ?? [];
    return median(x.map((s, i) => s[ka] / (y[i]?.[kb] ?? NaN)));
  };
  const lines: Array<[string, number, string]> = [];
  const [GET, POST] = loadNames as [string, string];
  const lite = 'SQLite, 1 process';
  const pg = 'PostgreSQL, 1 instance';
  lines.push([`${cluster} / 1 process, req/s, ${GET}`, ratio(cluster, 'rps', lite, 'rps', GET), '>= 1.5']);
  lines.push([`${cluster} / 1 process, service CPU per request, ${GET}`, ratio(cluster, 'cpu', lite, 'cpu', GET), '<= 1.1']);
  lines.push([`${cluster} / 1 process, req/s, ${POST}`, ratio(cluster, 'rps', lite, 'rps', POST), '']);
  lines.push([`${cluster} / 1 process, service CPU per request, ${POST}`, ratio(cluster, 'cpu', lite, 'cpu', POST), '<= 1.1']);
  for (const load of [GET, POST])
    lines.push([
      `${clusterSameTotal} / 1 process, service CPU per request, ${load}`,
      ratio(clusterSameTotal, 'cpu', lite, 'cpu', load),
      '',
    ]);
  if (!pgSkipped) {
    lines.push([`PostgreSQL / SQLite, service CPU per request, ${GET}`, ratio(pg, 'cpu', lite, 'cpu', GET), '<= 1.3']);
    lines.push([`PostgreSQL / SQLite, service CPU per request, ${POST}`, ratio(pg, 'cpu', lite, 'cpu', POST), '<= 2.5']);
    lines.push([`PostgreSQL / SQLite, service CPU per request, ${KEYED}`, ratio(pg, 'cpu', lite, 'cpu', KEYED), '']);
    lines.push([`PostgreSQL's own CPU / SQLite service CPU, per ${GET}`, ratio(pg, 'dbCpu', lite, 'cpu', GET), '<= 1.5']);
    lines.push([`PostgreSQL's own CPU / SQLite service CPU, per ${POST}`, ratio(pg, 'dbCpu', lite, 'cpu', POST), '']);
    lines.push([`PostgreSQL / SQLite, req/s, ${GET}`, ratio(pg, 'rps', lite, 'rps', GET), '']);
    lines.push([`PostgreSQL / SQLite, req/s, ${POST}`, ratio(pg, 'rps', lite, 'rps', POST), '']);
    for (const load of loadNames)
      lines.push([`PostgreSQL 2 instances / 1, req/s, ${load}`, ratio('PostgreSQL, 2 instances', 'rps', pg, 'rps', load), '']);
  }
  console.log('\n| ratio (median of rounds) | value | target | |');
  console.log('|---|---|---|---|');
  for (const [label, value, target] of lines) {
    const limit = Number(target.slice(3));
    const met = target.startsWith('>=') ? value >= limit : value <= limit;
    const verdict = !target ? '' : Number.isFinite(value) ? (met ? 'met' : 'NOT met') : 'not measured';
    console.log(`| ${label} | ${Number.isFinite(value) ? value.toFixed(2) : '-'} | ${target} | ${verdict} |`);
  }
  console.log('');
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
