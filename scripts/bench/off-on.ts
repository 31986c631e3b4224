// npm run bench, the shared harness of the parts that price a feature: GET /pets/{petId} on
// the built service (as `npm start` runs it, each on a database of its own) with the feature
// off, on a second process also off (the noise of the comparison), and on. Rounds are
// interleaved and ratios are medians of per-round ratios, as in throughput.ts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { customerKey, freePort, median, num } from './common';

const root = join(__dirname, '..', '..');
export const connections = num('BENCH_CONNECTIONS', 32);
export const durationS = num('BENCH_DURATION', 8);
export const warmupS = num('BENCH_WARMUP', 3);
export const rounds = Math.max(1, Math.floor(num('BENCH_LOAD_ROUNDS', 3)));

const pinning =
  process.platform === 'linux' && spawnSync('taskset', ['-V']).status === 0 && Number(spawnSync('nproc').stdout?.toString()) >= 2;

interface Service {
  port: number;
  child: ChildProcess;
  auth: Record<string, string>;
}

/** The built service on a new database (demo catalogue included), and a customer's key. */
async function start(dir: string, name: string, env: Record<string, string>): Promise<Service> {
  const port = await freePort();
  const command = [process.execPath, 'dist/server/main.js'];
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
  p99: number;
  bad: number;
}

function fire(service: Service, seconds: number): Promise<Sample> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url: `http://127.0.0.1:${service.port}/pets/1`, connections, duration: seconds, headers: service.auth },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error('autocannon failed', { cause: err }));
        resolve({ rps: result.requests.total / (result.duration || seconds), p99: result.latency.p99, bad: result.non2xx + result.errors });
      },
    );
  });
}

export interface OffOn {
  /** off again / off: what a ratio near 1 has to beat. */
  noise: number;
  /** on / off. */
  cost: number;
}

/** Runs the three services, prints their req/s table under `feature`, and returns the ratios. */
export async function compareOffOn(feature: string, onEnv: Record<string, string>): Promise<OffOn> {
  const dir = mkdtempSync(join(tmpdir(), `petstore-bench-${feature}-`));
  const services: Service[] = [];
  try {
    if (pinning) spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
    const targets: Array<{ name: string; service: Service; samples: Sample[] }> = [];
    for (const [name, env] of [
      ['off', {}],
      ['off again', {}],
      ['on', onEnv],
    ] as const) {
      const service = await start(dir, name.replace(' ', '-'), env);
      services.push(service);
      targets.push({ name, service, samples: [] });
    }
    for (const t of targets) await fire(t.service, warmupS);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + round) % targets.length] as (typeof targets)[number];
        t.samples.push(await fire(t.service, durationS));
      }
    }
    const [off, again, on] = targets as [(typeof targets)[number], (typeof targets)[number], (typeof targets)[number]];
    const ratio = (a: Sample[], b: Sample[]) => median(a.map((s, i) => s.rps / (b[i]?.rps ?? NaN)));
    console.log(`\n| ${feature} | req/s | p99 | non-2xx |`);
    console.log('|---|---|---|---|');
    for (const t of targets) {
      const bad = t.samples.reduce((n, s) => n + s.bad, 0);
      console.log(
        `| ${t.name} | ${(median(t.samples.map((s) => s.rps)) / 1000).toFixed(2)}k | ${median(t.samples.map((s) => s.p99))} ms | ${bad} |`,
      );
    }
    return { noise: ratio(again.samples, off.samples), cost: ratio(on.samples, off.samples) };
  } finally {
    for (const s of services) await stop(s.child);
    rmSync(dir, { recursive: true, force: true });
  }
}
