// The storage port (domain/storage.ts) on better-sqlite3: every operation is synchronous
// and returns plain data; statements without dynamic filters are prepared once here.
//
// One connection serves every request of the process, and the domain awaits between the
// statements of a rule. So `transaction(work)` runs BEGIN IMMEDIATE ... COMMIT by hand
// under an async mutex, and every operation outside a transaction waits while one is
// open: no other request's statement lands inside an open transaction, and nothing reads
// rows not yet committed. Uncontended, an operation runs at once with no promise.
import { and, asc, eq, gt, inArray, isNull, lte, sql, type SQL } from 'drizzle-orm';
import type { Database as SqliteDatabase } from 'better-sqlite3';
import type { Queries, Storage, StoredIdempotency } from '../domain/storage';
import type { ApiKey, Category, Message, Order, Pet, Principal } from '../domain/types';
import type { Db } from './client';
import { accounts, apiKeys, categories, idempotencyKeys, inventory, messages, orders, pets, rateLimits } from './schema';

const toCategory = (row: typeof categories.$inferSelect): Category => ({
  id: row.id,
  name: row.name,
  ...(row.description !== null && { description: row.description }),
});

const toPet = (row: typeof pets.$inferSelect): Pet => ({ id: row.id, name: row.name, categoryId: row.categoryId, status: row.status });

const toOrder = (row: typeof orders.$inferSelect): Order => ({
  id: row.id,
  petId: row.petId,
  quantity: row.quantity,
  complete: row.complete,
  ...(row.shipDate !== null && { shipDate: row.shipDate }),
});

const toApiKey = (row: typeof apiKeys.$inferSelect): ApiKey => ({
  id: row.id,
  ...(row.name !== null && { name: row.name }),
  prefix: row.prefix,
  lastFour: row.lastFour,
  createdAt: row.createdAt,
  ...(row.lastUsedAt !== null && { lastUsedAt: row.lastUsedAt }),
  ...(row.expiresAt !== null && { expiresAt: row.expiresAt }),
  ...(row.revokedAt !== null && { revokedAt: row.revokedAt }),
});

const toMessage = (row: typeof messages.$inferSelect): Message => ({
  id: row.id,
  message: row.message,
  status: row.status,
  createdAt: row.createdAt,
  ...(row.sentAt !== null && { sentAt: row.sentAt }),
});

const toAccount = (row: typeof accounts.$inferSelect) => ({ id: row.id, email: row.email, role: row.role, createdAt: row.createdAt });

const isUniqueViolation = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE';

const visibleTo = (viewer: Principal): SQL[] => (viewer.role === 'admin' ? [] : [eq(orders.accountId, viewer.accountId)]);

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

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

