// The storage port (domain/storage.ts) on better-sqlite3: every operation is synchronous
// and returns plain data; statements without dynamic filters are prepared once here.
//
// One connection writes for every request of the process, and the domain awaits between
// the statements of a rule. So `transaction(work)` runs under an async mutex, and no
// other request's statement lands inside an open transaction.
//
// On a file, the transactions started in one turn of the event loop run together at its
// end (setImmediate), one after another, and share their COMMIT (group commit): the first
// opens BEGIN IMMEDIATE, each runs in a SAVEPOINT of it (a throw rolls back its own
// writes only), and the batch commits after every sixteenth and after the last. No
// transaction answers before its COMMIT; a COMMIT that fails fails every transaction in
// it. Reads outside a transaction run on a second, read-only connection, which sees
// committed rows only and never waits for the writer; a write outside a transaction runs
// joins the open batch as a transaction of its own.
//
// Every write commits through an explicit COMMIT, never SQLite's autocommit: a statement
// read with `.get()` (INSERT ... RETURNING) is reset after its first row, and the
// autocommit's error (SQLITE_FULL on a full disk) is then reported by the reset, which
// better-sqlite3 does not surface; the write was acknowledged and lost. A COMMIT that
// fails for want of space or on an I/O error refuses its transactions with
// StorageUnavailable (503), and readiness fails until a write succeeds again
// (docs/decisions.md, "Writes that cannot be made durable").
//
// An in-memory database (the tests') cannot be opened twice: there each transaction is
// BEGIN IMMEDIATE ... COMMIT alone, and every read outside it waits while it is open.
import { and, asc, count, eq, gt, inArray, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import Database, { type Database as SqliteDatabase } from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import * as schema from './schema';
import { StorageUnavailable } from '../domain/errors';
import type { Queries, Storage, StoredIdempotency } from '../domain/storage';
import type { Principal } from '../domain/types';
import type { Checkpointer } from './checkpointer';
import { bound, prepared, rowLimit, type Db } from './client';
import { toAccount, toApiKey, toCategory, toMessage, toOrder, toPet } from './rows';
import { accounts, apiKeys, categories, idempotencyKeys, inventory, messages, orders, pets, rateLimits, writeChecks } from './schema';

const isUniqueViolation = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE';

/** SQLite's answers for a write that cannot be made durable: no space, an I/O error, a file that became read-only. */
const notDurable = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY'));
};

/** Ready again means room for the largest write one request makes (a body is at most 64 KiB). */
const writeCheckRoom = Buffer.alloc(64 * 1024);

/** How long a client refused for want of space is asked to wait before retrying. */
const retryAfterSeconds = 5;

const inventoryColumns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

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

/**
 * One statement per combination of the optional filters (a key such as "1-0"), built on
 * first use; a number counts too (how many ids a list binds).
 */
function byShape<S, A extends Array<boolean | number>>(build: (...has: A) => S): (...has: A) => S {
  const statements = new Map<string, S>();
  return (...has) => {
    let shape = '';
    for (const h of has) shape += `${Number(h)}-`;
    let statement = statements.get(shape);
    if (!statement) statements.set(shape, (statement = build(...has)));
    return statement;
  };
}

