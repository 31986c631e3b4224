// npm run bench, overload part: the service as `npm start` runs it, offered about twice
// what it can serve, with load shedding on (OVERLOAD_EVENT_LOOP_DELAY_MS) and off (0).
// First its capacity is measured (GET /pets?ids=1 with a customer's key, closed loop, no shedding),
// then each run offers twice that rate from many connections for the same time, and
// prints the p99 of the requests it accepted (200) and how fast the shed ones (503
// overloaded) were answered. A benchmark, not a test: it exits 0 whatever it finds.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { customerKey, freePort, num } from './common';

const root = join(__dirname, '..', '..');
/** The shedding bound of the "on" run: low enough that the offered load crosses it. */
const boundMs = num('BENCH_OVERLOAD_DELAY_MS', 50);
const durationS = num('BENCH_OVERLOAD_DURATION', 8);
/** Enough connections that the offered rate, not the connection count, sets the load. */
const connections = num('BENCH_OVERLOAD_CONNECTIONS', 512);
const factor = num('BENCH_OVERLOAD_FACTOR', 2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const canPin =
  process.platform === 'linux' && spawnSync('taskset', ['-V']).status === 0 && Number(spawnSync('nproc').stdout?.toString()) >= 2;

async function startService(env: Record<string, string>): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort();
  const command = [...(canPin ? ['taskset', '-c', '0'] : []), process.execPath, 'dist/server/main.js'];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return { base, child };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error('the service did not become ready');
}

async function stopService(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
};

interface Run {
  accepted: number[];
  shed: number[];
  other: number;
  errors: number;
  seconds: number;
}

function offer(base: string, key: string, opts: { connections: number; seconds: number; rate?: number }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const run: Run = { accepted: [], shed: [], other: 0, errors: 0, seconds: opts.seconds };
    const instance = autocannon(
      {
        url: `${base}/pets?ids=1`,
        headers: { Authorization: `Bearer ${key}` },
        connections: opts.connections,
        duration: opts.seconds,
        // Answers past this are counted as errors rather than waited for.
        timeout: 10,
        ...(opts.rate !== undefined && { overallRate: opts.rate }),
      },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error('autocannon failed', { cause: err }));
        run.errors = result.errors + result.timeouts;
        resolve(run);
      },
    );
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status === 200) run.accepted.push(ms);
      else if (status === 503) run.shed.push(ms);
      else run.other++;
    });
  });
}

const fmt = (ms: number) => (Number.isNaN(ms) ? '-' : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);

export async function benchOverload(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-overload-'));
  try {
    console.log(
      `\nOverload: GET /pets?ids=1, ${durationS} s at ${factor}x the measured capacity from ${connections} connections, ` +
        `shedding at ${boundMs} ms of event-loop delay beside shedding off${canPin ? ' (service on core 0)' : ''}.`,
    );
    const rows: Array<[string, Run, number]> = [];
    let capacity = 0;
    // Off first: its closed-loop warm-up measures the capacity, which shedding would blur.
    for (const [name, bound] of [
      ['shedding off', 0],
      ['shedding on', boundMs],
    ] as const) {
      const { base, child } = await startService({
        DATABASE_PATH: join(dir, `${bound}.db`),
        RATE_LIMIT_PER_MINUTE: String(1_000_000),
        OVERLOAD_EVENT_LOOP_DELAY_MS: String(bound),
      });
      try {
        // The first requests build what the validator compiles on first use, which can hold
        // the loop past a low bound: retried, as a client told Retry-After would.
        let key = '';
        for (let i = 0; !key; i++) {
          key = await customerKey(base, 'overload@example.com').catch((err: unknown) => {
            if (i >= 20) throw err;
            return sleep(1000).then(() => '');
          });
        }
        // Warm-up, and on the first service the capacity (both are the same build).
        const measured = await offer(base, key, { connections: 32, seconds: capacity ? 2 : 5 });
        if (!capacity) capacity = measured.accepted.length / measured.seconds;
        const rate = Math.round(capacity * factor);
        const run = await offer(base, key, { connections, seconds: durationS, rate });
        rows.push([name, run, rate]);
      } finally {
        await stopService(child);
      }
    }
    console.log(`Capacity (closed loop, 32 connections): ${capacity.toFixed(0)} requests/s`);
    console.log('| run | offered/s | accepted/s | p99 accepted | shed/s | p50 / p99 shed | errors, timeouts |');
    console.log('| --- | --- | --- | --- | --- | --- | --- |');
    for (const [name, run, rate] of rows) {
      console.log(
        `| ${name} | ${rate} | ${(run.accepted.length / run.seconds).toFixed(0)} | ${fmt(percentile(run.accepted, 99))} | ` +
          `${(run.shed.length / run.seconds).toFixed(0)} | ${fmt(percentile(run.shed, 50))} / ${fmt(percentile(run.shed, 99))} | ${run.errors + run.other} |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
