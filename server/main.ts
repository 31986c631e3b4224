// Serves createApp() on PORT: applies migrations (and loads the demo catalogue into a
// brand-new database), listens, runs the message delivery worker, and on SIGTERM/SIGINT
// drains (see server/http-server.ts), stops the worker, closes the database and exits 0.
import { hasAppliedMigrations, migrateDatabase, openDatabase } from '../db/client';
import { seedDemoData } from '../db/seed';
import { createApp } from './app';
import { ConfigError, loadConfig } from './config';
import { startDeliveryWorker, type DeliveryWorker } from './delivery-worker';
import { createHttpServer, type Lifecycle } from './http-server';
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
    log.info({ seeded }, 'New database: loaded the demo catalogue');
  }
  const lifecycle: Lifecycle = { draining: false };
  const app = createApp({ db, config, log, lifecycle });
  const { server, drain } = createHttpServer(app, config, lifecycle, log);

  let worker: DeliveryWorker | undefined;
  server.listen(config.port, config.host, () => {
    worker = startDeliveryWorker({ db, config, log });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    log.info(
      { database: config.databasePath },
      `Pet store listening on http://${config.host}:${port}; API reference at http://${config.host}:${port}/docs`,
    );
  });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: draining in-flight requests`);
    await drain();
    // The worker writes to the database, so it stops first.
    await worker?.stop();
    db.$client.close();
    log.info('Stopped');
    log.flush();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

try {
  main();
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
}