// Every statement is a drizzle `.prepare()` with placeholders, built on first use (a
// storage may be created before the migrations that make its tables) and reused for the
// life of the storage: nothing is rendered or prepared per request.
function createQueries(db: Db): Queries {
  const p = sql.placeholder;

  const insertAccount = prepared(() =>
    db
      .insert(accounts)
      .values({ email: p('email'), passwordHash: p('passwordHash'), role: p('role'), createdAt: p('createdAt') })
      .onConflictDoNothing({ target: accounts.email })
      .returning()
      .prepare(),
  );
  const accountByEmail = prepared(() => db.select().from(accounts).where(eq(accounts.email, p('email'))).prepare());
  const accountById = prepared(() => db.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, p('id'))).prepare());

  const insertApiKey = prepared(() =>
    db
      .insert(apiKeys)
      .values({
        accountId: p('accountId'),
        name: p('name'),
        keyHash: p('keyHash'),
        prefix: p('prefix'),
        lastFour: p('lastFour'),
        expiresAt: p('expiresAt'),
        createdAt: p('createdAt'),
      })
      .returning()
      .prepare(),
  );
  const keyOwner = prepared(() =>
    db
      .select({
        keyId: apiKeys.id,
        accountId: apiKeys.accountId,
        role: accounts.role,
        expiresAt: apiKeys.expiresAt,
        revokedAt: apiKeys.revokedAt,
        lastUsedAt: apiKeys.lastUsedAt,
        keyHash: apiKeys.keyHash,
      })
      .from(apiKeys)
      .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
      .where(eq(apiKeys.keyHash, p('hash')))
      .prepare(),
  );
  const apiKeyPage = prepared(() =>
    db
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.accountId, p('accountId')), gt(apiKeys.id, p('after'))))
      .orderBy(asc(apiKeys.id))
      .limit(rowLimit('limit'))
      .prepare(),
  );
  const ownedKey = prepared(() =>
    db.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, p('id')), eq(apiKeys.accountId, p('accountId')))).prepare(),
  );
  const revokeKey = prepared(() =>
    db.update(apiKeys).set({ revokedAt: bound('at') }).where(and(eq(apiKeys.id, p('id')), isNull(apiKeys.revokedAt))).prepare(),
  );
  const touchKey = prepared(() => db.update(apiKeys).set({ lastUsedAt: bound('at') }).where(eq(apiKeys.id, p('id'))).prepare());
  const activeKeys = prepared(() =>
    db
      .select({ n: count() })
      .from(apiKeys)
      .where(and(eq(apiKeys.accountId, p('accountId')), isNull(apiKeys.revokedAt), or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, p('now')))))
      .prepare(),
  );

  const categoryPage = prepared(() =>
    db.select().from(categories).where(gt(categories.id, p('after'))).orderBy(asc(categories.id)).limit(rowLimit('limit')).prepare(),
  );
  const categoryById = prepared(() => db.select().from(categories).where(eq(categories.id, p('id'))).prepare());
  const insertCategory = prepared(() =>
    db
      .insert(categories)
      .values({ name: p('name'), nameKey: p('nameKey'), description: p('description') })
      .onConflictDoNothing({ target: categories.nameKey })
      .returning()
      .prepare(),
  );
  const updateCategory = prepared(() =>
    db
      .update(categories)
      .set({ name: bound('name'), nameKey: bound('nameKey'), description: bound('description') })
      .where(eq(categories.id, p('id')))
      .returning()
      .prepare(),
  );
  const deleteCategory = prepared(() => db.delete(categories).where(eq(categories.id, p('id'))).prepare());
  const petOfCategory = prepared(() => db.select({ id: pets.id }).from(pets).where(eq(pets.categoryId, p('id'))).limit(rowLimit(1)).prepare());

  // Each filter is an equality on the leading column of an index that ends in id
  // (pets_status_idx, pets_category_idx, the primary key). `ids` binds one placeholder
  // per id, one statement per count (the spec caps ids at 100), so each id is a
  // primary-key search.
  const petPage = byShape((status: boolean, category: boolean, ids: number) => {
    const where: SQL[] = [gt(pets.id, p('after'))];
    if (status) where.push(eq(pets.status, p('status')));
    if (category) where.push(eq(pets.categoryId, p('categoryId')));
    if (ids >= 0) where.push(inArray(pets.id, Array.from({ length: ids }, (_, i) => p(`id${i}`))));
    return db.select().from(pets).where(and(...where)).orderBy(asc(pets.id)).limit(rowLimit('limit')).prepare();
  });
  const petById = prepared(() => db.select().from(pets).where(eq(pets.id, p('id'))).prepare());
  const insertPet = prepared(() =>
    db.insert(pets).values({ name: p('name'), categoryId: p('categoryId'), status: p('status') }).returning().prepare(),
  );
  const insertStock = prepared(() => db.insert(inventory).values({ petId: p('petId'), quantity: 0 }).prepare());
  const updatePet = prepared(() =>
    db
      .update(pets)
      .set({ name: bound('name'), categoryId: bound('categoryId'), status: bound('status') })
      .where(eq(pets.id, p('id')))
      .returning()
      .prepare(),
  );
  const setPetStatus = prepared(() => db.update(pets).set({ status: bound('status') }).where(eq(pets.id, p('id'))).prepare());
  const deleteStock = prepared(() => db.delete(inventory).where(eq(inventory.petId, p('id'))).prepare());
  const deletePet = prepared(() => db.delete(pets).where(eq(pets.id, p('id'))).prepare());

  const inventoryPage = byShape((status: boolean) => {
    const where: SQL[] = [gt(pets.id, p('after'))];
    if (status) where.push(eq(pets.status, p('status')));
    return db
      .select(inventoryColumns)
      .from(pets)
      .innerJoin(inventory, eq(inventory.petId, pets.id))
      .where(and(...where))
      .orderBy(asc(pets.id))
      .limit(rowLimit('limit'))
      .prepare();
  });
  const inventoryById = prepared(() =>
    db.select(inventoryColumns).from(pets).innerJoin(inventory, eq(inventory.petId, pets.id)).where(eq(pets.id, p('id'))).prepare(),
  );
  const setStock = prepared(() => db.update(inventory).set({ quantity: bound('quantity') }).where(eq(inventory.petId, p('petId'))).prepare());

  // One statement per viewer kind and `complete` filter, each with its own index. A
  // placeholder skips the column's boolean mapping: `complete` is bound as 0/1.
  const orderPage = byShape((customer: boolean, byComplete: boolean) => {
    const where: SQL[] = [gt(orders.id, p('after'))];
    if (customer) where.push(eq(orders.accountId, p('accountId')));
    if (byComplete) where.push(eq(orders.complete, p('complete')));
    return db.select().from(orders).where(and(...where)).orderBy(asc(orders.id)).limit(rowLimit('limit')).prepare();
  });
  const orderById = byShape((customer: boolean) => {
    const where: SQL[] = [eq(orders.id, p('id'))];
    if (customer) where.push(eq(orders.accountId, p('accountId')));
    return db.select().from(orders).where(and(...where)).prepare();
  });
  // No RETURNING: SQLite passes a returned row through a trigger program and a buffer,
  // which cost more than the insert itself (10.8 us against 3.0 us per row in a loop).
  // The new row is what was written, with the id the insert reports.
  const insertOrder = prepared(() =>
    db
      .insert(orders)
      .values({ accountId: p('accountId'), petId: p('petId'), quantity: p('quantity'), complete: false, createdAt: p('createdAt') })
      .prepare(),
  );
  const completeOrder = prepared(() =>
    db.update(orders).set({ complete: true, shipDate: bound('shipDate') }).where(eq(orders.id, p('id'))).returning().prepare(),
  );
  const deleteOrder = prepared(() => db.delete(orders).where(eq(orders.id, p('id'))).prepare());
  const openOrderOfPet = prepared(() =>
    db
      .select({ id: orders.id })
      .from(orders)
      .where(and(eq(orders.petId, p('petId')), eq(orders.complete, false)))
      .limit(rowLimit(1))
      .prepare(),
  );

  const idempotencyRecord = prepared(() =>
    db
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.accountId, p('accountId')), eq(idempotencyKeys.key, p('key'))))
      .prepare(),
  );
  const saveIdempotency = prepared(() =>
    db
      .insert(idempotencyKeys)
      .values({ accountId: p('accountId'), key: p('key'), requestHash: p('requestHash'), outcome: p('outcome'), createdAt: p('createdAt') })
      // An expired record not purged yet gives way to the new one.
      .onConflictDoUpdate({
        target: [idempotencyKeys.accountId, idempotencyKeys.key],
        set: { requestHash: bound('requestHash'), outcome: bound('outcome'), createdAt: bound('createdAt') },
      })
      .prepare(),
  );
  const purgeIdempotency = prepared(() => db.delete(idempotencyKeys).where(sql`${idempotencyKeys.createdAt} < ${p('before')}`).prepare());

  const insertMessage = prepared(() =>
    db
      .insert(messages)
      .values({ id: p('id'), accountId: p('accountId'), message: p('message'), status: 'queued', createdAt: p('createdAt') })
      .returning()
      .prepare(),
  );
  const messageById = prepared(() =>
    db.select().from(messages).where(and(eq(messages.id, p('id')), eq(messages.accountId, p('accountId')))).prepare(),
  );
  const queuedMessages = prepared(() =>
    db.select({ n: count() }).from(messages).where(and(eq(messages.accountId, p('accountId')), eq(messages.status, 'queued'))).prepare(),
  );
  // One UPDATE statement: atomic under SQLite's write lock, across processes too.
  const deliverDue = prepared(() => {
    const due = db
      .select({ id: messages.id })
      .from(messages)
      .where(and(eq(messages.status, 'queued'), lte(messages.createdAt, p('createdBefore'))))
      .orderBy(asc(messages.createdAt))
      .limit(rowLimit('limit'));
    return db
      .update(messages)
      .set({ status: 'sent', sentAt: bound('sentAt') })
      .where(and(eq(messages.status, 'queued'), inArray(messages.id, due)))
      .returning({ id: messages.id })
      .prepare();
  });

  const isCustomer = (viewer: Principal) => viewer.role !== 'admin';

  return {
    insertAccount(input) {
      const row = insertAccount().get(input);
      return row ? toAccount(row) : null;
    },
    findAccountByEmail(email) {
      const row = accountByEmail().get({ email });
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },
    // The transaction's write lock (BEGIN IMMEDIATE) already excludes every other writer.
    lockAccount: (id) => accountById().get({ id }) !== undefined,

    insertApiKey: (input) => toApiKey(insertApiKey().get({ name: null, expiresAt: null, ...input })),
    findKeyOwner: (hash) => keyOwner().get({ hash }) ?? null,
    listApiKeys: (accountId, page) => apiKeyPage().all({ accountId, ...page }).map(toApiKey),
    revokeApiKey(accountId, keyId, at) {
      if (!ownedKey().get({ id: keyId, accountId })) return false;
      revokeKey().run({ id: keyId, at });
      return true;
    },
    touchApiKey(keyId, at) {
      touchKey().run({ id: keyId, at });
    },
    countActiveApiKeys: (accountId, now) => activeKeys().get({ accountId, now })?.n ?? 0,

    listCategories: (page) => categoryPage().all({ ...page }).map(toCategory),
    findCategory(id) {
      const row = categoryById().get({ id });
      return row ? toCategory(row) : null;
    },
    // The transaction's write lock (BEGIN IMMEDIATE) already excludes every other writer.
    lockCategory: (id) => categoryById().get({ id }) !== undefined,
    insertCategory(input) {
      const row = insertCategory().get(input);
      return row ? toCategory(row) : 'taken';
    },
    updateCategory(id, input) {
      try {
        const row = updateCategory().get({ id, ...input });
        return row ? toCategory(row) : null;
      } catch (error) {
        if (isUniqueViolation(error)) return 'taken';
        throw error;
      }
    },
    deleteCategory(id) {
      deleteCategory().run({ id });
    },
    petInCategory: (categoryId) => petOfCategory().get({ id: categoryId })?.id ?? null,

    listPets(filter, page) {
      const values: Record<string, unknown> = { after: page.after, limit: page.limit, status: filter.status, categoryId: filter.categoryId };
      const ids = filter.ids ?? [];
      for (let i = 0; i < ids.length; i++) values[`id${i}`] = ids[i];
      return petPage(filter.status !== undefined, filter.categoryId !== undefined, filter.ids?.length ?? -1)
        .all(values)
        .map(toPet);
    },
    findPet(id) {
      const row = petById().get({ id });
      return row ? toPet(row) : null;
    },
    insertPet(input) {
      const row = insertPet().get(input);
      insertStock().run({ petId: row.id });
      return toPet(row);
    },
    updatePet(id, input) {
      const row = updatePet().get({ id, ...input });
      return row ? toPet(row) : null;
    },
    setPetStatus(id, status) {
      setPetStatus().run({ id, status });
    },
    deletePet(id) {
      deleteStock().run({ id });
      deletePet().run({ id });
    },

    listInventory: (filter, page) => inventoryPage(filter.status !== undefined).all({ ...page, status: filter.status }),
    findInventory: (petId) => inventoryById().get({ id: petId }) ?? null,
    lockStock(petId) {
      const row = inventoryById().get({ id: petId });
      return row ? { quantity: row.quantity, status: row.status } : null;
    },
    setStock(petId, quantity) {
      setStock().run({ petId, quantity });
    },

    listOrders: (viewer, filter, page) =>
      orderPage(isCustomer(viewer), filter.complete !== undefined)
        .all({ ...page, accountId: viewer.accountId, complete: filter.complete === undefined ? undefined : Number(filter.complete) })
        .map(toOrder),
    findOrder(viewer, id) {
      const row = orderById(isCustomer(viewer)).get({ id, accountId: viewer.accountId });
      return row ? toOrder(row) : null;
    },
    insertOrder(input) {
      const { lastInsertRowid } = insertOrder().run(input);
      return toOrder({ ...input, id: Number(lastInsertRowid), complete: false, shipDate: null });
    },
    completeOrder: (id, shipDate) => toOrder(completeOrder().get({ id, shipDate })),
    deleteOrder(id) {
      deleteOrder().run({ id });
    },
    openOrderOfPet: (petId) => openOrderOfPet().get({ petId })?.id ?? null,

    lockIdempotencyKey() {},
    findIdempotency(accountId, key, notBefore): StoredIdempotency | null {
      const row = idempotencyRecord().get({ accountId, key });
      if (!row || row.createdAt < notBefore) return null;
      return { requestHash: row.requestHash, outcome: row.outcome };
    },
    saveIdempotency(accountId, key, record, createdAt) {
      saveIdempotency().run({ accountId, key, ...record, createdAt });
    },
    purgeIdempotency: (before) => purgeIdempotency().run({ before }).changes,

    insertMessage: (input) => toMessage(insertMessage().get(input)),
    findMessage(accountId, id) {
      const row = messageById().get({ id, accountId });
      return row ? toMessage(row) : null;
    },
    countQueuedMessages: (accountId) => queuedMessages().get({ accountId })?.n ?? 0,
    deliverDue: (createdBefore, sentAt, limit) => deliverDue().all({ createdBefore, sentAt, limit }).map((r) => r.id),
  };
}

