// What the connection drills share (slowloris.ts, pipelining.ts; CI runs both): the built
// service in its default configuration, attacked on loopback by scripts/drill/attacker.ts
// in a process of its own, while another client, from an address of its own, goes on with
// its requests. Per scenario it prints the other client's answered share and p99, the
// service's peak RSS and how far each sits from its line, and exits 1 if any is over it or
// if the same service process does not answer afterwards. Everything is bounded: each
// attack stops by itself, and only 127.0.0.0/8 is used.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileDescriptorLimit } from '../../server/http/connections';
import { clockTicks, customerKey, num } from '../bench/common';
import { eventually, repoRoot, startServer, type ServerProcess } from '../server-process';
import { loadConfig } from '../../server/config';

/**
 * The service's own default for what startServer (made for tests) turns off: the warm-up
 * before ready. SHUTDOWN_DELAY_MS stays 0: no balancer watches a drill's service stop.
 */
export const defaultConfiguration = (env: Record<string, string>): Record<string, string> => ({
  WARM_UP_MS: String(loadConfig({}).warmUpMs),
  ...env,
});

/** Resolves once the service at `url` says it is ready (/readyz 200, the warm-up over), as a balancer waits for. */
export const ready = (url: string) =>
  eventually(async () => ((await fetch(new URL('/readyz', url)).catch(() => undefined))?.status === 200 ? true : undefined), 30_000);

export interface Lines {
  answeredShare: number;
  p99Ms: number;
  rssMb: number;
  /**
   * The attack's first `ms`, judged apart: the p99 line is for the requests sent after
   * them, and these are each to be answered within `slowestMs`. While hundreds of the
   * attacker's connections wait in the kernel's accept queue, which Node takes one a turn,
   * a new connection waits behind them all (docs/operations.md, "Connections").
   */
  arrival?: { ms: number; slowestMs: number };
}
const defaultLines: Lines = { answeredShare: 0.99, p99Ms: 500, rssMb: 512 };
const requestTimeoutMs = 5_000;
/** Attempts at a scenario that the machine's other load kept from being judged (see attack()). */
const attempts = 3;
/**
 * Work other than the drill's may take this share of the machine's CPUs during an attack
 * and the attempt still be judged; past it, what the lines would judge is that work.
 */
export const maxOthersShare = 0.25;
/** DRILL_ONLY=1,3: some scenarios only, when working on one. */
const only = process.env.DRILL_ONLY?.split(',');

export interface Scenario {
  name: string;
  attack: 'slowloris' | 'pipelining' | 'greedy';
  /** The attacker's environment beyond this process's (attacker.ts: PATH_REQUESTED, IN_FLIGHT, ...). */
  env?: Record<string, string>;
  /** The lines it is judged by, when not the connection drills' own. */
  lines?: Lines;
  connections: number;
  addresses: string[];
  /** How long the attacker attacks; the other client is measured for `measureMs` of it. */
  attackMs: number;
  measureMs: number;
  /**
   * A request sent the moment the attacker is gone must be answered within this: the
   * service has no backlog of the attacker's work left.
   */
  recoveryMs?: number;
}

/** The other client: its address, its requests in turn, how often, every other one on a new connection. */
export interface OtherClient {
  address: string;
  paths: string[];
  everyMs: number;
}

interface Sample {
  ms: number;
  ok: boolean;
  fresh: boolean;
  /** Why it was not answered 200: a status, an error code, or `timeout`. */
  failure?: string;
}

/** One GET with the key, on the keep-alive agent or on a connection of its own. */
export function timedRequest(base: URL, client: OtherClient, path: string, key: string, agent: Agent | false): Promise<Sample> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (failure?: string) => resolve({ ms: performance.now() - started, ok: !failure, fresh: agent === false, failure });
    const req = request(
      {
        host: base.hostname,
        port: base.port,
        path,
        localAddress: client.address,
        agent,
        headers: { Authorization: `Bearer ${key}`, ...(agent === false && { Connection: 'close' }) },
        timeout: requestTimeoutMs,
      },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode === 200 ? undefined : String(res.statusCode)));
        res.on('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    req.end();
  });
}

