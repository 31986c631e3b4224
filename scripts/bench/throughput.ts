// npm run bench, part 2: the service's throughput and tail latency beside its peers, in
// one run. Each server is its own process: the service exactly as `npm start` runs it
// (auth, request and response validation, rate limit, deprecation, logging, a SQLite
// file with the demo catalogue, a customer's Bearer key), and the references in this
// folder, all on the Node that runs this script (the project's own: npm puts
// node_modules/.bin first). One load generator (wrk, scripts/bench/wrk.ts) drives them
// all with the same connections and duration, after a warm-up, in interleaved rounds;
// with taskset the servers run on core 0 and wrk on core 1.
//
// Servers are compared by the CPU time their process spent per request (/proc/PID/stat):
// on two cores shared with whatever else the machine runs, requests per second say who
// won the core, CPU per request says what a request costs. "x times bare Express" is
// bare Express's CPU per request over the target's, the throughput a core would give.
// Ratios are medians of the per-round ratios, so drift in machine load hits both sides
// of each ratio alike.
//
// It is a benchmark, not a test: targets are marked met or not, and it exits 0 either
// way; only a harness failure (a server that does not start) is an error.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { clockTicks, customerKey, freePort, median, num, stat, warmUntilStable } from './common';
import { canPin, ensureWrk, wrk, type Load } from './wrk';
import { openDatabase } from '../../db/client';
import { createSqliteStorage } from '../../db/sqlite-storage';
import { createStore } from '../../domain/store';

const root = join(__dirname, '..', '..');
const env = process.env;
const connections = num('BENCH_CONNECTIONS', 32);
const durationS = num('BENCH_DURATION', 8);
/** Seconds of load after a target's throughput stopped rising, before the rounds. */
const warmupS = num('BENCH_WARMUP', 0);
const rounds = Math.max(1, Math.floor(num('BENCH_LOAD_ROUNDS', 3)));
const memoryFirst = Math.floor(num('BENCH_MEMORY_FIRST', 100_000));
const memoryTotal = Math.floor(num('BENCH_MEMORY_REQUESTS', 1_000_000));
const memoryCapS = num('BENCH_MEMORY_TIMEOUT', 900);
const readyRuns = Math.floor(num('BENCH_READY_RUNS', 5));
/** BENCH_READY_ONLY=1: the ready part alone (on a database the first start migrates), nothing else of this part. */
const readyOnly = env.BENCH_READY_ONLY === '1';
/** Comma-separated parts of target names to run (all when unset): for quick comparisons while working. */
const only = (env.BENCH_ONLY ?? '').split(',').filter(Boolean);
/** A pet of the demo catalogue: the GETs read it and the orders buy it. */
const petId = 1;
const maxStock = 1_000_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- processes -------------------------------------------------------------------

const children = new Set<ChildProcess>();
/** Children started in a process group of their own (npm start), signalled as a group. */
const groupLeaders = new Set<ChildProcess>();

