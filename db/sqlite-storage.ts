// The storage port (domain/storage.ts) on a SQLite file: where and when the queries of
// db/sqlite-queries.ts run. docs/storage.md explains the design; in short:
//
// - One connection writes for every request of the process, and the domain awaits
//   between the statements of a rule, so `transaction(work)` runs under an async mutex:
//   no other request's statement lands inside an open transaction.
// - Group commit: the transactions started in one turn of the event loop run together at
//   its end, each in a SAVEPOINT of one BEGIN IMMEDIATE (a throw rolls back its own writes
//   only), committing after every sixty-fourth and after the last. None answers before its
//   COMMIT; a COMMIT that fails fails every transaction in it.
// - A write outside a transaction is a transaction of its own: every write commits by an
//   explicit COMMIT, never in autocommit, whose failure better-sqlite3 can lose (a
//   statement read with `.get()` commits in its reset, and the reset's error is dropped).
// - Reads outside a transaction go to a second, read-only connection: committed rows
//   only, never waiting for the writer. Those made before the microtask queue next drains
//   share one read transaction (readSnapshot, below), which this process's COMMIT also ends.
// - A write that cannot be made durable (full disk, I/O error) is refused with
//   StorageUnavailable (503), and readiness fails until there is room again.
import Database, { type Database as SqliteDatabase } from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { StorageUnavailable } from '../domain/errors';
import type { Queries, Storage } from '../domain/storage';
import type { Checkpointer } from './checkpointer';
import type { Db } from './client';
import * as schema from './schema';
import { createQueries, createServiceQueries, readOnly } from './sqlite-queries';
import { guardTransactions } from './transaction-guard';

/** SQLite's answers for a write that cannot be made durable: no space, an I/O error, a file that became read-only. */
const notDurable = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY'));
};

const busy = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
};

/** How long a client refused for want of space is asked to wait before retrying. */
const retryAfterSeconds = 5;

/** Ready again means room for the largest write one request makes (a body is at most 64 KiB). */
const writeCheckRoom = Buffer.alloc(64 * 1024);

/**
 * At most this many transactions share a COMMIT: more than a turn brings under the bench's
 * 32 connections, so that each turn's writes cost one COMMIT, and a bound on how long the
 * batch's first transaction waits for the others (docs/storage.md, "Group commit").
 */
export const maxBatch = 64;

/** A FIFO async mutex: `held` tells callers whether they must queue. */
class Mutex {
  held = false;
  private waiting: Array<() => void> = [];

