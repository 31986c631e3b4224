// The bench's load generator: wrk (Debian's package, installed by scripts/ensure-wrk.sh),
// a C program in a process of its own. autocannon, in the bench's own Node process, could
// not keep bare Express busy on Node 24 (it topped out below the server), so it measured
// itself. wrk runs on core 1 when the servers are pinned to core 0, and its Lua script
// cycles through the requests given, so one run can carry a mix.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Load {
  method?: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** A header sent with a value of its own on every request (an Idempotency-Key never replayed). */
  uniqueHeader?: string;
}

/** Each wrk run's unique header values start with their own prefix. */
let runs = 0;

export interface WrkResult {
  requests: number;
  seconds: number;
  /** Milliseconds. */
  p50: number;
  p99: number;
  /** Answers that were not 2xx or 3xx, and socket errors (connect, read, write, timeout). */
  non2xx: number;
  errors: number;
  /**
   * The upper part of the latency distribution: [percent, ms] from the 90th percentile to
   * the slowest answer, in steps of 0.01, for a percentile over several runs (pooled()).
   */
  tail: Array<[number, number]>;
}

/**
 * Whether servers and wrk can be kept apart (taskset and at least two cores): the servers
 * started with `taskset -c 0`, wrk given `core: 1`.
 */
export const canPin =
  process.platform === 'linux' &&
  spawnSync('taskset', ['-V']).status === 0 &&
  Number(spawnSync('nproc').stdout?.toString().trim() || '1') >= 2;

/** Installs wrk when it is missing (scripts/ensure-wrk.sh); throws with the reason when it cannot. */
export function ensureWrk(): void {
  if (spawnSync('wrk', ['--version']).error === undefined) return;
  const run = spawnSync('bash', [join(__dirname, '..', 'ensure-wrk.sh')], { stdio: 'inherit' });
  if (run.status !== 0) throw new Error('wrk is missing and scripts/ensure-wrk.sh could not install it');
}

// The requests are formatted in init(): wrk knows the Host header only once the script has loaded.
const lua = (loads: Load[]) => {
  const prefix = `bench-${process.pid}-${++runs}-`;
  const requests = loads.map((l) => {
    const headers = Object.entries(l.headers ?? {}).map(([k, v]) => `[${JSON.stringify(k)}] = ${JSON.stringify(v)}`);
    const body = l.body === undefined ? 'nil' : JSON.stringify(l.body);
    const format = (more: string) =>
      `wrk.format(${JSON.stringify(l.method ?? 'GET')}, ${JSON.stringify(l.path)}, {${[...headers, ...(more ? [more] : [])].join(', ')}}, ${body})`;
    // A request formatted afresh each time (a function), or once.
    return l.uniqueHeader === undefined
      ? format('')
      : `function() n = n + 1; return ${format(`[${JSON.stringify(l.uniqueHeader)}] = ${JSON.stringify(prefix)} .. n`)} end`;
  });
  return [
    'local requests = {}',
    'local i = 0',
    'n = 0',
    `init = function() requests = {${requests.join(', ')}} end`,
    'request = function()',
    '  i = i % #requests + 1',
    '  local r = requests[i]',
    '  if type(r) == "function" then return r() end',
    '  return r',
    'end',
    // wrk's latencies are in microseconds.
    'done = function(summary, latency, requests)',
    '  for k = 9000, 9999 do io.write(string.format("tail %.2f %d\\n", k / 100, latency:percentile(k / 100))) end',
    // percentile(100) reads 0.
    '  io.write(string.format("tail 100 %d\\n", latency.max))',
    'end',
    '',
  ].join('\n');
};

/** wrk's "12.3us" / "4.5ms" / "1.2s" in milliseconds. */
const ms = (value: string | undefined, unit: string | undefined) =>
  value === undefined ? NaN : Number(value) * (unit === 'us' ? 0.001 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 1);

export function parseWrk(out: string, seconds: number): WrkResult {
  const latency = (p: number) => {
    const m = new RegExp(`^\\s+${p}(?:\\.000)?%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return ms(m?.[1], m?.[2]);
  };
  const requests = Number(/(\d+) requests in ([\d.]+)(us|ms|s|m)/.exec(out)?.[1] ?? NaN);
  const took = /\d+ requests in ([\d.]+)(us|ms|s|m)/.exec(out);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    requests,
    seconds: took ? ms(took[1], took[2]) / 1000 : seconds,
    p50: latency(50),
    p99: latency(99),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    errors: socket ? socket.slice(1).reduce((n, x) => n + Number(x), 0) : 0,
    tail: [...out.matchAll(/^tail ([\d.]+) (\d+)$/gm)].map((m) => [Number(m[1]), Number(m[2]) / 1000] as [number, number]),
  };
}

/**
 * The `percent` percentile (90 or above) of the answers of several runs taken together:
 * the least latency that at least that share of all their answers, each run weighed by
 * its requests, did not exceed. A median of each run's own percentile would drop a run
 * with a stall altogether, or take one where a short run's few slowest answers fall.
 */
export function pooled(runs: Array<Pick<WrkResult, 'requests' | 'tail'>>, percent: number): number {
  const total = runs.reduce((n, r) => n + r.requests, 0);
  // The share of a run's answers at or under `ms`: the highest percentile that is (0 under its 90th).
  const under = (r: Pick<WrkResult, 'tail'>, ms: number) => {
    let share = 0;
    for (const [p, v] of r.tail) {
      if (v > ms) break;
      share = p;
    }
    return share;
  };
  const candidates = [...new Set(runs.flatMap((r) => r.tail.map(([, v]) => v)))].sort((a, b) => a - b);
  for (const ms of candidates) {
    const share = runs.reduce((n, r) => n + r.requests * under(r, ms), 0) / total;
    if (share >= percent) return ms;
  }
  return NaN;
}

/**
 * `seconds` of load on 127.0.0.1:`port` from `connections` keep-alive connections, one wrk
 * thread (pinned to `core` when given), cycling through `loads`.
 */
export function wrk(port: number, loads: Load[], options: { connections: number; seconds: number; core?: number }): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-wrk-'));
  const script = join(dir, 'requests.lua');
  writeFileSync(script, lua(loads));
  const args = ['-t1', `-c${options.connections}`, `-d${options.seconds}s`, '--latency', '-s', script, `http://127.0.0.1:${port}/`];
  const [cmd, ...rest] = options.core === undefined ? ['wrk', ...args] : ['taskset', '-c', String(options.core), 'wrk', ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      rmSync(dir, { recursive: true, force: true });
      const result = parseWrk(out, options.seconds);
      if (code !== 0 || !Number.isFinite(result.requests)) reject(new Error(`wrk exited with ${code}: ${err || out}`));
      else resolve(result);
    });
  });
}
