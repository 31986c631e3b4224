// Opens the configured database behind the storage port: PostgreSQL when DATABASE_URL is
// set, else the SQLite file. `prepare` also applies migrations (and loads the demo
// catalogue into a brand-new database); it runs once per deployment step: in the one
// process, or in the cluster's primary before it forks.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Storage } from '../domain/storage';
import { createStore } from '../domain/store';
import { startCheckpointer } from './checkpointer';
import { hasAppliedMigrations, migrateDatabase, openDatabase, type Db } from './client';
import { seedDemoData } from './seed';
// PostgreSQL's driver and dialect are loaded only when DATABASE_URL asks for them, so that
// a SQLite start does not pay for them.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, as said above
const pg = (): typeof import('./pg/storage') => require('./pg/storage') as typeof import('./pg/storage');
import { createSqliteStorage } from './sqlite-storage';

export interface DatabaseConfig {
  databasePath: string;
  databaseMaxSizeMb?: number | undefined;
  databaseUrl?: string | undefined;
  /** Connections in the PostgreSQL pool (10 when not given). */
  databasePoolSize?: number | undefined;
  /** The bound on every wait on the database (defaultDatabaseTimeoutMs when not given). */
  databaseTimeoutMs?: number | undefined;
}

/**
 * How a long-running service opens SQLite: WAL checkpoints in their own thread
 * (db/checkpointer.ts), whose failure `onError` hears. Scripts that open the database
 * for a moment leave them to SQLite.
 */
export interface ServiceOptions {
  checkpoints: { onError: (error: Error) => void; onStall: (error: Error | null) => void };
  /** Writes began to fail for want of space or on I/O errors (an error), or succeed again (null). */
  onWriteFailure: (error: Error | null) => void;
  /** PostgreSQL became unreachable (an error), or answers again (null). */
  onDatabaseUnreachable?: (error: Error | null) => void;
}

const sqliteStorage = (db: Db, service: ServiceOptions | undefined) =>
  createSqliteStorage(
    db,
    service ? { checkpointer: startCheckpointer(db.$client, service.checkpoints), onWriteFailure: service.onWriteFailure } : {},
  );

const sqliteOptions = (config: DatabaseConfig) => ({ maxSizeMb: config.databaseMaxSizeMb, busyTimeoutMs: config.databaseTimeoutMs });

/** Opens the database without touching its schema (a cluster worker, once the primary migrated). */
export function openStorage(config: DatabaseConfig, service?: ServiceOptions): Storage {
  if (config.databaseUrl) {
    const { createPgStorage, openPgDatabase } = pg();
    return createPgStorage(openPgDatabase(config.databaseUrl, config.databasePoolSize, config.databaseTimeoutMs), {
      onAvailability: service?.onDatabaseUnreachable,
    });
  }
  return sqliteStorage(openDatabase(config.databasePath, sqliteOptions(config)), service);
}

/** A database this start made: where (a SQLite file, absolute), and the folder it had to make for it. */
export interface NewDatabase {
  where: string;
  /** The SQLite file's folder did not exist and was made (absolute), else undefined. */
  madeFolder?: string | undefined;
}

export interface PreparedStorage {
  storage: Storage;
  /** Set when no migration had touched the database before this start. */
  created: NewDatabase | null;
  seeded: { categories: number; pets: number } | null;
}

/** Migrates, seeds a brand-new database when asked, and returns the open storage. */
export async function prepareStorage(
  config: DatabaseConfig & { seedDemoData: boolean },
  service?: ServiceOptions,
): Promise<PreparedStorage> {
  let storage: Storage;
  let brandNew: boolean;
  let created: NewDatabase | null = null;
  if (config.databaseUrl) {
    const { createPgStorage, migratePg, openPgDatabase } = pg();
    const db = openPgDatabase(config.databaseUrl, config.databasePoolSize, config.databaseTimeoutMs);
    try {
      ({ brandNew } = await migratePg(db));
    } catch (error) {
      // Tried again with a new pool (server/startup.ts) or given up: this one is done.
      await db.$client.end();
      throw error;
    }
    storage = createPgStorage(db, { onAvailability: service?.onDatabaseUnreachable });
    if (brandNew) created = { where: 'PostgreSQL (DATABASE_URL)' };
  } else {
    const folder = resolve(dirname(config.databasePath));
    const folderExisted = config.databasePath === ':memory:' || existsSync(folder);
    const db = openDatabase(config.databasePath, sqliteOptions(config));
    // Asked before migrating: afterwards every database looks used.
    brandNew = !hasAppliedMigrations(db);
    migrateDatabase(db);
    storage = sqliteStorage(db, service);
    if (brandNew) created = { where: resolve(config.databasePath), madeFolder: folderExisted ? undefined : folder };
  }
  const seeded = brandNew && config.seedDemoData ? await seedDemoData(createStore(storage)) : null;
  return { storage, created, seeded };
}
