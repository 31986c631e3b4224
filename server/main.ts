// Serves createApp() on PORT: applies migrations (and loads the demo catalogue into a
// brand-new database), listens, runs the message delivery worker, and on SIGTERM/SIGINT
// drains (see server/http/server.ts), stops the worker, closes the database and exits 0.
// With WEB_CONCURRENCY > 1 this process is the cluster's primary (server/cluster.ts).
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { openStorage, type ServiceOptions } from '../db/open';
import { createApp } from './app';
import { createDeprecatedCallLog } from './deprecation/call-log';
import { startPrimary, workerListening } from './cluster';
import { ConfigError, loadConfig, type Config } from './config';
import { startDeliveryWorker, type DeliveryWorker } from './delivery-worker';
import { createHttpServer, createLifecycle } from './http/server';
import { collectGarbage } from './heap';
import { createLogger } from './observability/log';
import { createOverloadMonitor } from './http/overload';
import { listenOrFail, prepareStorageWhenReachable, reportNewDatabase, StartupError } from './startup';
import { warmUp, warmUpUrls, type WarmUpState } from './pipeline/warm-up';
import { operationTable } from '../generated/operations';

// prom-client is loaded only when the metrics are on (METRICS_PORT).
type MetricsModule = typeof import('./observability/metrics');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, as said above
const metricsModule = (): MetricsModule => require('./observability/metrics') as MetricsModule;

// OpenTelemetry is loaded only when tracing is on: its SDK is slow to load.
type TracingModule = typeof import('./observability/tracing');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, as said above
const tracingModule = (): TracingModule => require('./observability/tracing') as TracingModule;

const beforeReadyTasks: Array<() => void> = [];
/**
 * Runs `task` once this process serves, warmed up, just before /readyz says ready:
 * server/entry.cjs keeps V8's cache of the bundle's code there, for the next start. Never
 * in a cluster's primary, which serves nothing.
 */
