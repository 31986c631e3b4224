// npm run bench, overload part: the service as `npm start` runs it, offered about twice
// what it can serve, with load shedding on (OVERLOAD_EVENT_LOOP_DELAY_MS) and off (0).
// First its capacity is measured (GET /pets?ids=1 with a customer's key, closed loop,
// after a warm-up, no shedding). Then each run offers twice that rate open loop: requests
// leave at a fixed rate whatever the answers do, as independent clients' requests do, and
// each one's latency counts from when it was due, so a backlog shows in the figures
// instead of slowing the offer down (a closed loop of N connections never queues more than
// N). It prints the p99 of the requests accepted (200), how fast the shed ones (503
// overloaded) were answered, and how long after the offer ended /readyz was 200 again.
// A benchmark, not a test: it exits 0 whatever it finds.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { builtService, customerKey, freePort, num } from './common';

const root = join(__dirname, '..', '..');
/** The shedding bound of the "on" run. */
const boundMs = num('BENCH_OVERLOAD_DELAY_MS', 100);
const durationS = num('BENCH_OVERLOAD_DURATION', 8);
const factor = num('BENCH_OVERLOAD_FACTOR', 2);
/** Connections the open-loop client may open; beyond them requests wait in the client, their latency counting. */
const sockets = num('BENCH_OVERLOAD_CONNECTIONS', 1024);
/** An answer later than this after it was due counts as timed out (a client would have given up). */
const timeoutMs = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const canPin =
  process.platform === 'linux' && spawnSync('taskset', ['-V']).status === 0 && Number(spawnSync('nproc').stdout?.toString()) >= 2;

async function startService(env: Record<string, string>): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort();
  const command = [...(canPin ? ['taskset', '-c', '0'] : []), ...builtService];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) break;
    if (await ready(base)) return { base, child };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error('the service did not become ready');
}

const ready = (base: string) =>
  fetch(`${base}/readyz`).then(
    (r) => r.status === 200,
    () => false,
  );

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

/** Closed loop for the warm-up and the capacity: answers (200) a second. */
function closedLoop(base: string, key: string, seconds: number): Promise<number> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url: `${base}/pets?ids=1`, headers: { Authorization: `Bearer ${key}` }, connections: 32, duration: seconds },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error('autocannon failed', { cause: err }));
        resolve(result['2xx'] / seconds);
      },
    );
  });
}

interface Run {
  offered: number;
  /** ms from due to answered, by outcome. */
  accepted: number[];
  /** Accepted answers that arrived while the offer lasted (the rate served under it). */
  acceptedDuring: number;
  shed: number[];
  other: number;
  /** Errors, and answers not in by timeoutMs after they were due. */
  lost: number;
  /** ms from the end of the offer to /readyz 200. */
  readyAgainMs: number;
}

/**
 * One keep-alive connection of the open-loop client, written to and read from directly:
 * node:http's client spent about as much CPU per request as the service, so at twice the
 * service's capacity the client itself fell behind and its own backlog was measured.
 * One request at a time; answers carry Content-Length (Express's res.json).
 */
class Connection {
  private readonly socket: Socket;
  private buffered: Buffer = Buffer.alloc(0);
  /** When the request in flight on it was due; null when it is free. */
  private due: number | null = null;
  constructor(port: number, settle: (due: number, status: number | null) => void, onFree: (connection: Connection) => void) {
    this.socket = connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
      for (;;) {
        const end = this.buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = this.buffered.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (this.buffered.length < end + 4 + length) return;
        this.buffered = this.buffered.subarray(end + 4 + length);
        const due = this.due;
        this.due = null;
        if (due !== null) settle(due, Number(head.slice(9, 12)));
        onFree(this);
      }
    });
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      if (this.due !== null) settle(this.due, null);
      this.due = null;
    });
  }
  send(request: Buffer, due: number): void {
    this.due = due;
    this.socket.write(request);
  }
  close(): void {
    this.socket.destroy();
  }
}

