// What the bench's parts share: their numeric settings, the median they compare by, the warm-up
// rule, a free port for a server, a customer's key made over HTTP as the README's first calls
// do, and a process's CPU time from /proc.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { serviceNodeFlags } from '../server-process';

/** A numeric setting from the environment (BENCH_*), or its default. */
/**
 * `node dist/server/main.js` with the Node options `npm start` and the image give it
 * (serviceNodeFlags; docs/performance.md, "Memory"): the service as shipped, without the
 * build check. Run from the project's root.
 */
export const builtService = [process.execPath, ...serviceNodeFlags, 'dist/server/main.js'];

export const num = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0`);
  return value;
};

export const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/**
 * Warms a target in slices of 1 s of load (`slice` runs one and gives its CPU µs per request)
 * while the CPU per request still falls: until 3 slices in a row come within 3% of the best
 * before them, at most BENCH_WARM_MAX (30 by default). Each slice's figure, and the seconds
 * it fell for.
 */
export async function warmUntilStable(slice: () => Promise<number>): Promise<{ cpuUs: number[]; seconds: number }> {
  const cap = num('BENCH_WARM_MAX', 30);
  const cpuUs: number[] = [];
  let best = Infinity;
  let flat = 0;
  while (flat < 3 && cpuUs.length < cap) {
    const cpu = await slice();
    cpuUs.push(cpu);
    if (cpu < best / 1.03) flat = 0;
    else flat++;
    best = Math.min(best, cpu);
  }
  return { cpuUs, seconds: cpuUs.length - flat };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/** A customer signs up (or already has) and makes a key; resolves to the key. */
export async function customerKey(base: string, email: string): Promise<string> {
  const password = 'a long bench password';
  const signUp = await fetch(`${base}/accounts`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (signUp.status !== 201 && signUp.status !== 409) throw new Error(`POST /accounts answered ${signUp.status}`);
  const made = await fetch(`${base}/api-keys`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
  });
  const body = (await made.json()) as { key?: string };
  if (made.status !== 201 || !body.key) throw new Error(`POST /api-keys answered ${made.status}`);
  return body.key;
}

/** Clock ticks a second, the unit of /proc/PID/stat's times. */
export const clockTicks = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100);

/** utime, stime, cutime, cstime (clock ticks) and the parent of a process, or null once it is gone. */
export function stat(pid: number): { ppid: number; own: number; children: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const n = (i: number) => Number(fields[i - 3]);
  return { ppid: n(4), own: n(14) + n(15), children: n(16) + n(17) };
}