function createQueries(db: Db): Queries {
  const p = sql.placeholder;
  const findPet = db.select().from(pets).where(eq(pets.id, p('id'))).prepare();
  const findCategory = db.select().from(categories).where(eq(categories.id, p('id'))).prepare();
  const findInventory = db.select(inventoryColumns).from(pets).innerJoin(inventory, eq(inventory.petId, pets.id)).where(eq(pets.id, p('id'))).prepare();
  const findKeyOwner = db
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
    .prepare();
  const setStock = db.update(inventory).set({ quantity: sql`${p('quantity')}` }).where(eq(inventory.petId, p('petId'))).prepare();
  const setPetStatus = db.update(pets).set({ status: sql`${p('status')}` }).where(eq(pets.id, p('id'))).prepare();
  const openOrderOfPet = db
    .select({ id: orders.id })
    .from(orders)
    .where(and(eq(orders.petId, p('petId')), eq(orders.complete, false)))
    .limit(1)
    .prepare();
  const insertOrder = db
    .insert(orders)
    .values({ accountId: p('accountId'), petId: p('petId'), quantity: p('quantity'), complete: false, createdAt: p('createdAt') })
    .returning()
    .prepare();
  const findMessage = db.select().from(messages).where(and(eq(messages.id, p('id')), eq(messages.accountId, p('accountId')))).prepare();

  return {
    insertAccount(input) {
      const row = db.insert(accounts).values(input).onConflictDoNothing({ target: accounts.email }).returning().get();
      return row ? toAccount(row) : null;
    },
    findAccountByEmail(email) {
      const row = db.select().from(accounts).where(eq(accounts.email, email)).get();
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },

    insertApiKey: (input) => toApiKey(db.insert(apiKeys).values(input).returning().get()),
    findKeyOwner: (hash) => findKeyOwner.get({ hash }) ?? null,
    listApiKeys: (accountId, page) =>
      db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.accountId, accountId), gt(apiKeys.id, page.after)))
        .orderBy(asc(apiKeys.id))
        .limit(page.limit)
        .all()
        .map(toApiKey),
    revokeApiKey(accountId, keyId, at) {
      const owned = db.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, keyId), eq(apiKeys.accountId, accountId))).get();
      if (!owned) return false;
      db.update(apiKeys).set({ revokedAt: at }).where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt))).run();
      return true;
    },
    touchApiKey(keyId, at) {
      db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, keyId)).run();
    },

    listCategories: (page) =>
      db.select().from(categories).where(gt(categories.id, page.after)).orderBy(asc(categories.id)).limit(page.limit).all().map(toCategory),
    findCategory(id) {
      const row = findCategory.get({ id });
      return row ? toCategory(row) : null;
    },
    // The transaction's write lock (BEGIN IMMEDIATE) already excludes every other writer.
    lockCategory: (id) => findCategory.get({ id }) !== undefined,
    insertCategory(input) {
      const row = db.insert(categories).values(input).onConflictDoNothing({ target: categories.nameKey }).returning().get();
      return row ? toCategory(row) : 'taken';
    },
    updateCategory(id, input) {
      try {
        const row = db.update(categories).set(input).where(eq(categories.id, id)).returning().get();
        return row ? toCategory(row) : null;
      } catch (error) {
        if (isUniqueViolation(error)) return 'taken';
        throw error;
      }
    },
    deleteCategory(id) {
      db.delete(categories).where(eq(categories.id, id)).run();
    },
    petInCategory: (categoryId) => db.select({ id: pets.id }).from(pets).where(eq(pets.categoryId, categoryId)).limit(1).get()?.id ?? null,

    listPets(filter, page) {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      if (filter.categoryId !== undefined) where.push(eq(pets.categoryId, filter.categoryId));
      if (filter.ids !== undefined) where.push(inArray(pets.id, filter.ids));
      return db.select().from(pets).where(and(...where)).orderBy(asc(pets.id)).limit(page.limit).all().map(toPet);
    },
    findPet(id) {
      const row = findPet.get({ id });
      return row ? toPet(row) : null;
    },
    insertPet(input) {
      const row = db.insert(pets).values(input).returning().get();
      db.insert(inventory).values({ petId: row.id, quantity: 0 }).run();
      return toPet(row);
    },
    updatePet(id, input) {
      const row = db.update(pets).set(input).where(eq(pets.id, id)).returning().get();
      return row ? toPet(row) : null;
    },
    setPetStatus(id, status) {
      setPetStatus.run({ id, status });
    },
    deletePet(id) {
      db.delete(inventory).where(eq(inventory.petId, id)).run();
      db.delete(pets).where(eq(pets.id, id)).run();
    },

    listInventory(filter, page) {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      return db
        .select(inventoryColumns)
        .from(pets)
        .innerJoin(inventory, eq(inventory.petId, pets.id))
        .where(and(...where))
        .orderBy(asc(pets.id))
        .limit(page.limit)
        .all();
    },
    findInventory: (petId) => findInventory.get({ id: petId }) ?? null,
    lockStock(petId) {
      const row = findInventory.get({ id: petId });
      return row ? { quantity: row.quantity, status: row.status } : null;
    },
    setStock(petId, quantity) {
      setStock.run({ petId, quantity });
    },

    listOrders(viewer, filter, page) {
      const where = [...visibleTo(viewer), gt(orders.id, page.after)];
      if (filter.complete !== undefined) where.push(eq(orders.complete, filter.complete));
      return db.select().from(orders).where(and(...where)).orderBy(asc(orders.id)).limit(page.limit).all().map(toOrder);
    },
    findOrder(viewer, id) {
      const row = db.select().from(orders).where(and(eq(orders.id, id), ...visibleTo(viewer))).get();
      return row ? toOrder(row) : null;
    },
    insertOrder: (input) => toOrder(insertOrder.get(input)!),
    completeOrder: (id, shipDate) => toOrder(db.update(orders).set({ complete: true, shipDate }).where(eq(orders.id, id)).returning().get()!),
    deleteOrder(id) {
      db.delete(orders).where(eq(orders.id, id)).run();
    },
    openOrderOfPet: (petId) => openOrderOfPet.get({ petId })?.id ?? null,

    lockIdempotencyKey() {},
    findIdempotency(accountId, key, notBefore): StoredIdempotency | null {
      const row = db
        .select()
        .from(idempotencyKeys)
        .where(and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key)))
        .get();
      if (!row || row.createdAt < notBefore) return null;
      return { requestHash: row.requestHash, outcome: outcomeOf(row.responseStatus, row.responseBody) };
    },
    saveIdempotency(accountId, key, record, createdAt) {
      // An expired record not purged yet gives way to the new one.
      db.insert(idempotencyKeys)
        .values({ accountId, key, requestHash: record.requestHash, responseStatus: 0, responseBody: record.outcome, createdAt })
        .onConflictDoUpdate({
          target: [idempotencyKeys.accountId, idempotencyKeys.key],
          set: { requestHash: record.requestHash, responseStatus: 0, responseBody: record.outcome, createdAt },
        })
        .run();
    },
    purgeIdempotency: (before) => db.delete(idempotencyKeys).where(sql`${idempotencyKeys.createdAt} < ${before}`).run().changes,

    insertMessage: (input) => toMessage(db.insert(messages).values({ ...input, status: 'queued' }).returning().get()),
    findMessage(accountId, id) {
      const row = findMessage.get({ id, accountId });
      return row ? toMessage(row) : null;
    },
    deliverDue(createdBefore, sentAt, limit) {
      const due = db
        .select({ id: messages.id })
        .from(messages)
        .where(and(eq(messages.status, 'queued'), lte(messages.createdAt, createdBefore)))
        .orderBy(asc(messages.createdAt))
        .limit(limit);
      // One UPDATE statement: atomic under SQLite's write lock, across processes too.
      return db
        .update(messages)
        .set({ status: 'sent', sentAt })
        .where(and(eq(messages.status, 'queued'), inArray(messages.id, due)))
        .returning({ id: messages.id })
        .all()
        .map((r) => r.id);
    },
  };
}