function killAll(): void {
  for (const child of children) {
    try {
      if (groupLeaders.has(child)) process.kill(-(child.pid as number), 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  children.clear();
}

/** One GET; resolves with the status, or 0 when nothing answers. Never rejects. */
function probe(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

interface Server {
  name: string;
  port: number;
  child: ChildProcess;
  /** ms from spawn to the first 200 on the ready path. */
  readyMs: number;
  /** performance.now() at spawn. */
  began: number;
}

async function start(
  name: string,
  command: string[],
  extraEnv: Record<string, string>,
  ready: Load,
  options: { pin?: boolean; group?: boolean; timeoutMs?: number } = {},
): Promise<Server> {
  const port = await freePort();
  const [cmd, ...args] = options.pin && canPin ? ['taskset', '-c', '0', ...command] : command;
  const began = performance.now();
  const child = spawn(cmd as string, args, {
    cwd: root,
    env: { ...env, ...extraEnv, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: options.group ?? false,
  });
  children.add(child);
  if (options.group) groupLeaders.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 20_000) stderr += chunk.toString();
  });
  const deadline = began + (options.timeoutMs ?? 30_000);
  while (performance.now() < deadline) {
    if (child.exitCode !== null) break;
    if ((await probe(port, ready.path, ready.headers)) === 200) return { name, port, child, readyMs: performance.now() - began, began };
    await sleep(5);
  }
  await stop({ name, port, child, readyMs: NaN, began });
  throw new Error(`${name} did not answer 200 on ${ready.path} in time. Its stderr:\n${stderr.slice(-4000)}`);
}

async function stop(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    const group = groupLeaders.has(child);
    const signal = (sig: NodeJS.Signals) => {
      try {
        if (group) process.kill(-(child.pid as number), sig);
        else child.kill(sig);
      } catch {
        // already gone
      }
    };
    signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
  children.delete(child);
  groupLeaders.delete(child);
}

/** `npm start` without npm: the same node command, so its pid is the service's own. */
function serviceCommand(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const script = pkg.scripts.start ?? '';
  const words = script.split(/\s+/).filter(Boolean);
  if (words[0] !== 'node' || words.some((w) => /[&|;<>$`]/.test(w))) {
    throw new Error(`package.json "start" is not a plain node command; the bench cannot mirror it: ${script}`);
  }
  return [process.execPath, ...words.slice(1)];
}

/** `node dist/server/main.js`, with the Node options `npm start` gives it: the service without the build check. */
function mainCommand(): string[] {
  const command = serviceCommand();
  return [...command.slice(0, -1), join(root, 'dist', 'server', 'main.js')];
}

const node = (script: string) => [process.execPath, '--import', 'tsx', join(__dirname, script)];
/** Bare Express 5, plain JavaScript by node alone (express-hello.mjs says why). */
const helloCommand = [process.execPath, join(__dirname, 'express-hello.mjs')];

/** Resident set size of a process, in MiB (Linux /proc). */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return kb ? Number(kb) / 1024 : NaN;
}

// ---- load ------------------------------------------------------------------------

interface Sample {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time of the server's process per request served, in microseconds. */
  cpuUs: number;
  non2xx: number;
  errors: number;
}

/** CPU seconds a process has used so far. */
const cpuSeconds = (pid: number) => (stat(pid)?.own ?? NaN) / clockTicks;

const loadCore = canPin ? 1 : undefined;

async function fire(server: Server, load: Load | Load[], seconds: number): Promise<Sample> {
  const pid = server.child.pid as number;
  const before = cpuSeconds(pid);
  const result = await wrk(server.port, Array.isArray(load) ? load : [load], { connections, seconds, core: loadCore });
  const used = cpuSeconds(pid) - before;
  return {
    rps: result.requests / result.seconds,
    p50: result.p50,
    p99: result.p99,
    cpuUs: (used * 1e6) / result.requests,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

// ---- the run ---------------------------------------------------------------------

interface Target {
  name: string;
  server: () => Server;
  load: Load;
}

/**
 * How a target's throughput per core rose from its first second under load until it stopped
 * rising. Per core (a million over its CPU µs per request), not req/s: on shared cores req/s
 * say more about the neighbours than about the JIT.
 */
interface Warm {
  /** Requests per CPU second of each 1 s slice of load, from the first. */
  slices: number[];
  seconds: number;
}

/** Slices of 1 s while throughput per core still rises (warmUntilStable: CPU per request still falls). */
async function warmUp(server: Server, load: Load): Promise<Warm> {
  const { cpuUs, seconds } = await warmUntilStable(async () => (await fire(server, load, 1)).cpuUs);
  return { slices: cpuUs.map((cpu) => 1e6 / cpu), seconds };
}

/** The first slice's throughput per core over steady state's (the median of the last three slices). */
const firstOverSteady = (warm: Warm) => (warm.slices[0] ?? NaN) / median(warm.slices.slice(-3));

const fmtRps = (x: number) => (x >= 10_000 ? `${(x / 1000).toFixed(1)}k` : `${(x / 1000).toFixed(2)}k`);
const fmtMs = (x: number) => `${x.toFixed(x < 10 ? 1 : 0)} ms`;

/** How busy the machine is: the load generator shares it with whatever else runs. */
function machine(): string {
  const [one, five] = loadavg();
  return `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), load average ${one?.toFixed(2)} / ${five?.toFixed(2)} (1 / 5 min) before the run, node ${process.version}`;
}

/** Stocks the ordered pet to the contract's maximum, so no order is refused for stock. */
async function restock(databasePath: string): Promise<void> {
  const db = openDatabase(databasePath);
  try {
    // Store rules are async: close the file only once it has run.
    await createStore(createSqliteStorage(db)).inventory.setQuantity(petId, maxStock);
  } finally {
    db.$client.close();
  }
}

interface Row {
  target: Target;
  samples: Sample[];
  warm?: Warm;
}

export async function benchThroughput(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
  const databasePath = join(dir, 'petstore.db');
  const serviceEnv = {
    DATABASE_PATH: databasePath,
    // The limiter runs as shipped; only its budget is raised above what the load sends.
    RATE_LIMIT_PER_MINUTE: String(1_000_000),
    // Stopping is not measured here: no balancer to wait for (docs/operations.md).
    SHUTDOWN_DELAY_MS: '0',
    HOST: '127.0.0.1',
  };
  const cleanup = () => {
    killAll();
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = () => {
    cleanup();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', cleanup);
  try {
    console.log(
      `\nThroughput: ${connections} keep-alive connections, each target warmed until its throughput stops rising (then ${warmupS} s more), ${rounds} interleaved rounds of ${durationS} s per target, wrk; ` +
        (canPin ? 'servers pinned to core 0, wrk to core 1 (taskset).' : 'no pinning (taskset or a second core missing).'),
    );
    console.log(`Machine: ${machine()}`);
    ensureWrk();
    // This process (probes, the clock) beside wrk on core 1; each server is started on core 0.
    if (canPin) spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });

    // A brand-new database: the first start migrates it and loads the demo catalogue. Ready
    // as a balancer sees it (/readyz, after the warm-up), so that the first slice of load
    // below is a new instance's first second in a rolling restart.
    const service = await start('service', serviceCommand(), serviceEnv, { path: '/readyz' }, { pin: true });
    if (readyOnly) {
      await stop(service);
      return report([], null, await readiness(serviceEnv));
    }
    const key = await customerKey(`http://127.0.0.1:${service.port}`, 'bench@example.com');
    const auth = { Authorization: `Bearer ${key}` };
    await restock(databasePath);
    const pet = { path: `/pets/${petId}`, headers: auth };
    const refEnv = { DATABASE_PATH: databasePath };
    const hello = await start('express-hello', helloCommand, {}, { path: '/hello' }, { pin: true });
    const naive = await start('naive', node('naive-express.ts'), refEnv, pet, { pin: true });
    const fastify = await start('fastify', node('fastify.ts'), refEnv, pet, { pin: true });

    const targets: Target[] = [
      { name: 'bare Express 5, GET /hello', server: () => hello, load: { path: '/hello' } },
      { name: 'naive Express + validator, GET /pets/1', server: () => naive, load: pet },
      { name: 'Fastify 5 + schema, GET /pets/1', server: () => fastify, load: pet },
      { name: 'service GET /pets/1', server: () => service, load: pet },
      { name: 'service GET /pets?ids=1', server: () => service, load: { path: `/pets?ids=${petId}`, headers: auth } },
      {
        name: 'service POST /store/orders',
        server: () => service,
        load: {
          method: 'POST',
          path: '/store/orders',
          headers: { ...auth, 'Content-Type': 'application/json' },
          body: JSON.stringify({ petId, quantity: 1 }),
        },
      },
      { name: 'service GET /healthz', server: () => service, load: { path: '/healthz' } },
    ];
    const chosen = only.length === 0 ? targets : targets.filter((t, i) => i === 0 || only.some((o) => t.name.includes(o)));
    const rows: Row[] = chosen.map((target) => ({ target, samples: [] }));

    // Each target until its throughput stops rising (the service's first target straight
    // after its start, so its first slice is a new instance's first second), then
    // BENCH_WARMUP more seconds.
    for (const row of rows) {
      row.warm = await warmUp(row.target.server(), row.target.load);
      if (warmupS > 0) await fire(row.target.server(), row.target.load, warmupS);
    }
    for (let round = 0; round < rounds; round++) {
      // Each round starts one target further on, so no target always follows the same one.
      for (let i = 0; i < rows.length; i++) {
        const row = rows[(i + round) % rows.length] as Row;
        row.samples.push(await fire(row.target.server(), row.target.load, durationS));
      }
    }
    for (const server of [hello, naive, fastify, service]) await stop(server);

    const memory = await memoryCheck(serviceEnv, auth);
    const ready = await readiness(serviceEnv);
    report(rows, memory, ready);
  } finally {
    cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', cleanup);
  }
}

interface Memory {
  /** RSS of the fresh service 2 s after it answered, before any load. */
  idle: number;
  /** The highest RSS sampled over the whole run. */
  peak: number;
  afterFirst: number;
  afterTotal: number;
  /** The highest RSS sampled while the first `memoryFirst` requests were served, and the last as many. */
  peakFirst: number;
  peakLast: number;
  done: number;
  seconds: number;
}

/**
 * RSS of a fresh service over `memoryTotal` requests, a mix of the hot routes, sent in
 * runs of wrk of a few seconds each. One reading is also where V8 stands in its
 * collection cycle (the old generation fills and is collected over tens of thousands of
 * requests), which moves single readings by a tenth either way between runs of the same
 * code; so RSS is sampled every quarter second, and the highest while the first 100k
 * requests were served is compared with the highest of the last 100k: each spans several
 * collection cycles, and only growth with traffic can raise the second above the first.
 */
async function memoryCheck(serviceEnv: Record<string, string>, auth: Record<string, string>): Promise<Memory | null> {
  if (memoryTotal === 0 || !existsSync('/proc/self/status')) return null;
  await restock(serviceEnv.DATABASE_PATH as string);
  const service = await start('service', serviceCommand(), serviceEnv, { path: '/healthz' }, { pin: true });
  try {
    const mix: Load[] = [
      { path: `/pets/${petId}`, headers: auth },
      { path: `/pets?ids=${petId},2`, headers: auth },
      { path: '/healthz' },
      {
        method: 'POST',
        path: '/store/orders',
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({ petId, quantity: 1 }),
      },
    ];
    const pid = service.child.pid as number;
    await sleep(2000);
    const idle = rssMiB(pid);
    // Per run of wrk: the requests it served and the highest RSS sampled while it ran.
    const runs: Array<{ requests: number; peak: number }> = [];
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 250);
    const began = performance.now();
    let done = 0;
    let afterFirst = NaN;
    const elapsedS = () => (performance.now() - began) / 1000;
    while (done < memoryTotal && elapsedS() < memoryCapS) {
      peak = rssMiB(pid);
      const run = await wrk(service.port, mix, { connections, seconds: 5, core: loadCore });
      runs.push({ requests: run.requests, peak });
      done += run.requests;
      if (Number.isNaN(afterFirst) && done >= memoryFirst) afterFirst = rssMiB(pid);
    }
    clearInterval(sampler);
    const seconds = elapsedS();
    await sleep(1000);
    const afterTotal = rssMiB(pid);
    /** The highest peak over the runs that served the first (or last) `memoryFirst` requests. */
    const peakOver = (ordered: typeof runs) => {
      let counted = 0;
      let highest = 0;
      for (const run of ordered) {
        highest = Math.max(highest, run.peak);
        counted += run.requests;
        if (counted >= memoryFirst) break;
      }
      return highest;
    };
    const peakAll = Math.max(...runs.map((r) => r.peak));
    return {
      idle,
      peak: peakAll,
      afterFirst,
      afterTotal,
      peakFirst: peakOver(runs),
      peakLast: peakOver([...runs].reverse()),
      done,
      seconds,
    };
  } finally {
    await stop(service);
  }
}

/** ms from spawn: the first 200 on /healthz (the first answer), then on /readyz (ready, after the warm-up). */
interface Started {
  healthz: number[];
  readyz: number[];
  /** CPU ms of the process when each was seen (NaN for npm, whose children serve). */
  healthzCpu: number[];
  readyzCpu: number[];
}

interface Ready {
  /** `node dist/server/main.js`. */
  main: Started;
  /** `npm start`'s node command (scripts/start.mjs: the build check, then the service). */
  direct: Started;
  npm: Started;
  /** Bare Express 5 (express-hello.mjs) by node alone: the framework's own start, to its first answer. */
  hello: number[];
  helloCpu: number[];
  /** Bare Express 5's RSS 2 s after its first answer: the idle RSS's reference. */
  helloRss: number[];
}

/**
 * ms from spawn to the first 200 from /healthz and then from /readyz, on the existing
 * database, by node and by `npm start`: pinned to core 0 like every server here, so that
 * this process's probes on core 1 do not take their CPU from the start they time.
 */
async function readiness(serviceEnv: Record<string, string>): Promise<Ready> {
  const started = (): Started => ({ healthz: [], readyz: [], healthzCpu: [], readyzCpu: [] });
  const ready: Ready = { main: started(), direct: started(), npm: started(), hello: [], helloCpu: [], helloRss: [] };
  // On a busy machine npm alone can take far longer than a quiet start (docs/performance.md, run I).
  const timeoutMs = 120_000;
  const cpuMs = (server: Server) => cpuSeconds(server.child.pid as number) * 1000;
  const timed = async (into: Started, name: string, command: string[], group = false) => {
    const server = await start(name, command, serviceEnv, { path: '/healthz' }, { pin: true, group, timeoutMs });
    into.healthz.push(server.readyMs);
    into.healthzCpu.push(group ? NaN : cpuMs(server));
    while ((await probe(server.port, '/readyz')) !== 200 && performance.now() - server.began < timeoutMs) await sleep(5);
    into.readyz.push(performance.now() - server.began);
    into.readyzCpu.push(group ? NaN : cpuMs(server));
    await stop(server);
  };
  for (let i = 0; i < readyRuns; i++) {
    const bare = await start('express-hello', helloCommand, {}, { path: '/hello' }, { pin: true });
    ready.hello.push(bare.readyMs);
    ready.helloCpu.push(cpuMs(bare));
    await sleep(2000);
    ready.helloRss.push(rssMiB(bare.child.pid as number));
    await stop(bare);
    await timed(ready.main, 'node dist/server/main.js', mainCommand());
    await timed(ready.direct, 'service', serviceCommand());
    await timed(ready.npm, 'npm start', ['npm', 'start', '--silent'], true);
  }
  return ready;
}

function report(rows: Row[], memory: Memory | null, ready: Ready): void {
  const med = (row: Row, key: keyof Sample) => median(row.samples.map((s) => s[key]));
  const byName = (name: string) => rows.find((r) => r.target.name === name);
  /**
   * Median over rounds of what a request of `b` costs over what one of `a` costs (both
   * measured in the same round): how many times `b`'s throughput per core `a` has.
   */
  const ratio = (a: string, b: string) => {
    const x = byName(a)?.samples ?? [];
    const y = byName(b)?.samples ?? [];
    return median(x.map((s, i) => (y[i]?.cpuUs ?? NaN) / s.cpuUs));
  };
  const hello = 'bare Express 5, GET /hello';
  const naive = 'naive Express + validator, GET /pets/1';
  if (rows.length > 0) {
    console.log('\n| target | CPU per request | req/s | p50 | p99 | p99/p50 | vs bare Express (per core) | not 2xx |');
    console.log('|---|---|---|---|---|---|---|---|');
  }
  for (const row of rows) {
    const bad = row.samples.reduce((n, s) => n + s.non2xx + s.errors, 0);
    console.log(
      `| ${row.target.name} | ${med(row, 'cpuUs').toFixed(0)} µs | ${fmtRps(med(row, 'rps'))} | ${fmtMs(med(row, 'p50'))} | ${fmtMs(med(row, 'p99'))} | ` +
        `${med(row, 'p50') > 0 ? (med(row, 'p99') / med(row, 'p50')).toFixed(1) : '-'} | ${byName(hello) ? ratio(row.target.name, hello).toFixed(2) : '-'} | ${bad} |`,
    );
  }
  const lines: Array<[string, number, string, boolean]> = [];
  const atMost = (label: string, value: number, target: number, unit = '') =>
    lines.push([label, value, `<= ${target}${unit}`, value <= target]);
  /** Median over rounds of a request of `b`'s CPU over one of `a`'s: how many times `a`'s cost `b` has. */
  const cost = (b: string, a: string) => 1 / ratio(b, a);
  const get = 'service GET /pets/1';
  atMost('CPU per request, service GET /pets/1 / naive app', cost(get, naive), 1.15);
  atMost('CPU per request, service GET /pets?ids=1 / naive app', cost('service GET /pets?ids=1', naive), 1.15);
  atMost('CPU per request, service POST /store/orders / GET /pets/1', cost('service POST /store/orders', get), 1.2);
  lines.push(['service GET /pets/1 / bare Express, per core', ratio(get, hello), '', true]);
  const warmed = byName(get)?.warm;
  if (warmed) {
    lines.push([`service GET /pets/1: seconds of load until its throughput stopped rising`, warmed.seconds, '', true]);
    lines.push([`service GET /pets/1: a new instance's first second / steady state, per core`, firstOverSteady(warmed), '', true]);
  }
  for (const row of rows.filter((r) => r.target.name.startsWith('service'))) {
    atMost(`${row.target.name} p99 / p50`, median(row.samples.map((s) => s.p99 / s.p50)), 4);
  }
  if (ready.hello.length > 0) {
    // The start targets read the first answer: listening with the whole app, every operation
    // answered (docs/performance.md, "Start"); /readyz, after the warm-up, is printed beside.
    const express = median(ready.hello);
    atMost(
      'first answer, `node dist/server/main.js`, existing database (ms until /healthz 200; 300 on a quiet machine)',
      median(ready.main.healthz),
      300,
    );
    atMost(
      `first answer, the node command / bare Express 5's (${express.toFixed(0)} ms), medians`,
      median(ready.main.healthz) / express,
      1.5,
    );
    lines.push([
      `CPU until the first answer, the node command / bare Express 5's (${median(ready.main.healthzCpu).toFixed(0)} / ${median(ready.helloCpu).toFixed(0)} ms)`,
      median(ready.main.healthzCpu) / median(ready.helloCpu),
      '',
      true,
    ]);
    lines.push(['ready (/readyz 200, after the warm-up), `node dist/server/main.js` (ms)', median(ready.main.readyz), '', true]);
    lines.push(['CPU until /readyz 200, `node dist/server/main.js` (ms)', median(ready.main.readyzCpu), '', true]);
    lines.push(["first answer, npm start's node command (scripts/start.mjs; ms, /healthz)", median(ready.direct.healthz), '', true]);
    lines.push(["ready, npm start's node command (scripts/start.mjs; ms, /readyz)", median(ready.direct.readyz), '', true]);
    atMost(
      'first answer after npm start, existing database (ms until /healthz 200; 600 on a quiet machine)',
      median(ready.npm.healthz),
      600,
    );
    lines.push(['ready after npm start (ms, /readyz)', median(ready.npm.readyz), '', true]);
  }
  if (memory) {
    const bareRss = ready.helloRss.length > 0 ? `; bare Express 5 ${median(ready.helloRss).toFixed(1)} in the start part` : '';
    atMost(`RSS idle, a fresh service, 2 s after its first answer (MiB${bareRss})`, memory.idle, 80);
    atMost(`peak RSS over ${(memory.done / 1e6).toFixed(2)}M mixed requests (MiB)`, memory.peak, 200);
    const first = `${(memoryFirst / 1e3).toFixed(0)}k`;
    atMost(
      `peak RSS, last ${first} of ${(memory.done / 1e6).toFixed(2)}M requests / first ${first} (${memory.peakLast.toFixed(0)} / ${memory.peakFirst.toFixed(0)} MiB)`,
      memory.peakLast / memory.peakFirst,
      1.1,
    );
    lines.push([
      `one RSS reading after ${(memory.done / 1e6).toFixed(2)}M / after ${first} (${memory.afterTotal.toFixed(0)} / ${memory.afterFirst.toFixed(0)} MiB)`,
      memory.afterTotal / memory.afterFirst,
      '',
      true,
    ]);
  }
  console.log('\n| ratio (median of rounds) | value | target | |');
  console.log('|---|---|---|---|');
  for (const [label, value, target, met] of lines.filter(([, v]) => Number.isFinite(v))) {
    const shown = Math.abs(value) >= 10 ? value.toFixed(0) : value.toFixed(2);
    console.log(`| ${label} | ${shown} | ${target} | ${target ? (met ? 'met' : 'NOT met') : ''} |`);
  }
  const warms = rows.filter((r) => r.warm);
  if (warms.length > 0) {
    console.log('warm-up, requests per CPU second of each second of load until it stopped rising:');
    for (const row of warms) console.log(`  ${row.target.name}: ${(row.warm as Warm).slices.map((x) => fmtRps(x)).join(' ')}`);
  }
  if (memory && memory.done < memoryTotal) {
    console.log(`(memory check stopped at its ${memoryCapS} s cap after ${memory.done} of ${memoryTotal} requests)`);
  }
  if (ready.hello.length > 0) {
    const runs = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ');
    const both = (s: Started) => `/healthz ${runs(s.healthz)}, /readyz ${runs(s.readyz)}`;
    console.log(
      `start runs (ms): node dist/server/main.js ${both(ready.main)} (CPU ${runs(ready.main.healthzCpu)} / ${runs(ready.main.readyzCpu)}); ` +
        `scripts/start.mjs ${both(ready.direct)}; npm start ${both(ready.npm)}; bare Express ${runs(ready.hello)} (CPU ${runs(ready.helloCpu)}; RSS 2 s after, MiB: ${runs(ready.helloRss)})`,
    );
  }
}

// Alone: `npx tsx scripts/bench/throughput.ts` (after `npm run build`); with
// BENCH_READY_ONLY=1, only the start figures.
if (require.main === module) {
  benchThroughput().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
