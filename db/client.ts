// Opens the SQLite file (or :memory:) with the pragmas the service relies on and applies
// the committed migrations.
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { sql, type Placeholder } from 'drizzle-orm';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { defaultDatabaseTimeoutMs } from '../domain/storage';
import { sqliteMigrationsFolder } from './files';
import * as schema from './schema';

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/**
 * `maxSizeMb`: the file takes no more pages past it; a write that needs one fails with
 * SQLITE_FULL. `busyTimeoutMs`: how long a statement waits for another connection's lock
 * before failing with SQLITE_BUSY.
 */
export function openDatabase(
  path: string,
  { maxSizeMb, busyTimeoutMs = defaultDatabaseTimeoutMs }: { maxSizeMb?: number | undefined; busyTimeoutMs?: number | undefined } = {},
): Db {
  if (path !== ':memory:') {
    makeFolders(dirname(path));
    // Created owner-only before SQLite opens it: accounts, key hashes and orders are
    // nobody else's business. SQLite gives the -wal and -shm files the database
    // file's mode. 'a' leaves an existing file (and its mode) as it is.
    closeSync(openSync(path, 'a', 0o600));
  }
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  // Another process (or connection) holding the write lock makes us wait, not fail, for a
  // bounded time (DATABASE_TIMEOUT_MS).
  sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  sqlite.pragma('foreign_keys = ON');
  // SQLite's own default page cache, not the larger one better-sqlite3 builds it with. What
  // this connection caches is mostly the pages it has just written, which no one reads
  // through it again; the larger cache held them until it was full, so the process grew
  // with the file (docs/performance.md, "Memory"). The reading connection keeps the larger one.
  sqlite.pragma('cache_size = -2000');
  if (maxSizeMb !== undefined) {
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
    sqlite.pragma(`max_page_count = ${Math.floor((maxSizeMb * 1024 * 1024) / pageSize)}`);
  }
  return drizzle(sqlite, { schema });
}

/**
 * `mkdir -p`, owner-only. Not Node's recursive mkdirSync: where a parent exists but
 * refuses new entries with ENOENT (under /proc), it tries again forever.
 */
function makeFolders(dir: string): void {
  if (existsSync(dir)) return;
  const parent = dirname(dir);
  if (parent !== dir) makeFolders(parent);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/**
 * True once any migration has been applied to this file. Asked before migrating, it
 * tells a brand-new database (seed it) from an existing one (never touch its data).
 */
export function hasAppliedMigrations(db: Db): boolean {
  return appliedMigrations(db) > 0;
}

/** How many migrations have been applied to this file (0 before the first). */
function appliedMigrations(db: Db): number {
  const sqlite = db.$client;
  const table = sqlite.prepare("select 1 from sqlite_master where type = 'table' and name = '__drizzle_migrations'").get();
  if (!table) return 0;
  const { n } = sqlite.prepare('select count(*) as n from __drizzle_migrations').get() as { n: number };
  return n;
}

/**
 * Applies pending migrations. drizzle-kit rebuilds a SQLite table by copying it and
 * dropping the original; with foreign keys on, that drop would cascade-delete child
 * rows. Its own `PRAGMA foreign_keys=OFF` is a no-op inside the migration transaction,
 * so they are switched off around it here, and checked before they come back on, when
 * a migration ran: the check reads every row, and a start with none pending (every
 * start but the first after an upgrade) would otherwise take longer the more is stored.
 */
export function migrateDatabase(db: Db, folder: string = sqliteMigrationsFolder): void {
  const sqlite = db.$client;
  const before = appliedMigrations(db);
  sqlite.pragma('foreign_keys = OFF');
  try {
    migrate(db, { migrationsFolder: folder });
    if (appliedMigrations(db) === before) return;
    const violations = sqlite.pragma('foreign_key_check') as unknown[];
    if (violations.length > 0) {
      throw new Error(`Migration left ${violations.length} foreign key violations: ${JSON.stringify(violations.slice(0, 5))}`);
    }
  } finally {
    sqlite.pragma('foreign_keys = ON');
  }
}

/** A migrated database: what the service and every test file start from. */
export function createDatabase(path: string): Db {
  const db = openDatabase(path);
  migrateDatabase(db);
  return db;
}

/**
 * A statement built on first use and reused for the life of its repository: drizzle
 * renders the SQL and better-sqlite3 prepares it once, not on every request. Built
 * lazily so a repository can be created before the migrations that make its tables.
 */
export function prepared<T>(build: () => T): () => T {
  let statement: T | undefined;
  return () => (statement ??= build());
}

/** A named parameter of a prepared statement, as `update().set()` accepts it (its types take SQL, not a bare placeholder). */
export const bound = (name: string) => sql`${sql.placeholder(name)}`;

/**
 * A named parameter, written `+?`: the same value (unary plus is no operation in SQLite),
 * but one the query planner does not read. SQLite 3.54 marks a bare `?` compared in a
 * WHERE clause as one whose value may change the plan, and better-sqlite3 clears the
 * bindings after every run, which then recompiles the statement on the next: a few
 * microseconds per run for a join or a filtered list (docs/storage.md, Statements).
 */
export const param = (name: string) => sql`+${sql.placeholder(name)}` as unknown as Placeholder;

/**
 * A LIMIT bound at run time (a name) or written into the SQL (a number), for `.limit()`.
 * The SQLite that better-sqlite3 bundles reads the value bound to a bare `LIMIT ?` while
 * planning, so every new binding recompiles the statement: about 4 µs per run in a tight
 * loop and about 25 µs in the loaded service, most of a list query's time. A CAST hides
 * the value from the planner; a number is written in as a literal. drizzle types
 * `.limit()` as a number or a placeholder, and renders any SQL given there.
 */
export const rowLimit = (limit: string | number): Placeholder =>
  (typeof limit === 'number'
    ? sql.raw(String(Math.trunc(limit)))
    : sql`cast(${sql.placeholder(limit)} as integer)`) as unknown as Placeholder;
