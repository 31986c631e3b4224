// npm run bench, login-burst part: does a burst of password logins take the event loop or
// the memory from everyone else? The service as `npm start` runs it (default password
// hashing bounds), GET /pets?ids=1 offered at a fixed rate, open loop, alone and then
// during a burst of HTTP Basic logins (POST /api-keys, unknown emails, wrong passwords:
// each costs a full hash) offered at several times what the hashing can serve, from many
// client addresses in 127.0.0.0/8 so that no per-address login limit stops them. It
// prints the GET p99 in both runs and their ratio (the goal: at most 2x), what the logins
// were answered, and the service's peak memory. A benchmark, not a test: it exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtService, customerKey, freePort, median, num } from './common';

const root = join(__dirname, '..', '..');
/** Seconds of each phase; `rounds` quiet phases alternate with as many burst phases. */
const durationS = num('BENCH_LOGIN_BURST_DURATION', 4);
const rounds = num('BENCH_LOGIN_BURST_ROUNDS', 3);
/** GETs offered a second, in both runs. */
const getRate = num('BENCH_LOGIN_BURST_GET_RATE', 100);
/** Logins offered a second during the burst, spread over `addresses` client addresses. */
const loginRate = num('BENCH_LOGIN_BURST_LOGIN_RATE', 100);
const addresses = num('BENCH_LOGIN_BURST_ADDRESSES', 100);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
};
const fmt = (ms: number) => (Number.isNaN(ms) ? '-' : `${ms.toFixed(ms < 10 ? 1 : 0)} ms`);

async function startService(env: Record<string, string>): Promise<{ base: string; port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(builtService[0] as string, builtService.slice(1), {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'error' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600 && child.exitCode === null; i++) {
    const up = await fetch(`${base}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (up) return { base, port, child };
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

/** Peak resident memory of a process so far (VmHWM), MiB. */
const peakRssMiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

interface Answer {
  status: number;
  ms: number;
}

/** One request; its latency counts from when it was due, so a client-side wait shows too. */
function send(port: number, agent: Agent, path: string, method: string, headers: Record<string, string>, due: number): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - due }));
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - due }));
    req.end();
  });
}

/** Offers `make(i)` at `rate` a second for `seconds`, whatever the answers do; resolves to every answer. */
async function openLoop(rate: number, seconds: number, make: (i: number, due: number) => Promise<Answer>): Promise<Answer[]> {
  const total = Math.round(rate * seconds);
  const answers: Array<Promise<Answer>> = [];
  const start = performance.now();
  while (answers.length < total) {
    const dueNow = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    while (answers.length < dueNow) answers.push(make(answers.length, start + (answers.length / rate) * 1000));
    await sleep(1);
  }
  return Promise.all(answers);
}

function getLoop(port: number, key: string, seconds: number): Promise<Answer[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const headers = { Authorization: `Bearer ${key}` };
  return openLoop(getRate, seconds, (_i, due) => send(port, agent, '/pets?ids=1', 'GET', headers, due)).finally(() => agent.destroy());
}

function loginLoop(port: number, seconds: number): Promise<Answer[]> {
  // One keep-alive agent per client address, as that many separate clients would have.
  const agents = Array.from(
    { length: addresses },
    (_, i) => new Agent({ keepAlive: true, maxSockets: 8, localAddress: `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}` }),
  );
  const run = `${process.pid}-${Date.now()}`;
  return openLoop(loginRate, seconds, (i, due) => {
    const basic = Buffer.from(`nobody-${run}-${i}@example.com:not the password`).toString('base64');
    return send(port, agents[i % addresses] as Agent, '/api-keys', 'POST', { Authorization: `Basic ${basic}` }, due);
  }).finally(() => agents.forEach((a) => a.destroy()));
}

const ok = (answers: Answer[]) => answers.filter((a) => a.status === 200).map((a) => a.ms);

export async function benchLoginBurst(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-login-'));
  console.log(
    `\nLogin burst: GET /pets?ids=1 at ${getRate}/s, ${rounds} rounds of ${durationS} s quiet then ${durationS} s during ${loginRate} password logins/s ` +
      `(unknown emails, wrong passwords) from ${addresses} addresses; default password-hashing bounds.`,
  );
  // The GET client is one address: its request limit is out of the way; the login limits are the defaults.
  const { base, port, child } = await startService({
    DATABASE_PATH: join(dir, 'bench.db'),
    RATE_LIMIT_PER_MINUTE: String(1_000_000),
    SHUTDOWN_DELAY_MS: '0',
  });
  try {
    const key = await customerKey(base, 'login-burst@example.com');
    // Warm-up: the validators compile on first use; both paths once.
    await getLoop(port, key, 2);
    await loginLoop(port, 0.2);
    const quietRss = peakRssMiB(child.pid as number);
    // Quiet and burst phases alternate, so that a change in the machine's own load (other
    // work on it) falls on both rather than on one.
    const quiet: Answer[] = [];
    const during: Answer[] = [];
    const logins: Answer[] = [];
    for (let round = 0; round < rounds; round++) {
      quiet.push(...(await getLoop(port, key, durationS)));
      const [gets, attempts] = await Promise.all([getLoop(port, key, durationS), loginLoop(port, durationS)]);
      during.push(...gets);
      logins.push(...attempts);
    }
    const burstRss = peakRssMiB(child.pid as number);

    const quietP99 = percentile(ok(quiet), 99);
    const burstP99 = percentile(ok(during), 99);
    const count = (xs: Answer[], status: number) => xs.filter((a) => a.status === status).length;
    console.log('| GET /pets?ids=1 | answered 200 | p50 | p99 |');
    console.log('| --- | --- | --- | --- |');
    for (const [name, run] of [
      ['quiet', quiet],
      ['during the burst', during],
    ] as const) {
      console.log(`| ${name} | ${ok(run).length} of ${run.length} | ${fmt(median(ok(run)))} | ${fmt(percentile(ok(run), 99))} |`);
    }
    const ratio = burstP99 / quietP99;
    console.log(`GET p99 during the burst / quiet: ${ratio.toFixed(2)}x (goal: at most 2x)${ratio <= 2 ? '' : ' -- OVER THE GOAL'}`);
    const refused = logins.filter((a) => a.status === 503).map((a) => a.ms);
    const checked = logins.filter((a) => a.status === 401).map((a) => a.ms);
    const other = logins.length - refused.length - checked.length;
    console.log(
      `Logins: ${logins.length} offered; ${checked.length} checked (401, p50 ${fmt(median(checked))}, p99 ${fmt(percentile(checked, 99))}), ` +
        `${refused.length} refused with 503 overloaded (p99 ${fmt(percentile(refused, 99))})` +
        `${other ? `, ${other} other (${[...new Set(logins.map((a) => a.status))].join(', ')})` : ''}; ` +
        `${(checked.length / (durationS * rounds)).toFixed(0)} hashes/s served.`,
    );
    console.log(`Service peak memory (VmHWM): ${quietRss.toFixed(0)} MiB before the burst, ${burstRss.toFixed(0)} MiB after.`);
    // A rough check that the counts add up: every GET was answered (an error shows as status 0).
    if (count(quiet, 0) + count(during, 0) > 0) console.log(`GET errors: ${count(quiet, 0)} quiet, ${count(during, 0)} during the burst.`);
  } finally {
    await stopService(child);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchLoginBurst().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