/**
 * The other client's keep-alive connections, one pool for the whole drill: its keep-alive
 * requests under a flood go on connections it opened before the flood, as a keep-alive
 * client's do. With a pool of their own for each part, the flood's first "keep-alive"
 * requests opened new connections, queued in the kernel behind the attacker's hundreds.
 */
const keepAlive = new Agent({ keepAlive: true, maxSockets: 4 });

/** The other client's requests for `ms`, every other one on a new connection. */
export async function otherClient(base: URL, client: OtherClient, key: string, ms: number): Promise<Sample[]> {
  const pending: Promise<Sample>[] = [];
  const start = performance.now();
  for (let i = 0; performance.now() - start < ms; i++) {
    const path = client.paths[i % client.paths.length] as string;
    // Every other request on a new connection, in step with the paths' turns.
    const fresh = Math.floor(i / client.paths.length) % 2 === 1;
    pending.push(timedRequest(base, client, path, key, fresh ? false : keepAlive));
    const next = start + (i + 1) * client.everyMs;
    await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
  }
  return Promise.all(pending);
}

/** The p-th percentile, an unanswered request counting as longer than any answer. */
export function percentile(samples: Sample[], p: number): number {
  const ms = samples.map((s) => (s.ok ? s.ms : Infinity)).sort((a, b) => a - b);
  return ms[Math.min(ms.length - 1, Math.ceil((p / 100) * ms.length) - 1)] ?? Infinity;
}

export const statusMb = (pid: number, field: 'VmRSS' | 'VmHWM') => {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match?.[1] ? Number(match[1]) / 1024 : NaN;
};

/** CPU time (clock ticks) the whole machine spent on processes, from /proc/stat; softirq left out: the attack's loopback traffic. */
const machineTicks = () => {
  const [user, nice, system, , , , , steal] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return (user ?? 0) + (nice ?? 0) + (system ?? 0) + (steal ?? 0);
};

/** CPU time (clock ticks) of a process. */
export const ticks = (pid: number | 'self') => {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
};

/**
 * Starts measuring the share of the machine's CPUs that work other than the drill's takes:
 * the returned function gives it since then. The drill's own processes are this one and
 * `pids` (the service, a proxy in front), and the attacker, which reports its own CPU time.
 */
export function otherWorkMeter(pids: number[]): (attackerCpuMs: number) => number {
  const ours = () => ticks('self') + pids.reduce((sum, pid) => sum + ticks(pid), 0);
  const oursBefore = ours();
  const machineBefore = machineTicks();
  const started = performance.now();
  return (attackerCpuMs) => {
    const wallTicks = ((performance.now() - started) / 1000) * clockTicks * cpus().length;
    const attackerTicks = (attackerCpuMs / 1000) * clockTicks;
    // Never below 0: what the attacker reports of itself and /proc/stat are read at different moments.
    return Math.max(0, (machineTicks() - machineBefore - (ours() - oursBefore) - attackerTicks) / wallTicks);
  };
}

export function runAttacker(port: number, scenario: Scenario) {
  const child = spawn(
    join(repoRoot, 'node_modules/.bin/tsx'),
    [
      join(__dirname, 'attacker.ts'),
      scenario.attack,
      String(port),
      String(scenario.connections),
      String(scenario.attackMs),
      scenario.addresses.join(','),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...scenario.env } },
  );
  let out = '';
  const started = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('"started"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the attacker exited with ${code} before starting`)));
  });
  const finished = new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '{}';
      if (code === 0) resolve(JSON.parse(last) as Record<string, unknown>);
      else reject(new Error(`the attacker exited with ${code}`));
    });
  });
  return { started, finished };
}

/**
 * One attack while the other client goes on; prints what it saw. Resolves to the verdict,
 * or undefined when other work took more than maxOthersShare of the machine meanwhile.
 * `helpers`: the drill's other processes (a proxy in front), whose CPU is the drill's own.
 */
