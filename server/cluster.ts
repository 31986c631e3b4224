// WEB_CONCURRENCY=N (N > 1): every core of one machine. This primary process migrates the
// database once (and seeds a brand-new one), then forks N workers that run server/main.ts
// as usual and share the port through node:cluster. The guarantees of one process hold
// across workers because they live in the database: stock rules are transactions,
// messages are claimed once, rate-limit budgets are rows (server/security/rate-limit-store.ts).
// On Linux each worker accepts on a socket of its own on the port (SO_REUSEPORT, Node's
// `reusePort`), so the kernel spreads connections and the primary passes none: passing
// each connection over cost the workers a third more CPU per request
// (docs/performance.md, "Several processes"). A worker that dies loses the connections
// the kernel had queued on its socket, not yet accepted (reset; its replacement opens a
// new socket), where one socket held by the primary kept them.
//
// SIGTERM/SIGINT are forwarded to every worker; each drains its requests and exits; the
// primary exits 0 once all have (1 if any did not exit cleanly). A worker still starting
// is told once it listens: until its handlers are in place the signal would kill it
// undrained. A worker that dies on its own is replaced; one that exits before it listens
// (it could not start) stops them all. The primary counts its workers itself: Node's
// `cluster.workers` keeps one that has exited until its channel has closed as well, and
// the two come in either order.
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { Config } from './config';
import { checkListen, prepareStorageWhenReachable, reportNewDatabase } from './startup';

/** What a worker says to its primary once it listens and handles SIGTERM and SIGINT. */
export const workerListening = { petstore: 'listening' } as const;

export async function startPrimary(config: Config, log: Logger): Promise<void> {
  // Said once here, rather than by every worker failing to listen.
  await checkListen(config);
  const prepared = await prepareStorageWhenReachable(config, log);
  reportNewDatabase(log, prepared);
  const { storage } = prepared;
  // The primary serves nothing: its connection closes before the workers open theirs.
  await storage.close();

  let stopping: NodeJS.Signals | undefined;
  let failed = false;
  const live = new Set<Worker>();
  const fork = () => live.add(cluster.fork());

  const listened = new WeakSet<Worker>();
  cluster.on('message', (worker: Worker, message: unknown) => {
    if ((message as typeof workerListening | undefined)?.petstore !== workerListening.petstore) return;
    listened.add(worker);
    if (stopping) worker.process.kill(stopping);
  });
  cluster.on('exit', (worker: Worker, code, signal) => {
    live.delete(worker);
    // A worker that could not start (it said why in one line) would fail again: stop.
    if (!stopping && !listened.has(worker)) {
      failed = true;
      stop('SIGTERM');
      return;
    }
    if (!stopping) {
      log.error({ pid: worker.process.pid, code, signal }, 'Worker died; starting another');
      fork();
      return;
    }
    if (code !== 0) failed = true;
    if (live.size === 0) {
      log.info('Stopped');
      process.exit(failed ? 1 : 0);
    }
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = signal;
    log.info(`${signal}: asking ${config.webConcurrency} workers to drain`);
    for (const worker of live) if (listened.has(worker)) worker.process.kill(signal);
    if (live.size === 0) process.exit(failed ? 1 : 0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  for (let i = 0; i < config.webConcurrency; i++) fork();
}