  async acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Whether someone waits for the lock. */
  get queued(): boolean {
    return this.waiting.length > 0;
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

/** The transactions that share one COMMIT: each learns its fate from `committed`. */
class Batch {
  size = 0;
  readonly committed: Promise<void>;
  resolve!: () => void;
  reject!: (error: unknown) => void;
  constructor() {
    this.committed = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Only the members whose work succeeded await it. When none did, a failed COMMIT
    // would otherwise be an unhandled rejection.
    this.committed.catch(() => {});
  }
}

/**
 * The reads outside a transaction that run before the microtask queue next drains share
 * one read transaction: its BEGIN before the first, its COMMIT in a microtask queued then
 * (or sooner: `end`, at each COMMIT of this process's writes). In SQLite's autocommit each
 * read would be a read transaction of its own, taking and dropping the file's shared lock
 * with system calls every time (docs/storage.md, "Reads"). A snapshot never outlives the
 * macrotask it began in, so a request's reads see every write committed before it arrived.
 */
function readSnapshot(reader: SqliteDatabase) {
  const begin = reader.prepare('BEGIN');
  const commit = reader.prepare('COMMIT');
  const end = () => {
    if (!reader.open || !reader.inTransaction) return;
    try {
      commit.run();
    } catch {
      // A read transaction has nothing to commit: ended either way, and never thrown from
      // the microtask, where it would stop the process.
      try {
        reader.exec('ROLLBACK');
      } catch {
        // Not in a transaction any more.
      }
    }
  };
  return {
    end,
    /** `read`, run inside the current snapshot, which it begins when there is none. */
    within<A extends unknown[], R>(read: (...args: A) => R) {
      return (...args: A): R => {
        if (!reader.inTransaction) {
          begin.run();
          queueMicrotask(end);
        }
        return read(...args);
      };
    },
  };
}

/** A second connection to the file that only reads: it sees committed rows, and never waits for a write. */
function openReader(sqlite: SqliteDatabase): Db {
  const reader = drizzle(new Database(sqlite.name), { schema });
  // The writing connection's bound (DATABASE_TIMEOUT_MS).
  reader.$client.pragma(`busy_timeout = ${sqlite.pragma('busy_timeout', { simple: true }) as number}`);
  reader.$client.pragma('query_only = ON');
  return reader;
}

export interface SqliteStorageOptions {
  /** The file's checkpoint thread (db/checkpointer.ts), stopped by close(). */
  checkpointer?: Checkpointer | null;
  /** Writes began to fail for want of space or on I/O errors (an error), or succeed again (null). */
  onWriteFailure?: (error: Error | null) => void;
}

export function createSqliteStorage(db: Db, { checkpointer = null, onWriteFailure = () => {} }: SqliteStorageOptions = {}): Storage {
  const sqlite: SqliteDatabase = db.$client;
  if (sqlite.memory || sqlite.readonly) throw new Error('The SQLite storage needs a database file it can write (not :memory:)');
  const queries = createQueries(db);
  const service = createServiceQueries(db);
  const reader = openReader(sqlite);
  const readService = createServiceQueries(reader);
  const readQueries = createQueries(reader);
  const begin = sqlite.prepare('BEGIN IMMEDIATE');
  const commit = sqlite.prepare('COMMIT');
  const rollback = sqlite.prepare('ROLLBACK');
  const savepoint = sqlite.prepare('SAVEPOINT work');
  const rollbackToSavepoint = sqlite.prepare('ROLLBACK TO work');
  const releaseSavepoint = sqlite.prepare('RELEASE work');
  const ping = reader.$client.prepare('select 1');
  const snapshot = readSnapshot(reader.$client);
  const mutex = new Mutex();
  let open: Batch | null = null;
  let closed: Promise<void> | undefined;

  // After a failed COMMIT the ROLLBACK can fail too (the same full disk); the COMMIT's
  // error is the one its transactions hear, and they must hear it.
  const rollbackQuietly = () => {
    try {
      if (sqlite.inTransaction) rollback.run();
    } catch {
      // The connection rolls the transaction back itself when it cannot.
    }
  };
  const failBatch = (error: unknown) => {
    const batch = open;
    open = null;
    batch?.reject(error);
  };
  // Under the mutex: commits the open batch and tells its members.
  const commitOpen = () => {
    const batch = open;
    open = null;
    if (!batch) return;
    try {
      commit.run();
      batch.resolve();
    } catch (error) {
      rollbackQuietly();
      batch.reject(error);
    }
    // A read after this COMMIT sees what it wrote.
    snapshot.end();
  };
  // Run back to back at the end of the turn, SQLite's code and pages stay in the CPU's
  // caches from one transaction to the next (docs/storage.md).
  let turnEnd: Promise<void> | null = null;
  const endOfTurn = () =>
    (turnEnd ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        turnEnd = null;
        resolve();
      }),
    ));

  // The last refusal for want of space or on an I/O error, until a readiness check finds room.
  let writeFailure: { error: StorageUnavailable; at: number } | null = null;
  const refusal = (cause: unknown) => {
    // Another process held the file's write lock past busy_timeout (DATABASE_TIMEOUT_MS).
    if (busy(cause)) return new StorageUnavailable('unavailable', 'The database is busy; try again later', 1, { cause });
    if (!notDurable(cause)) return cause;
    const error = new StorageUnavailable(
      'storage_unavailable',
      'The database could not store this write (disk full or I/O error); nothing was stored',
      retryAfterSeconds,
      { cause },
    );
    if (!writeFailure) onWriteFailure(error);
    writeFailure = { error, at: Date.now() };
    return error;
  };

  async function transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T> {
    await endOfTurn();
    await mutex.acquire();
    let batch: Batch;
    let result: T;
    try {
      // SQLite rolls a whole transaction back on some errors (a full disk, an I/O error).
      if (open && !sqlite.inTransaction) failBatch(new Error('The write transaction was rolled back'));
      if (!open) {
        begin.run();
        open = new Batch();
      }
      batch = open;
      savepoint.run();
      try {
        result = await work(queries);
      } catch (error) {
        try {
          if (!sqlite.inTransaction) throw error;
          rollbackToSavepoint.run();
          releaseSavepoint.run();
        } catch {
          // Rolled back by SQLite, or its writes cannot be undone alone: the batch goes
          // with it, so that nothing it half did can commit.
          rollbackQuietly();
          failBatch(error);
        }
        throw error;
      }
      releaseSavepoint.run();
      if (++batch.size >= maxBatch) commitOpen();
    } catch (error) {
      throw refusal(error);
    } finally {
      // The last of the turn's transactions commits the batch: no other will join it.
      if (!mutex.queued) commitOpen();
      mutex.release();
    }
    try {
      await batch.committed;
    } catch (error) {
      throw refusal(error);
    }
    return result;
  }

  /** A write outside a transaction: a transaction of its own, answered after its COMMIT. */
  const write =
    <A extends unknown[], R>(op: (...args: A) => R) =>
    (...args: A): Promise<R> =>
      transaction(async () => op(...args));

  const reads = new Set<string>(readOnly);
  const outer: Record<string, unknown> = {};
  for (const [name, op] of Object.entries(queries) as Array<[string, (...args: unknown[]) => unknown]>) {
    // createQueries' operations use no `this`: the reader's are handed on, each in the snapshot.
    outer[name] = reads.has(name)
      ? snapshot.within((readQueries as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!)
      : write(op);
  }

  return guardTransactions({
    ...(outer as unknown as Queries),
    engine: 'sqlite',
    transaction,
    takeRateLimitLease: write(service.takeRateLimitLease),
    resetRateLimit: write(service.resetRateLimit),
    purgeRateLimits: write(service.purgeRateLimits),
    addDeprecatedCalls: write(service.addDeprecatedCalls),
    deprecatedCallers: readService.deprecatedCallers,
    // Reads answer; and after a refused write, not ready for the Retry-After it gave, then
    // until a write as large as a request's succeeds. Small writes may still fit meanwhile
    // (an UPDATE of no rows always does), so only this check ends the failure.
    async ping() {
      ping.get();
      if (!writeFailure) return;
      if (Date.now() - writeFailure.at < retryAfterSeconds * 1000) throw writeFailure.error;
      await transaction(async () => service.checkWrite(writeCheckRoom));
      writeFailure = null;
      onWriteFailure(null);
    },
    // Once: the lock it takes is never given back.
    close: () =>
      (closed ??= (async () => {
        await mutex.acquire();
        // A batch its last transaction left open, since this close waited for the lock.
        commitOpen();
        snapshot.end();
        reader.$client.close();
        // Stopped first, so that this connection is the file's last: closing it checkpoints
        // what the log still holds and removes the log.
        await checkpointer?.stop();
        sqlite.close();
      })()),
  });
}