export async function attack(
  server: Pick<ServerProcess, 'child'>,
  base: URL,
  client: OtherClient,
  key: string,
  scenario: Scenario,
  helpers: number[] = [],
): Promise<boolean | undefined> {
  const pid = server.child.pid as number;
  const cpuBefore = ticks(pid);
  const otherWork = otherWorkMeter([pid, ...helpers]);
  const attacker = runAttacker(Number(base.port), scenario);
  await attacker.started;
  let rssPeak = 0;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, statusMb(pid, 'VmRSS'))), 250);
  const samples = await otherClient(base, client, key, scenario.measureMs);
  const seen = await attacker.finished;
  // The moment the attacker is gone (its process exited, its sockets with it).
  const recovery = scenario.recoveryMs === undefined ? undefined : await timedRequest(base, client, client.paths[0] as string, key, false);
  clearInterval(sampler);
  const cpu = (ticks(pid) - cpuBefore) / clockTicks;
  const othersShare = otherWork(Number(seen.cpuMs));

  const lines = scenario.lines ?? defaultLines;
  const answered = samples.filter((s) => s.ok).length / samples.length;
  // The samples are in the order they were sent, everyMs apart.
  const arrivalCount = lines.arrival ? Math.ceil(lines.arrival.ms / client.everyMs) : 0;
  const underWay = samples.slice(arrivalCount);
  const p99 = percentile(underWay, 99);
  const byKind = (fresh: boolean) => {
    const some = underWay.filter((s) => s.fresh === fresh);
    return `${some.filter((s) => s.ok).length}/${some.length} answered, p99 ${percentile(some, 99).toFixed(0)} ms`;
  };
  const judged = othersShare <= maxOthersShare;
  const verdicts: Array<readonly [boolean, string]> = [
    [answered >= lines.answeredShare, `answered ${(answered * 100).toFixed(1)}% (line ${lines.answeredShare * 100}%)`],
    [
      p99 <= lines.p99Ms,
      `p99 ${p99.toFixed(0)} ms${lines.arrival ? ` from ${lines.arrival.ms / 1000} s in` : ''} (line ${lines.p99Ms}; ${(p99 / lines.p99Ms).toFixed(2)}x)`,
    ],
    [rssPeak <= lines.rssMb, `RSS peak ${rssPeak.toFixed(0)} MB (line ${lines.rssMb}; ${(rssPeak / lines.rssMb).toFixed(2)}x)`],
  ];
  if (lines.arrival) {
    const slowest = percentile(samples.slice(0, arrivalCount), 100);
    verdicts.push([
      slowest <= lines.arrival.slowestMs,
      `the first ${lines.arrival.ms / 1000} s: slowest ${slowest.toFixed(0)} ms (line ${lines.arrival.slowestMs})`,
    ]);
  }
  if (scenario.attack === 'greedy') {
    const invalid = Number(seen.invalid);
    verdicts.push([invalid === 0, `the attacker's answers: ${invalid} not valid HTTP (line 0)`]);
  }
  if (recovery && scenario.recoveryMs !== undefined) {
    const ms = recovery.ok ? recovery.ms : Infinity;
    verdicts.push([
      ms <= scenario.recoveryMs,
      `answered ${recovery.ok ? `in ${ms.toFixed(0)} ms` : `not at all (${recovery.failure})`} once the attacker was gone (line ${scenario.recoveryMs})`,
    ]);
  }
  for (const [ok, text] of verdicts) console.log(`  ${!judged ? '-   ' : ok ? 'ok  ' : 'FAIL'} ${text}`);
  console.log(`  keep-alive: ${byKind(false)}; a new connection each: ${byKind(true)}`);
  const failures = samples.flatMap((s) => (s.failure ? [`${s.failure} after ${s.ms.toFixed(0)} ms`] : []));
  if (failures.length > 0) console.log(`  not answered: ${failures.slice(0, 20).join(', ')}${failures.length > 20 ? ', ...' : ''}`);
  // Where in the flood the slowest were sent (the samples are in the order they were sent, everyMs apart).
  const slowest = samples
    .map((s, i) => ({ ms: s.ms, at: (i * client.everyMs) / 1000, fresh: s.fresh }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 3)
    .map((s) => `${s.ms.toFixed(0)} ms (${s.fresh ? 'new connection' : 'keep-alive'}) ${s.at.toFixed(1)} s in`);
  console.log(`  slowest: ${slowest.join(', ')}`);
  console.log(
    `  service CPU ${cpu.toFixed(1)} s; other work on the machine took ${(othersShare * 100).toFixed(0)}% of its CPUs ` +
      `(judged up to ${maxOthersShare * 100}%); attacker: ${JSON.stringify(seen)}`,
  );
  if (!judged) console.log('  not judged: the machine was busy with other work; again in 10 s');
  console.log('');
  return judged ? verdicts.every(([ok]) => ok) : undefined;
}