/**
 * Records written before the domain layer (response_status 201/409/422) hold an HTTP
 * response; response_status 0 marks a domain outcome. Both read as an outcome.
 */
function outcomeOf(status: number, body: string): string {
  if (status === 0) return body;
  const parsed = JSON.parse(body) as { code?: string; message?: string };
  return JSON.stringify(status === 201 ? { ok: true, value: parsed } : { ok: false, error: { code: parsed.code, message: parsed.message } });
}

export function createSqliteStorage(db: Db): Storage {
  const sqlite: SqliteDatabase = db.$client;
  const mutex = new Mutex();
  const queries = createQueries(db);
  const begin = sqlite.prepare('BEGIN IMMEDIATE');
  const commit = sqlite.prepare('COMMIT');
  const rollback = sqlite.prepare('ROLLBACK');

  // Outside a transaction, an operation runs at once unless one is open; then it queues.
  const guard =
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
  const guarded = Object.fromEntries(
    Object.entries(queries).map(([name, op]) => [name, guard(op as (...args: unknown[]) => unknown)]),
  ) as unknown as Queries;

  const hit = db
    .insert(rateLimits)
    .values({ key: sql.placeholder('key'), hits: 1, resetAt: sql.placeholder('resetAt') })
    .onConflictDoUpdate({
      target: rateLimits.key,
      set: {
        hits: sql`case when ${rateLimits.resetAt} <= ${sql.placeholder('now')} then 1 else ${rateLimits.hits} + 1 end`,
        resetAt: sql`case when ${rateLimits.resetAt} <= ${sql.placeholder('now')} then ${sql.placeholder('resetAt')} else ${rateLimits.resetAt} end`,
      },
    })
    .returning({ hits: rateLimits.hits, resetAt: rateLimits.resetAt })
    .prepare();

  return {
    ...guarded,
    engine: 'sqlite',
    async transaction(work) {
      await mutex.acquire();
      try {
        begin.run();
        try {
          const result = await work(queries);
          commit.run();
          return result;
        } catch (error) {
          if (sqlite.inTransaction) rollback.run();
          throw error;
        }
      } finally {
        mutex.release();
      }
    },
    // One upsert statement: atomic across the processes sharing the file.
    hitRateLimit: guard((key: string, windowMs: number, now: number) => hit.get({ key, now, resetAt: now + windowMs })!),
    undoRateLimitHit: guard((key: string) => {
      db.update(rateLimits).set({ hits: sql`max(${rateLimits.hits} - 1, 0)` }).where(eq(rateLimits.key, key)).run();
    }),
    resetRateLimit: guard((key: string) => {
      db.delete(rateLimits).where(eq(rateLimits.key, key)).run();
    }),
    ping: guard(() => {
      sqlite.prepare('select 1').get();
    }),
    async close() {
      await mutex.acquire();
      sqlite.close();
    },
  };
}
