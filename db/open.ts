// Opens the configured database behind the storage port: PostgreSQL when DATABASE_URL is
// set, else the SQLite file. `prepare` also applies migrations (and loads the demo
// catalogue into a brand-new database); it runs once per deployment step: in the one
// process, or in the cluster's primary before it forks.
import type { Storage } from '../domain/storage';
import { createStore } from '../domain/store';
import { hasAppliedMigrations, migrateDatabase, openDatabase } from './client';
import { seedDemoData } from './seed';
// PostgreSQL's driver and dialect are loaded only when DATABASE_URL asks for them:
// loading them took about a tenth of a second of every SQLite start.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, as said above
const pg = (): typeof import('./pg/storage') => require('./pg/storage') as typeof import('./pg/storage');
import { createSqliteStorage } from './sqlite-storage';

export interface DatabaseConfig {
  databasePath: string;
  databaseUrl?: string | undefined;
}

/** Opens the database without touching its schema (a cluster worker, once the primary migrated). */
export function openStorage(config: DatabaseConfig): Storage {
  if (config.databaseUrl) {
    const { createPgStorage, openPgDatabase } = pg();
    return createPgStorage(openPgDatabase(config.databaseUrl));
  }
  return createSqliteStorage(openDatabase(config.databasePath));
}

/** Migrates, seeds a brand-new database when asked, and returns the open storage. */
export async function prepareStorage(
  config: DatabaseConfig & { seedDemoData: boolean },
): Promise<{ storage: Storage; seeded: { categories: number; pets: number } | null }> {
  let storage: Storage;
  let brandNew: boolean;
  if (config.databaseUrl) {
    const { createPgStorage, migratePg, openPgDatabase } = pg();
    const db = openPgDatabase(config.databaseUrl);
    ({ brandNew } = await migratePg(db));
    storage = createPgStorage(db);
  } else {
    const db = openDatabase(config.databasePath);
    // Asked before migrating: afterwards every database looks used.
    brandNew = !hasAppliedMigrations(db);
    migrateDatabase(db);
    storage = createSqliteStorage(db);
  }
  const seeded = brandNew && config.seedDemoData ? await seedDemoData(createStore(storage)) : null;
  return { storage, seeded };
}
