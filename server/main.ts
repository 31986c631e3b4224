// Serves createApp() on PORT: applies migrations (and loads the demo catalogue into a
// brand-new database), listens, runs the message delivery worker, and on SIGTERM/SIGINT
// stops taking connections, lets in-flight requests finish, stops the worker, then
// closes the database.
import cluster from 'node:cluster';
import { openStorage, prepareStorage } from '../db/open';
import { createApp } from './app';
import { ConfigError, loadConfig } from './config';
import { startDeliveryWorker, type DeliveryWorker } from './delivery-worker';
import { createLogger } from './log';
import { startPrimary } from './cluster';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  // WEB_CONCURRENCY > 1: this process migrates, forks the workers and serves nothing itself.
  if (config.webConcurrency > 1 && cluster.isPrimary) return startPrimary(config, log);
  // A cluster worker finds the database migrated by its primary.
  const storage = cluster.isWorker ? openStorage(config) : await prepareMigratedStorage(config, log);
  const app = createApp({ storage, config, log });

  let worker: DeliveryWorker | undefined;
  const server = app.listen(config.port, config.host, () => {
    worker = startDeliveryWorker({ storage, config, log });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    log.info(`Pet store listening on http://${config.host}:${port}; API reference at http://${config.host}:${port}/docs`, {
      database: config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : config.databasePath,
    });
  });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: draining in-flight requests`);
    const deadline = setTimeout(() => {
      log.error('Shutdown timed out; closing remaining connections');
      server.closeAllConnections();
    }, config.shutdownTimeoutMs);
    deadline.unref();
    server.close(async () => {
      // The worker writes to the database, so it stops first.
      await worker?.stop();
      await storage.close();
      log.info('Stopped');
      process.exit(0);
    });
    server.closeIdleConnections();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

async function prepareMigratedStorage(config: Parameters<typeof prepareStorage>[0], log: ReturnType<typeof createLogger>) {
  const { storage, seeded } = await prepareStorage(config);
  if (seeded) log.info('New database: loaded the demo catalogue', seeded);
  return storage;
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
