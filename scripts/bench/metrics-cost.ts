// npm run bench, the metrics part (issue 24, item 5): GET /pets/{petId} on the service with
// metrics off (the default), on a second process also off (so the noise of the
// comparison shows), and with metrics on (METRICS_PORT; tracing off), scraped every
// 5 s as Prometheus would. The target: on keeps >= 0.95x of off's throughput. Each
// server is the built service as `npm start` runs it, with a database of its own; rounds
// are interleaved and ratios are medians of per-round ratios, as in throughput.ts.
// Alone: `npm run build && npx tsx scripts/bench/metrics-cost.ts`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';

const root = join(__dirname, '..', '..');
const num = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0`);
  return value;
};
const connections = num('BENCH_CONNECTIONS', 32);
const durationS = num('BENCH_DURATION', 8);
const warmupS = num('BENCH_WARMUP', 3);
const rounds = Math.max(1, Math.floor(num('BENCH_LOAD_ROUNDS', 3)));
const scrapeEveryMs = 5_000;
const target = 0.95;
const password = 'a long bench password';

const pinning =
  process.platform === 'linux' && spawnSync('taskset', ['-V']).status === 0 && Number(spawnSync('nproc').stdout?.toString()) >= 2;

const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

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
  const email = `${name}@example.com`;
  const signUp = await fetch(`${base}/accounts`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (signUp.status !== 201) throw new Error(`POST /accounts answered ${signUp.status}`);
  const made = await fetch(`${base}/api-keys`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
  });
  const { key } = (await made.json()) as { key?: string };
  if (made.status !== 201 || !key) throw new Error(`POST /api-keys answered ${made.status}`);
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

/** Scrapes GET /metrics every few seconds while the load runs; counts the scrapes that answered 200. */
function scraper(port: number): { stop: () => Promise<number> } {
  let scrapes = 0;
  let last: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    last = fetch(`http://127.0.0.1:${port}/metrics`).then(
      async (res) => {
        await res.text();
        if (res.ok) scrapes++;
      },
      () => undefined,
    );
  }, scrapeEveryMs);
  return {
    async stop() {
      clearInterval(timer);
      await last;
      return scrapes;
    },
  };
}

export async function benchMetricsCost(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-metrics-'));
  const services: Service[] = [];
  const metricsPort = await freePort();
  const scrapes = scraper(metricsPort);
  try {
    console.log(
      `\nMetrics: GET /pets/1, ${connections} connections, ${warmupS} s warm-up, ${rounds} interleaved rounds of ${durationS} s; ` +
        `metrics off, off again (a second process: the noise), and on (METRICS_PORT, tracing off, scraped every ${scrapeEveryMs / 1000} s).`,
    );
    if (pinning) spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
    const targets: Array<{ name: string; service: Service; samples: Sample[] }> = [];
    for (const [name, env] of [
      ['off', {}],
      ['off again', {}],
      ['on', { METRICS_PORT: String(metricsPort) }],
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
    console.log('\n| metrics | req/s | p99 | non-2xx |');
    console.log('|---|---|---|---|');
    for (const t of targets) {
      const bad = t.samples.reduce((n, s) => n + s.bad, 0);
      console.log(
        `| ${t.name} | ${(median(t.samples.map((s) => s.rps)) / 1000).toFixed(2)}k | ${median(t.samples.map((s) => s.p99))} ms | ${bad} |`,
      );
    }
    const cost = ratio(on.samples, off.samples);
    console.log('\n| ratio (median of rounds) | value | target |');
    console.log('|---|---|---|');
    console.log(`| off again / off (the noise: the same build, metrics off in both) | ${ratio(again.samples, off.samples).toFixed(2)} | |`);
    console.log(
      `| on / off (every request timed and counted, scraped) | ${cost.toFixed(2)} | >= ${target} ${cost >= target ? 'met' : 'NOT met'} |`,
    );
    console.log(`(${await scrapes.stop()} scrapes of GET /metrics answered 200 during the run)`);
  } finally {
    await scrapes.stop();
    for (const s of services) await stop(s.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchMetricsCost().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