/** Offers `rate` requests a second for `seconds`, open loop. */
async function openLoop(base: string, key: string, rate: number, seconds: number): Promise<Run> {
  const { port } = new URL(base);
  const request = Buffer.from(`GET /pets?ids=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n\r\n`, 'latin1');
  const run: Run = { offered: rate, accepted: [], acceptedDuring: 0, shed: [], other: 0, lost: 0, readyAgainMs: NaN };
  const total = Math.round(rate * seconds);
  let sent = 0;
  let settled = 0;
  const start = performance.now();
  const offerEnds = start + seconds * 1000;
  const connections: Connection[] = [];
  const idle: Connection[] = [];
  /** Due times of requests waiting for a free connection, oldest first. */
  const waiting: number[] = [];
  let waitingFrom = 0;
  let resolveAll = () => {};
  const allSettled = new Promise<void>((resolve) => (resolveAll = resolve));
  const settle = (due: number, status: number | null) => {
    const now = performance.now();
    const ms = now - due;
    if (status === null || ms > timeoutMs) run.lost++;
    else if (status === 200) {
      run.accepted.push(ms);
      if (now <= offerEnds) run.acceptedDuring++;
    } else if (status === 503) run.shed.push(ms);
    else run.other++;
    if (++settled === total) resolveAll();
  };
  const onFree = (connection: Connection) => {
    if (waitingFrom < waiting.length) connection.send(request, waiting[waitingFrom++] as number);
    else idle.push(connection);
  };
  const send = (due: number) => {
    let connection = idle.pop();
    if (!connection && connections.length < sockets) connections.push((connection = new Connection(Number(port), settle, onFree)));
    if (connection) connection.send(request, due);
    else waiting.push(due);
  };
  // Every millisecond or so, the requests that have fallen due since.
  const tick = () => {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    for (; sent < due; sent++) send(start + (sent / rate) * 1000);
    if (sent < total) setTimeout(tick, 1);
  };
  tick();
  await sleep(Math.max(0, offerEnds - performance.now()));
  // Recovery: how soon the service says ready again once the offer has stopped.
  const deadline = offerEnds + timeoutMs + 5_000;
  for (;;) {
    if (await ready(base)) {
      run.readyAgainMs = performance.now() - offerEnds;
      break;
    }
    if (performance.now() > deadline) break;
    await sleep(20);
  }
  // Whatever has not answered by the deadline is lost.
  await Promise.race([allSettled, sleep(Math.max(0, deadline - performance.now()))]);
  run.lost += total - settled;
  for (const connection of connections) connection.close();
  return run;
}

const fmt = (ms: number) => (Number.isNaN(ms) ? '-' : ms < 1000 ? `${ms.toFixed(ms < 10 ? 1 : 0)} ms` : `${(ms / 1000).toFixed(1)} s`);

export async function benchOverload(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-overload-'));
  try {
    console.log(
      `\nOverload: GET /pets?ids=1, ${durationS} s open loop at ${factor}x the measured capacity (up to ${sockets} connections), ` +
        `shedding at ${boundMs} ms of event-loop delay beside shedding off${canPin ? ' (service on core 0)' : ''}.`,
    );
    const rows: Array<[string, Run]> = [];
    let capacity = 0;
    for (const [name, bound] of [
      ['shedding off', 0],
      ['shedding on', boundMs],
    ] as const) {
      const { base, child } = await startService({
        DATABASE_PATH: join(dir, `${bound}.db`),
        RATE_LIMIT_PER_MINUTE: String(1_000_000),
        // Stopping is not measured here: no balancer to wait for (docs/operations.md).
        SHUTDOWN_DELAY_MS: '0',
        OVERLOAD_EVENT_LOOP_DELAY_MS: String(bound),
      });
      try {
        // The first requests build what the validator compiles on first use, which can hold
        // the loop past the bound: retried, as a client told Retry-After would.
        let key = '';
        for (let i = 0; !key; i++) {
          key = await customerKey(base, 'overload@example.com').catch((err: unknown) => {
            if (i >= 20) throw err;
            return sleep(1000).then(() => '');
          });
        }
        await closedLoop(base, key, 3);
        // The capacity once warm, on the first service (both are the same build).
        if (!capacity) capacity = await closedLoop(base, key, 5);
        else await closedLoop(base, key, 2);
        rows.push([name, await openLoop(base, key, Math.round(capacity * factor), durationS)]);
      } finally {
        await stopService(child);
      }
    }
    console.log(`Capacity (closed loop, 32 connections, warm): ${capacity.toFixed(0)} requests/s`);
    console.log(
      '| run | offered/s | accepted/s during the offer | p50 / p99 accepted | shed/s | p50 / p99 shed | lost (error or > 10 s) | ready again |',
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const [name, run] of rows) {
      console.log(
        `| ${name} | ${run.offered} | ${(run.acceptedDuring / durationS).toFixed(0)} | ` +
          `${fmt(percentile(run.accepted, 50))} / ${fmt(percentile(run.accepted, 99))} | ${(run.shed.length / durationS).toFixed(0)} | ` +
          `${fmt(percentile(run.shed, 50))} / ${fmt(percentile(run.shed, 99))} | ${run.lost + run.other} | ${fmt(run.readyAgainMs)} |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