/** Runs the scenarios against one service process, each judged up to `attempts` times; exits 1 on any failure. */
export async function runDrill(drill: string, scenarios: Scenario[], client: OtherClient): Promise<void> {
  // The attacker holds sockets of its own; the service needs its own room too.
  const limit = fileDescriptorLimit();
  const needed = Math.max(...scenarios.map((s) => s.connections)) + 1_000;
  if (limit !== undefined && limit < needed) {
    throw new Error(`the drill needs a file-descriptor limit of at least ${needed} (ulimit -n); this process has ${limit}`);
  }
  // Ahead of the machine's other work (inherited by the service and the attacker), so that
  // the attack competes with the service, not everything else that runs here.
  try {
    setPriority(-10);
  } catch {
    console.log("(could not raise the priority: not root; the machine's other load counts against the service)");
  }
  const dir = mkdtempSync(join(tmpdir(), `petstore-${drill}-`));
  let server: ServerProcess | undefined;
  let failed = false;
  try {
    // The default configuration: only where the service keeps its file is set.
    server = await startServer(defaultConfiguration({ DATABASE_PATH: join(dir, 'petstore.db') }), 60_000);
    await ready(server.url);
    const pid = server.child.pid as number;
    const base = new URL(server.url);
    const key = await customerKey(server.url, `${drill}-drill@example.com`);
    console.log(`service pid ${pid} on ${server.url}; file-descriptor limit ${limit ?? 'unknown'}; other client at ${client.address}`);
    const lines = defaultLines;
    console.log(`lines: >= ${lines.answeredShare * 100}% answered, p99 <= ${lines.p99Ms} ms, RSS <= ${lines.rssMb} MB\n`);

    // Before any attack, for comparison, once each operation's first request (which compiles
    // its validators) is behind.
    await otherClient(base, client, key, 1_000);
    const quiet = await otherClient(base, client, key, 5_000);
    console.log(`no attack: ${quiet.filter((s) => s.ok).length}/${quiet.length} answered, p99 ${percentile(quiet, 99).toFixed(0)} ms\n`);

    for (const scenario of scenarios.filter((_, i) => !only || only.includes(String(i + 1)))) {
      console.log(`${scenario.name}:`);
      let verdict: boolean | undefined;
      for (let attempt = 1; verdict === undefined && attempt <= attempts; attempt++) {
        if (attempt > 1) await new Promise((r) => setTimeout(r, 10_000));
        verdict = await attack(server, base, client, key, scenario);
      }
      if (verdict === undefined) console.log(`  FAIL no attempt of ${attempts} could be judged: the machine kept the service from a CPU\n`);
      if (verdict !== true) failed = true;
    }

    // The same process, still there, answers.
    const after = await otherClient(base, client, key, 2_000);
    const alive = server.child.exitCode === null && server.child.signalCode === null && after.every((s) => s.ok);
    const notAnswered = after.flatMap((s, i) =>
      s.failure ? [`${s.failure} after ${s.ms.toFixed(0)} ms, sent ${i * client.everyMs} ms in`] : [],
    );
    console.log(
      `${alive ? 'ok  ' : 'FAIL'} afterwards: the same process (pid ${pid}) answered ${after.filter((s) => s.ok).length}/${after.length}` +
        (notAnswered.length > 0 ? `; not answered: ${notAnswered.join(', ')}` : ''),
    );
    console.log(`service peak RSS over the whole drill (VmHWM): ${statusMb(pid, 'VmHWM').toFixed(0)} MB`);
    if (!alive) failed = true;
  } finally {
    const code = await server?.stop();
    if (code !== undefined && code !== 0) {
      console.log(`FAIL the service exited with ${code} on SIGTERM`);
      failed = true;
    }
    rmSync(dir, { recursive: true, force: true });
  }
  if (failed) {
    console.log('\nThe drill failed. Service log:\n' + (server?.log() ?? ''));
    process.exit(1);
  }
}

/** DRILL_MEASURE_MS: how long each attack is measured, when working on a scenario. */
export const measureMs = (fallback: number) => num('DRILL_MEASURE_MS', fallback);