export function beforeReady(task: () => void): void {
  beforeReadyTasks.push(task);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  // WEB_CONCURRENCY > 1: this process migrates, forks the workers and serves nothing itself.
  if (config.webConcurrency > 1 && cluster.isPrimary) {
    // The primary serves the metrics of all its workers together.
    if (config.metrics) await metricsModule().serveMetrics(config.metrics, metricsModule().clusterExposition(), log);
    return startPrimary(config, log);
  }
  // A cluster worker finds the database migrated by its primary.
  // SQLite's WAL checkpoints in a thread of their own (db/checkpointer.ts).
  const service: ServiceOptions = {
    checkpoints: {
      onError: (err) => log.error({ err }, 'WAL checkpoint thread failed; commits checkpoint again'),
      onStall: (err) =>
        err ? log.error({ err }, 'WAL checkpoints are failing (disk full?); retrying') : log.info('WAL checkpoints succeed again'),
    },
    onWriteFailure: (err) =>
      err
        ? log.error(
            { err: err.cause ?? err },
            'Writes are refused with 503 storage_unavailable: the database cannot store them (disk full or I/O error)',
          )
        : log.info('Writes succeed again'),
    onDatabaseUnreachable: (err) =>
      err
        ? log.error({ err: err.cause ?? err }, 'PostgreSQL does not answer: requests are refused with 503 unavailable until it does')
        : log.info('PostgreSQL answers again'),
  };
  const storage = cluster.isWorker ? openStorage(config, service) : await prepareMigratedStorage(config, log, service);
  const lifecycle = createLifecycle();
  const metrics = config.metrics ? metricsModule().createMetrics() : undefined;
  // A worker's metrics are served by its primary, added up with the other workers'.
  if (metrics && cluster.isWorker) metricsModule().reportToPrimary(metrics.registry);
  else if (metrics && config.metrics)
    await metricsModule().serveMetrics(config.metrics, metricsModule().expositionOf(metrics.registry), log);
  const tracing = config.tracing
    ? tracingModule().startTracing(log, { sampler: config.traceSampler, propagators: config.tracePropagators })
    : undefined;
  const deprecatedCalls = createDeprecatedCallLog(storage, log);
  const overload = createOverloadMonitor(config.overloadEventLoopDelayMs, log);
  const warming: WarmUpState = { pending: config.warmUpMs > 0 };
  const app = createApp({ storage, config, log, lifecycle, tracing, metrics, deprecatedCalls, overload, warmUp: warming });
  const http = createHttpServer(app, config, lifecycle, log);
  const { server } = http;
  metrics?.connections(http.connections);

  // A worker accepts on a socket of its own where Linux lets sockets share a port (a port
  // of 0 would give each worker a different one); the primary then passes no connection.
  const ownSocket = cluster.isWorker && process.platform === 'linux' && config.port !== 0;
  await listenOrFail(server, config, http.backlog, ownSocket);
  const worker: DeliveryWorker = startDeliveryWorker({ storage, config, log, onDelivered: metrics?.delivered });
  overload?.start();

  let stopping = false;
  const stop = async (signal: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    // Ctrl-C is a person at a terminal, with no balancer to tell: no delay.
    const delayMs = signal === 'SIGINT' ? 0 : config.shutdownDelayMs;
    log.info(
      { shutdownDelayMs: delayMs },
      `${signal}: /readyz answers 503; answering with Connection: close for ${delayMs} ms, then draining in-flight requests`,
    );
    try {
      // No connection left and no handler still at work, even one whose client hung up:
      // only then may the database close.
      await http.drain(delayMs);
      // The worker writes to the database, so it stops first.
      await worker.stop();
      // The counts of deprecated calls not yet written.
      await deprecatedCalls.close();
      overload?.stop();
      await storage.close();
      // The spans of the last requests, which the exporter still holds.
      await tracing?.shutdown().catch((err: unknown) => log.warn({ err }, 'Could not export the last spans'));
      log.info('Stopped');
    } finally {
      log.flush();
      process.exit(exitCode);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM', 0));
  process.on('SIGINT', () => void stop('SIGINT', 0));
  // A bug that escaped every request: said once at fatal, then the same drain as SIGTERM,
  // and a non-zero exit so that a process manager (or the cluster's primary) restarts it.
  const crash = (kind: string) => (err: unknown) => {
    if (stopping) return log.error({ err }, `${kind} while stopping`);
    log.fatal({ err }, `${kind}: draining, then exiting with 1`);
    void stop(kind, 1);
  };
  process.on('uncaughtException', crash('uncaughtException'));
  process.on('unhandledRejection', crash('unhandledRejection'));
  // A worker tells its primary it listens once a signal would drain it (server/cluster.ts).
  if (cluster.isWorker) process.send?.(workerListening);

  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  log.info(
    { database: config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : config.databasePath, node: process.version },
    `Pet store listening on http://${config.host}:${port}; API reference at http://${config.host}:${port}/docs`,
  );
  // Listening already (/healthz answers), not ready (/readyz 503) until the GETs are warm.
  if (warming.pending) {
    try {
      const urls = warmUpUrls(operationTable);
      const done = await warmUp(app, urls, { budgetMs: config.warmUpMs, rounds: warmUpRounds, setUp: warming.setUp });
      // Its garbage goes before ready, not whenever V8 gets to it (server/heap.ts).
      collectGarbage();
      log.info(done, `Warmed up: ${done.requests} GETs in process in ${done.ms} ms`);
    } catch (err) {
      // A warm-up that fails leaves a colder process, not a broken one.
      log.warn({ err }, 'The warm-up failed; ready without it');
    }
  }
  for (const task of beforeReadyTasks.splice(0)) task();
  warming.pending = false;
}

// Enough for V8 to optimise each GET's path (it compiles a function after some hundreds of calls).
const warmUpRounds = 500;

async function prepareMigratedStorage(config: Config, log: Logger, service: ServiceOptions) {
  const prepared = await prepareStorageWhenReachable(config, log, service);
  reportNewDatabase(log, prepared);
  const { storage } = prepared;
  return storage;
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError || error instanceof StartupError ? error.message : error);
  process.exit(1);
});
