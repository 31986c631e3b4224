// npm run bench, the shared harness of the parts that price a feature: GET /pets/{petId} on
// the built service (as `npm start` runs it, each on a database of its own) with the feature
// off, on a second process also off (the noise of the comparison), and on. Rounds are
// interleaved and ratios are medians of per-round ratios, as in throughput.ts. Besides req/s
// it reads each service's CPU time from /proc: on two cores shared with the load generator
// and other tenants, wall-clock throughput moves with the neighbours, while the CPU a
// request costs the service is its own (requests per CPU second is the throughput one
// core gives). The load is wrk's, on core 1 (scripts/bench/wrk.ts): autocannon in this
// process could not keep the service busy, so its CPU per request counted the wake-ups of
// a half-idle server too (docs/performance.md, "Metrics and tracing").
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtService, clockTicks, customerKey, freePort, median, num, stat } from './common';
import { canPin, ensureWrk, wrk } from './wrk';

const root = join(__dirname, '..', '..');
export const connections = num('BENCH_CONNECTIONS', 32);
export const durationS = num('BENCH_DURATION', 8);
// A new process costs more a request for its first seconds of load ("Warm before ready"):
// each service is loaded this long before its rounds, so that they compare steady states.
export const warmupS = num('BENCH_OFF_ON_WARMUP', 10);
// A multiple of three gives each service each place equally often.
export const rounds = Math.max(1, Math.floor(num('BENCH_LOAD_ROUNDS', 6)));

const pinning = canPin;

interface Service {
  port: number;
  child: ChildProcess;
  auth: Record<string, string>;
}

/** The built service on a new database (demo catalogue included), and a customer's key. */
async function start(dir: string, name: string, env: Record<string, string>): Promise<Service> {
  const port = await freePort();
  const command = builtService;
  const [cmd, ...args] = pinning ? ['taskset', '-c', '0', ...command] : command;
  const child = spawn(cmd as string, args, {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_PATH: join(dir, `${name}.db`),
      // The limiter runs as shipped; only its budget is raised above what the load sends.
      RATE_LIMIT_PER_MINUTE: '1000000',
      // Stopping is not measured here: no balancer to wait for (docs/operations.md).
      SHUTDOWN_DELAY_MS: '0',
      ...env,
    },
    // Read, as a terminal would read the access lines; the tail is shown if it fails.
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i === 300 || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`the ${name} service did not become ready within 30 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const key = await customerKey(base, `${name}@example.com`);
  return { port, child, auth: { Authorization: `Bearer ${key}` } };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

interface Sample {
  rps: number;
  /** The service's CPU time per request, µs. */
  cpuUs: number;
  p99: number;
  bad: number;
}

const cpuTicks = (service: Service) => stat(service.child.pid as number)?.own ?? NaN;

async function fire(service: Service, seconds: number): Promise<Sample> {
  const before = cpuTicks(service);
  const result = await wrk(service.port, [{ path: '/pets/1', headers: service.auth }], {
    connections,
    seconds,
    ...(pinning && { core: 1 }),
  });
  return {
    rps: result.requests / result.seconds,
    cpuUs: (((cpuTicks(service) - before) / clockTicks) * 1e6) / result.requests,
    p99: result.p99,
    bad: result.non2xx + result.errors,
  };
}

export interface OffOn {
  /** off again / off, req/s: what a ratio near 1 has to beat. */
  noise: number;
  /** on / off, req/s. */
  cost: number;
  /** off again / off, requests per CPU second of the service. */
  cpuNoise: number;
  /** on / off, requests per CPU second of the service. */
  cpuCost: number;
  /** The lowest and highest round of cpuNoise and of cpuCost, as printed: "0.95-1.04". */
  cpuNoiseRounds: string;
  cpuCostRounds: string;
}

/**
 * Runs the three services, prints their table under `feature`, and returns the ratios.
 * Each round starts the three afresh, in an order that rotates from round to round, and
 * loads them one after another in that order: the same build measured a few per cent apart
 * by the place its process took among the three, so each takes each place in turn.
 */
export async function compareOffOn(feature: string, onEnv: Record<string, string>): Promise<OffOn> {
  const dir = mkdtempSync(join(tmpdir(), `petstore-bench-${feature}-`));
  const services: Service[] = [];
  try {
    ensureWrk();
    if (pinning) spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
    const targets = (
      [
        ['off', {}],
        ['off again', {}],
        ['on', onEnv],
      ] as const
    ).map(([name, env]) => ({ name, env, samples: [] as Sample[] }));
    for (let round = 0; round < rounds; round++) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length] as (typeof targets)[number]);
      const started: Service[] = [];
      for (const t of order) {
        const service = await start(dir, `${t.name.replace(' ', '-')}-${round}`, t.env);
        services.push(service);
        started.push(service);
      }
      for (const service of started) await fire(service, warmupS);
      for (let i = 0; i < order.length; i++)
        (order[i] as (typeof targets)[number]).samples.push(await fire(started[i] as Service, durationS));
      for (const service of started) await stop(service.child);
    }
    const [off, again, on] = targets as [(typeof targets)[number], (typeof targets)[number], (typeof targets)[number]];
    const ratio = (a: Sample[], b: Sample[]) => median(a.map((s, i) => s.rps / (b[i]?.rps ?? NaN)));
    const cpuRatios = (a: Sample[], b: Sample[]) => a.map((s, i) => (b[i]?.cpuUs ?? NaN) / s.cpuUs);
    const cpuRatio = (a: Sample[], b: Sample[]) => median(cpuRatios(a, b));
    const spread = (a: Sample[], b: Sample[]) => {
      const r = cpuRatios(a, b);
      return `${Math.min(...r).toFixed(2)}-${Math.max(...r).toFixed(2)}`;
    };
    console.log(`\n| ${feature} | req/s | service CPU per request | p99 | non-2xx |`);
    console.log('|---|---|---|---|---|');
    for (const t of targets) {
      const bad = t.samples.reduce((n, s) => n + s.bad, 0);
      console.log(
        `| ${t.name} | ${(median(t.samples.map((s) => s.rps)) / 1000).toFixed(2)}k | ${median(t.samples.map((s) => s.cpuUs)).toFixed(0)} µs | ` +
          `${median(t.samples.map((s) => s.p99)).toFixed(1)} ms | ${bad} |`,
      );
    }
    return {
      noise: ratio(again.samples, off.samples),
      cost: ratio(on.samples, off.samples),
      cpuNoise: cpuRatio(again.samples, off.samples),
      cpuCost: cpuRatio(on.samples, off.samples),
      cpuNoiseRounds: spread(again.samples, off.samples),
      cpuCostRounds: spread(on.samples, off.samples),
    };
  } finally {
    for (const s of services) await stop(s.child);
    rmSync(dir, { recursive: true, force: true });
  }
}