/** The operations that only read: outside a transaction they go to the read connection. */
const readOnly = [
  'findAccountByEmail',
  'findKeyOwner',
  'listApiKeys',
  'listCategories',
  'findCategory',
  'petInCategory',
  'listPets',
  'findPet',
  'listInventory',
  'findInventory',
  'listOrders',
  'findOrder',
  'openOrderOfPet',
  'findIdempotency',
  'findMessage',
  'countActiveApiKeys',
  'countQueuedMessages',
] as const satisfies ReadonlyArray<keyof Queries>;

/** A second connection to the file that only reads: it sees committed rows, and never waits for a write. */
function openReader(sqlite: SqliteDatabase): Db {
  const reader = drizzle(new Database(sqlite.name), { schema });
  reader.$client.pragma('busy_timeout = 5000');
  reader.$client.pragma('query_only = ON');
  return reader;
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

export interface SqliteStorageOptions {
  /** The file's checkpoint thread (db/checkpointer.ts), stopped by close(). */
  checkpointer?: Checkpointer | null;
  /** Writes began to fail for want of space or on I/O errors (an error), or succeed again (null). */
  onWriteFailure?: (error: Error | null) => void;
}

export function createSqliteStorage(db: Db, { checkpointer = null, onWriteFailure = () => {} }: SqliteStorageOptions = {}): Storage {
  const sqlite: SqliteDatabase = db.$client;
  const mutex = new Mutex();
  const queries = createQueries(db);
  const begin = sqlite.prepare('BEGIN IMMEDIATE');
  const commit = sqlite.prepare('COMMIT');
  const rollback = sqlite.prepare('ROLLBACK');
  const savepoint = sqlite.prepare('SAVEPOINT work');
  const rollbackToSavepoint = sqlite.prepare('ROLLBACK TO work');
  const releaseSavepoint = sqlite.prepare('RELEASE work');

  // A file gets the read connection and group commit (see the top of this file).
  const reader = sqlite.memory || sqlite.readonly ? null : openReader(sqlite);
  const readQueries = reader ? createQueries(reader) : null;
  let open: Batch | null = null;

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
  };
  // The transactions started in this turn of the event loop wait for its end. Run there
  // one after another, SQLite's code and pages stay in the CPU's caches from one to the
  // next; run as their requests arrived, between everything else those requests do, each
  // cost several times as much (README "Performance").
  let turnEnd: Promise<void> | null = null;
  const endOfTurn = () =>
    (turnEnd ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        turnEnd = null;
        resolve();
      }),
    ));
  // At most sixteen transactions per COMMIT, so that one COMMIT that fails fails no more.
  const maxBatch = 16;

  // The last refusal for want of space or on an I/O error, until a readiness check finds room.
  let writeFailure: { error: StorageUnavailable; at: number } | null = null;
  const refusal = (cause: unknown) => {
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
    if (reader) await endOfTurn();
    await mutex.acquire();
    if (!reader) {
      try {
        begin.run();
        try {
          const result = await work(queries);
          commit.run();
          return result;
        } catch (error) {
          rollbackQuietly();
          throw refusal(error);
        }
      } finally {
        mutex.release();
      }
    }
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

  // A write outside a transaction is a transaction of its own (on a file it joins the
  // turn's batch) and answers after its COMMIT.
  const write =
    <A extends unknown[], R>(op: (...args: A) => R) =>
    (...args: A): Promise<R> =>
      transaction(async () => op(...args));
  // A read outside a transaction goes to the read connection on a file; in memory it runs
  // at once unless a transaction is open, and then waits for it to end.
  const read =
    <A extends unknown[], R>(op: (...args: A) => R) =>
    (...args: A): R | Promise<R> => {
      if (!mutex.held) return op(...args);
      return mutex.acquire().then(() => {
        try {
          return op(...args);
        } finally {
          mutex.release();
        }
      });
    };
  const reads = new Set<string>(readOnly);
  const outer: Record<string, unknown> = {};
  for (const [name, op] of Object.entries(queries) as Array<[string, (...args: unknown[]) => unknown]>) {
    if (!reads.has(name)) outer[name] = write(op);
    // createQueries' operations use no `this`: the reader's are handed on as they are.
    else outer[name] = readQueries ? (readQueries as unknown as Record<string, unknown>)[name] : read(op);
  }
  const guarded = outer as unknown as Queries;

  const p = sql.placeholder;
  const hit = prepared(() =>
    db
      .insert(rateLimits)
      .values({ key: p('key'), hits: 1, resetAt: p('resetAt') })
      .onConflictDoUpdate({
        target: rateLimits.key,
        set: {
          hits: sql`case when ${rateLimits.resetAt} <= ${p('now')} then 1 else ${rateLimits.hits} + 1 end`,
          resetAt: sql`case when ${rateLimits.resetAt} <= ${p('now')} then ${p('resetAt')} else ${rateLimits.resetAt} end`,
        },
      })
      .returning({ hits: rateLimits.hits, resetAt: rateLimits.resetAt })
      .prepare(),
  );
  const undoHit = prepared(() =>
    db.update(rateLimits).set({ hits: sql`max(${rateLimits.hits} - 1, 0)` }).where(eq(rateLimits.key, p('key'))).prepare(),
  );
  const resetHits = prepared(() => db.delete(rateLimits).where(eq(rateLimits.key, p('key'))).prepare());
  const purgeHits = prepared(() => db.delete(rateLimits).where(lte(rateLimits.resetAt, p('now'))).prepare());
  const ping = (reader?.$client ?? sqlite).prepare('select 1');
  const insertWriteCheck = prepared(() => db.insert(writeChecks).values({ room: p('room') }).prepare());
  const deleteWriteChecks = prepared(() => db.delete(writeChecks).prepare());

  return {
    ...guarded,
    engine: 'sqlite',
    transaction,
    // One upsert statement: atomic across the processes sharing the file.
    hitRateLimit: write((key: string, windowMs: number, now: number) => hit().get({ key, now, resetAt: now + windowMs })),
    undoRateLimitHit: write((key: string) => {
      undoHit().run({ key });
    }),
    resetRateLimit: write((key: string) => {
      resetHits().run({ key });
    }),
    purgeRateLimits: write((now: number) => purgeHits().run({ now }).changes),
    // Reads answer; and after a refused write, not ready for the Retry-After it gave, then
    // until a write as large as a request's succeeds. Small writes may still fit meanwhile
    // (an UPDATE of no rows always does), so only this check ends the failure.
    async ping() {
      if (reader) ping.get();
      else await read(() => ping.get())();
      if (!writeFailure) return;
      if (Date.now() - writeFailure.at < retryAfterSeconds * 1000) throw writeFailure.error;
      await transaction(async () => {
        insertWriteCheck().run({ room: writeCheckRoom });
        deleteWriteChecks().run();
      });
      writeFailure = null;
      onWriteFailure(null);
    },
    async close() {
      await mutex.acquire();
      // A batch its last transaction left open, since this close waited for the lock.
      commitOpen();
      reader?.$client.close();
      // Stopped first, so that this connection is the file's last: closing it checkpoints
      // what the log still holds and removes the log.
      await checkpointer?.stop();
      sqlite.close();
    },
  };
}
