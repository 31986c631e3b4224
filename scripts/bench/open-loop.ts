// npm run bench, open-loop part: latency at a fixed arrival rate, below saturation. Each
// server a process on core 0, the generator on core 1 (taskset). The generator is
// scripts/bench/open-loop.c, compiled here with the system's C compiler (Debian's gcc,
// installed by scripts/ensure-cc.sh where missing): requests due at a fixed rate whatever
// the answers do, each one's latency counted from when it was due (no coordinated
// omission), as wrk2 does. A Node generator set the tail itself at these rates.
//
// 1. The capacity of one core: the service, closed loop (wrk, 32 connections), for
//    GET /pets/{id} and for POST /store/orders, after a warm-up.
// 2. The generator's floor: a trivial node:http server answering a constant, at the rates below.
// 3. At 50% and 80% of each capacity: the service's GET beside the naive app, Fastify and
//    bare Express (its GET /hello) at the same rates, and the service's orders beside the
//    naive app's (one better-sqlite3 transaction each, SQLite's defaults); p50, p99,
//    p99.9 and each server's CPU per request answered (/proc/PID/stat), medians of
//    interleaved rounds with their spread.
// Targets: the service's p99 <= 5 ms at 50% and <= 20 ms at 80%, and never above the
// naive app's at the same rate, for GETs and for orders. Writes the SVG chart of it all (scripts/bench/chart.ts)
// to BENCH_SVG (docs/performance.svg by default). BENCH_SKIP_OPEN_LOOP=1 skips the part;
// BENCH_OPEN_LOOP_SECONDS (10), _ROUNDS (2), _CONNECTIONS (64).
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chart, type ChartServer } from './chart';
import { builtService, clockTicks, customerKey, freePort, median, num, stat } from './common';
import { canPin, ensureWrk, wrk } from './wrk';

const root = join(__dirname, '..', '..');
const seconds = num('BENCH_OPEN_LOOP_SECONDS', 10);
const rounds = Math.max(1, Math.floor(num('BENCH_OPEN_LOOP_ROUNDS', 2)));
const connections = num('BENCH_OPEN_LOOP_CONNECTIONS', 64);
const svgPath = process.env.BENCH_SVG ?? join(root, 'docs', 'performance.svg');
const fractions = [0.5, 0.8] as const;
const password = 'a long bench password';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface OpenLoopRun {
  offered: number;
  answered: number;
  non2xx: number;
  errors: number;
  unanswered: number;
  /** ms; -1 when unanswered requests reach that percentile. */
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
  /** ms the generator itself sent late, at its p99. */
  sendLagP99: number;
}

/** The generator, compiled once into `dir`. */
function compile(dir: string): string {
  if (spawnSync('cc', ['--version']).error !== undefined) {
    const run = spawnSync('bash', [join(root, 'scripts', 'ensure-cc.sh')], { stdio: 'inherit' });
    if (run.status !== 0) throw new Error('no C compiler, and scripts/ensure-cc.sh could not install one');
  }
  const out = join(dir, 'open-loop');
  const cc = spawnSync('cc', ['-O2', '-o', out, join(__dirname, 'open-loop.c')], { encoding: 'utf8' });
  if (cc.status !== 0) throw new Error(`cc failed: ${cc.stderr}`);
  return out;
}

