// Serves createApp() on PORT: applies migrations (and loads the demo catalogue into a
// brand-new database), listens, runs the message delivery worker, and on SIGTERM/SIGINT
// stops taking connections, lets in-flight requests finish, stops the worker, then
// closes the database.
import { hasAppliedMigrations, migrateDatabase, openDatabase } from '../db/client';
import { seedDemoData } from '../db/seed';
import { createApp } from './app';
import { ConfigError, loadConfig } from './config';
import { startDeliveryWorker, type DeliveryWorker } from './delivery-worker';
import { createLogger } from './log';

function main(): void {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const db = openDatabase(config.databasePath);
  // Asked before migrating: afterwards every database looks used.
  const brandNew = !hasAppliedMigrations(db);
  migrateDatabase(db);
  if (brandNew && config.seedDemoData) {
    const seeded = seedDemoData(db);
    log.info('New database: loaded the demo catalogue', seeded);
  }
  const app = createApp({ db, config, log });

  let worker: DeliveryWorker | undefined;
  const server = app.listen(config.port, config.host, () => {
    worker = startDeliveryWorker({ db, config, log });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    log.info(`Pet store listening on http://${config.host}:${port}; API reference at http://${config.host}:${port}/docs`, {
      database: config.databasePath,
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
    server.close(() => {
      void (async () => {
        // The worker writes to the database, so it stops first.
        await worker?.stop();
        db.$client.close();
        log.info('Stopped');
        process.exit(0);
      })();
    });
    server.closeIdleConnections();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

try {
  main();
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
}