/** A request as bytes on the wire, written to a file for the generator. */
function requestFile(
  dir: string,
  name: string,
  r: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): string {
  const body = r.body ?? '';
  const head = [
    `${r.method ?? 'GET'} ${r.path} HTTP/1.1`,
    'Host: 127.0.0.1',
    ...Object.entries(r.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
    ...(body ? [`Content-Length: ${Buffer.byteLength(body)}`] : []),
  ];
  const file = join(dir, `${name}.http`);
  writeFileSync(file, `${head.join('\r\n')}\r\n\r\n${body}`);
  return file;
}

function generate(binary: string, port: number, rate: number, file: string): Promise<OpenLoopRun> {
  const args = ['127.0.0.1', String(port), String(rate), String(seconds), String(connections), file];
  const [cmd, ...rest] = canPin ? ['taskset', '-c', '1', binary, ...args] : [binary, ...args];
  return promisify(execFile)(cmd, rest, { timeout: (seconds + 30) * 1000 }).then(({ stdout }) => JSON.parse(stdout) as OpenLoopRun);
}

interface Proc {
  name: string;
  port: number;
  child: ChildProcess;
}

async function start(name: string, command: string[], env: Record<string, string>, readyPath: string): Promise<Proc> {
  const port = await freePort();
  const [cmd, ...args] = canPin ? ['taskset', '-c', '0', ...command] : command;
  const child = spawn(cmd as string, args, {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 600 && child.exitCode === null; i++) {
    const status = await fetch(`http://127.0.0.1:${port}${readyPath}`).then(
      (r) => r.status,
      () => 0,
    );
    // A reference's ready path may need a key: any answer means it listens.
    if (status !== 0) return { name, port, child };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`${name} did not start`);
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null) return;
  const exited = new Promise((r) => p.child.once('exit', r));
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

const cpuSeconds = (p: Proc) => {
  const s = stat(p.child.pid!);
  return s ? s.own / clockTicks : NaN;
};

interface Cell {
  runs: OpenLoopRun[];
  /** µs of the server's CPU per answered request, per run. */
  cpu: number[];
}

const fmt = (ms: number) => (ms < 0 ? '> run' : ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const spread = (xs: number[]) => {
  const ok = xs.filter((x) => x >= 0);
  return ok.length < 2 ? '' : ` (${fmt(Math.min(...ok))}-${fmt(Math.max(...ok))})`;
};
/**
 * The median, in which a percentile a run never reached (-1: requests left unanswered)
 * counts as larger than any: Number.MAX_VALUE when the median takes one in.
 */
const worstFirstMedian = (xs: number[]) => {
  const sorted = xs.map((x) => (x < 0 ? Number.MAX_VALUE : x)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const lo = sorted[Math.floor((sorted.length - 1) / 2)] as number;
  const hi = sorted[Math.floor(sorted.length / 2)] as number;
  return hi === Number.MAX_VALUE ? hi : (lo + hi) / 2;
};

export async function benchOpenLoop(): Promise<void> {
  ensureWrk();
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-open-loop-'));
  const procs: Proc[] = [];
  try {
    const binary = compile(dir);
    const [one, five] = loadavg();
    console.log(
      `\nOpen loop: ${seconds} s at fixed rates, ${connections} connections at most, ${rounds} interleaved rounds` +
        `${canPin ? '; servers on core 0, generator on core 1' : ', nothing pinned'}. ` +
        `Machine: ${cpus().length} cores, load ${one?.toFixed(2)} / ${five?.toFixed(2)}, node ${process.version}`,
    );
    const databasePath = join(dir, 'petstore.db');
    const db = { DATABASE_PATH: databasePath };
    const service = await start(
      'service',
      builtService,
      { ...db, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: String(1_000_000), SHUTDOWN_DELAY_MS: '0' },
      '/readyz',
    );
    procs.push(service);
    const base = `http://127.0.0.1:${service.port}`;
    // An admin stocks pet 1 of the demo catalogue, so that no order is refused for stock.
    await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'scripts/account-create.ts',
        '--email',
        'open-loop@example.com',
        `--password=${password}`,
        '--admin',
        '--exists-ok',
      ],
      { cwd: root, env: { ...process.env, ...db } },
    );
    const boss = (await (
      await fetch(`${base}/api-keys`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from(`open-loop@example.com:${password}`).toString('base64')}` },
      })
    ).json()) as { key: string };
    const stocked = await fetch(`${base}/store/inventory/1`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${boss.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ quantity: 1_000_000 }),
    });
    if (stocked.status !== 200) throw new Error(`PUT /store/inventory/1 answered ${stocked.status}`);
    const auth = { Authorization: `Bearer ${await customerKey(base, 'open-loop-buyer@example.com')}` };
    const node = (script: string) => [process.execPath, '--import', 'tsx', join(__dirname, script)];
    const naive = await start('naive', node('naive-express.ts'), db, '/pets/1');
    const fastify = await start('fastify', node('fastify.ts'), db, '/pets/1');
    const hello = await start('express', [process.execPath, join(__dirname, 'express-hello.mjs')], {}, '/hello');
    const trivial = await start('trivial', [process.execPath, '-e', trivialServer], {}, '/');
    procs.push(naive, fastify, hello, trivial);

    const get = { path: '/pets/1', headers: auth };
    const order = {
      method: 'POST',
      path: '/store/orders',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ petId: 1, quantity: 1 }),
    };
    const files = {
      get: requestFile(dir, 'get', get),
      order: requestFile(dir, 'order', order),
      hello: requestFile(dir, 'hello', { path: '/hello' }),
      trivial: requestFile(dir, 'trivial', { path: '/' }),
    };

    // 1. Capacity, closed loop, warm.
    const capacity = async (load: Parameters<typeof wrk>[1][number]) => {
      await wrk(service.port, [load], { connections: 32, seconds: 3, ...(canPin && { core: 1 }) });
      const r = await wrk(service.port, [load], { connections: 32, seconds: 5, ...(canPin && { core: 1 }) });
      return r.requests / r.seconds;
    };
    const capGet = await capacity(get);
    const capOrder = await capacity({ ...order, method: 'POST' });
    console.log(`Capacity of one core, closed loop: GET /pets/{id} ${capGet.toFixed(0)}/s, POST /store/orders ${capOrder.toFixed(0)}/s`);

    // 2 and 3: every (server, load, rate), interleaved.
    const cases: Array<{ key: string; proc: Proc; file: string; rate: number }> = [];
    for (const f of fractions) {
      const rate = Math.round(capGet * f);
      cases.push({ key: `trivial|${f}`, proc: trivial, file: files.trivial, rate });
      cases.push({ key: `service GET|${f}`, proc: service, file: files.get, rate });
      cases.push({ key: `naive GET|${f}`, proc: naive, file: files.get, rate });
      cases.push({ key: `fastify GET|${f}`, proc: fastify, file: files.get, rate });
      cases.push({ key: `express GET /hello|${f}`, proc: hello, file: files.hello, rate });
      cases.push({ key: `service order|${f}`, proc: service, file: files.order, rate: Math.round(capOrder * f) });
      cases.push({ key: `naive order|${f}`, proc: naive, file: files.order, rate: Math.round(capOrder * f) });
    }
    const cells = new Map<string, Cell>();
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < cases.length; i++) {
        const c = cases[(i + round * 2) % cases.length]!;
        const before = cpuSeconds(c.proc);
        const run = await generate(binary, c.proc.port, c.rate, c.file);
        const used = cpuSeconds(c.proc) - before;
        const cell = cells.get(c.key) ?? { runs: [], cpu: [] };
        cell.runs.push(run);
        cell.cpu.push((used / Math.max(1, run.answered)) * 1e6);
        cells.set(c.key, cell);
      }
    }

    const m = (key: string, k: keyof OpenLoopRun) => worstFirstMedian(cells.get(key)?.runs.map((r) => r[k]) ?? []);
    const show = (x: number) => (x === Number.MAX_VALUE ? '> run' : fmt(x));
    console.log(
      '\n| server, load | rate | p50 ms | p99 ms (spread) | p99.9 ms (spread) | CPU per request | errors, non-2xx, unanswered | generator late, p99 |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const c of cases) {
      const cell = cells.get(c.key)!;
      const bad = cell.runs.reduce((s, r) => s + r.errors + r.non2xx + r.unanswered, 0);
      console.log(
        `| ${c.key.split('|')[0]} | ${c.rate}/s (${Number(c.key.split('|')[1]) * 100}%) | ${show(m(c.key, 'p50'))} | ` +
          `${show(m(c.key, 'p99'))}${spread(cell.runs.map((r) => r.p99))} | ${show(m(c.key, 'p999'))}${spread(cell.runs.map((r) => r.p999))} | ` +
          `${median(cell.cpu).toFixed(0)} µs | ${bad} | ${show(m(c.key, 'sendLagP99'))} |`,
      );
    }
    console.log('\n| target | value | limit | |');
    console.log('|---|---|---|---|');
    for (const f of fractions) {
      const limit = f === 0.5 ? 5 : 20;
      for (const load of ['GET', 'order'] as const) {
        const p99 = m(`service ${load}|${f}`, 'p99');
        console.log(`| service ${load} p99 at ${f * 100}% | ${show(p99)} ms | <= ${limit} ms | ${p99 <= limit ? 'met' : 'NOT met'} |`);
      }
      for (const load of ['GET', 'order'] as const) {
        const own = m(`service ${load}|${f}`, 'p99');
        const naiveP99 = m(`naive ${load}|${f}`, 'p99');
        const met = own <= naiveP99 ? 'met' : 'NOT met';
        console.log(`| service ${load} p99 / the naive app's at ${f * 100}% | ${(own / naiveP99).toFixed(2)} | <= 1 | ${met} |`);
      }
    }

    const servers: ChartServer[] = [
      { name: 'this service', key: 'service GET' },
      { name: 'naive Express + validator', key: 'naive GET' },
      { name: 'Fastify 5 + schema', key: 'fastify GET' },
      { name: 'bare Express 5 (GET /hello)', key: 'express GET /hello' },
    ].map(({ name, key }) => ({
      name,
      cpuUs: median(fractions.flatMap((f) => cells.get(`${key}|${f}`)?.cpu ?? [])),
      latency: fractions.map((f) => ({ rate: Math.round(capGet * f), p50: m(`${key}|${f}`, 'p50'), p99: m(`${key}|${f}`, 'p99') })),
    }));
    const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
    writeFileSync(
      svgPath,
      chart(
        servers,
        `GET /pets/{id}, ${date} UTC, ${cpus().length} shared cores, load ${one?.toFixed(1)}; the generator's floor p99 ${show(m(`trivial|0.8`, 'p99'))} ms at 80%`,
      ),
    );
    console.log(`\nChart: ${svgPath}\n`);
  } finally {
    await Promise.all(procs.map(stop));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The generator's floor: a server that does nothing but answer. */
const trivialServer = `
const body = Buffer.from('{"ok":true}');
require('node:http').createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': body.length });
  res.end(body);
}).listen(Number(process.env.PORT), '127.0.0.1');`;

if (require.main === module) {
  benchOpenLoop().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
