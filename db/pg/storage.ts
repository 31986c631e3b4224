// The storage port (domain/storage.ts) on PostgreSQL through node-postgres and drizzle's
// PostgreSQL dialect. Transactions are READ COMMITTED with row locks: lockStock and
// lockCategory are SELECT ... FOR UPDATE, so a rule's checks hold until it commits, on
// any number of instances. Uniqueness (emails, category name keys, idempotency keys) is
// the unique indexes' job; a violation comes back as 'taken' or null, never a 500.
import { and, asc, count, eq, gt, inArray, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { join } from 'node:path';
import type { Pool, PoolClient } from 'pg';
import type { Queries, Storage } from '../../domain/storage';
import type { Principal } from '../../domain/types';
import { asUnavailable, createAvailability, isConnectionError, openPool } from './connection';
import { toAccount, toApiKey, toCategory, toMessage, toOrder, toPet } from '../rows';
import * as schema from './schema';
import { accounts, apiKeys, categories, idempotencyKeys, inventory, messages, orders, pets, rateLimits } from './schema';
import { guardTransactions } from '../transaction-guard';

export type PgDb = NodePgDatabase<typeof schema> & { $client: Pool };

const pgMigrationsFolder = join(__dirname, 'migrations');

const isUniqueViolation = (error: unknown): boolean => {
  const e = error as { code?: string; cause?: unknown } | null;
  return typeof e === 'object' && e !== null && (e.code === '23505' || isUniqueViolation(e.cause));
};

const visibleTo = (viewer: Principal): SQL[] => (viewer.role === 'admin' ? [] : [eq(orders.accountId, viewer.accountId)]);

const inventoryColumns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

type Executor = Omit<PgDb, '$client'>;

function createQueries(db: Executor): Queries {
  const first = <T>(rows: T[]): T | null => rows[0] ?? null;
  return {
    async insertAccount(input) {
      const [row] = await db.insert(accounts).values(input).onConflictDoNothing({ target: accounts.email }).returning();
      return row ? toAccount(row) : null;
    },
    async findAccountByEmail(email) {
      const row = first(await db.select().from(accounts).where(eq(accounts.email, email)));
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },
    lockAccount: async (id) => (await db.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, id)).for('update')).length > 0,

    insertApiKey: async (input) => toApiKey((await db.insert(apiKeys).values(input).returning())[0]!),
    findKeyOwner: async (hash) =>
      first(
        await db
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
          .where(eq(apiKeys.keyHash, hash)),
      ),
    listApiKeys: async (accountId, page) =>
      (
        await db
          .select()
          .from(apiKeys)
          .where(and(eq(apiKeys.accountId, accountId), gt(apiKeys.id, page.after)))
          .orderBy(asc(apiKeys.id))
          .limit(page.limit)
      ).map(toApiKey),
    async revokeApiKey(accountId, keyId, at) {
      const owned = first(
        await db
          .select({ id: apiKeys.id })
          .from(apiKeys)
          .where(and(eq(apiKeys.id, keyId), eq(apiKeys.accountId, accountId))),
      );
      if (!owned) return false;
      await db
        .update(apiKeys)
        .set({ revokedAt: at })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)));
      return true;
    },
    async touchApiKey(keyId, at) {
      await db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, keyId));
    },
    countActiveApiKeys: async (accountId, now) =>
      first(
        await db
          .select({ n: count() })
          .from(apiKeys)
          .where(
            and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt), or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, now))),
          ),
      )?.n ?? 0,

    listCategories: async (page) =>
      (await db.select().from(categories).where(gt(categories.id, page.after)).orderBy(asc(categories.id)).limit(page.limit)).map(
        toCategory,
      ),
    async findCategory(id) {
      const row = first(await db.select().from(categories).where(eq(categories.id, id)));
      return row ? toCategory(row) : null;
    },
    lockCategory: async (id) =>
      (await db.select({ id: categories.id }).from(categories).where(eq(categories.id, id)).for('update')).length > 0,
    async insertCategory(input) {
      const [row] = await db.insert(categories).values(input).onConflictDoNothing({ target: categories.nameKey }).returning();
      return row ? toCategory(row) : 'taken';
    },
    async updateCategory(id, input) {
      try {
        const [row] = await db.update(categories).set(input).where(eq(categories.id, id)).returning();
        return row ? toCategory(row) : null;
      } catch (error) {
        if (isUniqueViolation(error)) return 'taken';
        throw error;
      }
    },
    async deleteCategory(id) {
      await db.delete(categories).where(eq(categories.id, id));
    },
    petInCategory: async (categoryId) =>
      first(await db.select({ id: pets.id }).from(pets).where(eq(pets.categoryId, categoryId)).limit(1))?.id ?? null,

    async listPets(filter, page) {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      if (filter.categoryId !== undefined) where.push(eq(pets.categoryId, filter.categoryId));
      if (filter.ids !== undefined) where.push(inArray(pets.id, filter.ids));
      return (
        await db
          .select()
          .from(pets)
          .where(and(...where))
          .orderBy(asc(pets.id))
          .limit(page.limit)
      ).map(toPet);
    },
    async findPet(id) {
      const row = first(await db.select().from(pets).where(eq(pets.id, id)));
      return row ? toPet(row) : null;
    },
    async insertPet(input) {
      const [row] = await db.insert(pets).values(input).returning();
      await db.insert(inventory).values({ petId: row!.id, quantity: 0 });
      return toPet(row!);
    },
    async updatePet(id, input) {
      const [row] = await db.update(pets).set(input).where(eq(pets.id, id)).returning();
      return row ? toPet(row) : null;
    },
    async setPetStatus(id, status) {
      await db.update(pets).set({ status }).where(eq(pets.id, id));
    },
    async deletePet(id) {
      await db.delete(inventory).where(eq(inventory.petId, id));
      await db.delete(pets).where(eq(pets.id, id));
    },

    async listInventory(filter, page) {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      return db
        .select(inventoryColumns)
        .from(pets)
        .innerJoin(inventory, eq(inventory.petId, pets.id))
        .where(and(...where))
        .orderBy(asc(pets.id))
        .limit(page.limit);
    },
    findInventory: async (petId) =>
      first(await db.select(inventoryColumns).from(pets).innerJoin(inventory, eq(inventory.petId, pets.id)).where(eq(pets.id, petId))),
    // The stock row and the pet row are both locked: status changes are decided under them.
    lockStock: async (petId) =>
      first(
        await db
          .select({ quantity: inventory.quantity, status: pets.status })
          .from(pets)
          .innerJoin(inventory, eq(inventory.petId, pets.id))
          .where(eq(pets.id, petId))
          .for('update'),
      ),
    async setStock(petId, quantity) {
      await db.update(inventory).set({ quantity }).where(eq(inventory.petId, petId));
    },

    async listOrders(viewer, filter, page) {
      const where = [...visibleTo(viewer), gt(orders.id, page.after)];
      if (filter.complete !== undefined) where.push(eq(orders.complete, filter.complete));
      return (
        await db
          .select()
          .from(orders)
          .where(and(...where))
          .orderBy(asc(orders.id))
          .limit(page.limit)
      ).map(toOrder);
    },
    async findOrder(viewer, id) {
      const row = first(
        await db
          .select()
          .from(orders)
          .where(and(eq(orders.id, id), ...visibleTo(viewer))),
      );
      return row ? toOrder(row) : null;
    },
    insertOrder: async (input) =>
      toOrder(
        (
          await db
            .insert(orders)
            .values({ ...input, complete: false })
            .returning()
        )[0]!,
      ),
    completeOrder: async (id, shipDate) =>
      toOrder((await db.update(orders).set({ complete: true, shipDate }).where(eq(orders.id, id)).returning())[0]!),
    async deleteOrder(id) {
      await db.delete(orders).where(eq(orders.id, id));
    },
    openOrderOfPet: async (petId) =>
      first(
        await db
          .select({ id: orders.id })
          .from(orders)
          .where(and(eq(orders.petId, petId), eq(orders.complete, false)))
          .limit(1),
      )?.id ?? null,

    async lockIdempotencyKey(accountId, key) {
      // Two requests with one key on two instances: the second waits here, then replays.
      // One 64-bit lock id from both parts (account ids may exceed the int4 form's range).
      await db.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`${accountId}:${key}`}, 0))`);
    },
    async findIdempotency(accountId, key, notBefore) {
      const row = first(
        await db
          .select({ requestHash: idempotencyKeys.requestHash, outcome: idempotencyKeys.outcome, createdAt: idempotencyKeys.createdAt })
          .from(idempotencyKeys)
          .where(and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key))),
      );
      if (!row || row.createdAt < notBefore) return null;
      return { requestHash: row.requestHash, outcome: row.outcome };
    },
    async saveIdempotency(accountId, key, record, createdAt) {
      // An expired record not purged yet gives way to the new one.
      await db
        .insert(idempotencyKeys)
        .values({ accountId, key, ...record, createdAt })
        .onConflictDoUpdate({ target: [idempotencyKeys.accountId, idempotencyKeys.key], set: { ...record, createdAt } });
    },
    purgeIdempotency: async (before) =>
      (await db.delete(idempotencyKeys).where(sql`${idempotencyKeys.createdAt} < ${before}`)).rowCount ?? 0,

    insertMessage: async (input) =>
      toMessage(
        (
          await db
            .insert(messages)
            .values({ ...input, status: 'queued' })
            .returning()
        )[0]!,
      ),
    async findMessage(accountId, id) {
      const row = first(
        await db
          .select()
          .from(messages)
          .where(and(eq(messages.id, id), eq(messages.accountId, accountId))),
      );
      return row ? toMessage(row) : null;
    },
    countQueuedMessages: async (accountId) =>
      first(
        await db
          .select({ n: count() })
          .from(messages)
          .where(and(eq(messages.accountId, accountId), eq(messages.status, 'queued'))),
      )?.n ?? 0,
    async deliverDue(createdBefore, sentAt, limit) {
      // SKIP LOCKED: workers on other instances take other rows instead of waiting, and a
      // row is claimed by exactly one of them.
      const due = db
        .select({ id: messages.id })
        .from(messages)
        .where(and(eq(messages.status, 'queued'), lte(messages.createdAt, createdBefore)))
        .orderBy(asc(messages.createdAt))
        .limit(limit)
        .for('update', { skipLocked: true });
      return db
        .update(messages)
        .set({ status: 'sent', sentAt })
        .where(and(eq(messages.status, 'queued'), inArray(messages.id, due)))
        .returning({ id: messages.id, createdAt: messages.createdAt });
    },
  };
}

export function openPgDatabase(url: string, poolSize = 10): PgDb {
  return drizzle({ client: openPool(url, poolSize), schema });
}

/**
 * Applies db/pg/migrations under an advisory lock, so instances starting together apply
 * them once: the others wait, then find nothing left to do. Returns whether the database
 * was brand new (no migration applied before), for the demo catalogue.
 */
export async function migratePg(db: PgDb, folder = pgMigrationsFolder): Promise<{ brandNew: boolean }> {
  try {
    return await migrateLocked(db, folder);
  } catch (error) {
    // The server not answering yet is worth waiting for (server/startup.ts); anything else is not.
    throw asUnavailable(error);
  }
}

async function migrateLocked(db: PgDb, folder: string): Promise<{ brandNew: boolean }> {
  const client = await db.$client.connect();
  try {
    // An arbitrary constant naming "petstore migrations" among advisory locks.
    await client.query('select pg_advisory_lock(72707301)');
    try {
      const applied = await client.query<{ n: number }>(
        "select count(*)::int as n from information_schema.tables where table_schema = 'drizzle' and table_name = '__drizzle_migrations'",
      );
      let brandNew = applied.rows[0]?.n === 0;
      if (!brandNew) {
        const count = await client.query<{ n: number }>('select count(*)::int as n from drizzle.__drizzle_migrations');
        brandNew = count.rows[0]?.n === 0;
      }
      await migrate(drizzle(client, { schema }), { migrationsFolder: folder });
      return { brandNew };
    } finally {
      await client.query('select pg_advisory_unlock(72707301)');
    }
  } finally {
    client.release();
  }
}

export interface PgStorageOptions {
  /** PostgreSQL became unreachable (the error) or answers again (null); once per change. */
  onAvailability?: (error: Error | null) => void;
}

export function createPgStorage(db: PgDb, { onAvailability = () => {} }: PgStorageOptions = {}): Storage {
  const pool = db.$client;
  const availability = createAvailability(pool.options.connectionString!, onAvailability);
  pool.on('error', availability.suspect);
  pool.on('connect', (client) => client.on('error', availability.suspect));
  // One drizzle instance per pooled connection, made on its first transaction.
  const sessions = new WeakMap<PoolClient, PgDb>();
  const storage = createUnguardedStorage(db, async (work) => {
    // Checked out here rather than by drizzle's pool transaction, which keeps a connection
    // whose BEGIN failed out of the pool for good; a connection that failed is discarded.
    const client = await pool.connect();
    let failure: unknown;
    try {
      let session = sessions.get(client);
      if (!session) sessions.set(client, (session = drizzle({ client: client as unknown as Pool, schema })));
      return await session.transaction((tx) => work(createQueries(tx)));
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      client.release(isConnectionError(failure) ? (failure as Error) : undefined);
    }
  });
  const guarded = Object.fromEntries(
    Object.entries(storage).map(([name, value]) =>
      typeof value === 'function' && name !== 'close'
        ? [name, (...args: unknown[]) => availability.guard(async () => (value as (...a: unknown[]) => unknown)(...args))]
        : [name, value],
    ),
  ) as unknown as Storage;
  return guardTransactions({
    ...guarded,
    async close() {
      availability.stop();
      await storage.close();
    },
  });
}

function createUnguardedStorage(db: PgDb, transaction: Storage['transaction']): Storage {
  const queries = createQueries(db);
  return {
    ...queries,
    engine: 'postgres',
    pool: db.$client,
    transaction,
    async hitRateLimit(key, windowMs, now) {
      // One upsert: concurrent hits from any instance serialise on the row.
      const [row] = await db
        .insert(rateLimits)
        .values({ key, hits: 1, resetAt: now + windowMs })
        .onConflictDoUpdate({
          target: rateLimits.key,
          set: {
            hits: sql`case when ${rateLimits.resetAt} <= ${now}::bigint then 1 else ${rateLimits.hits} + 1 end`,
            resetAt: sql`case when ${rateLimits.resetAt} <= ${now}::bigint then ${now + windowMs}::bigint else ${rateLimits.resetAt} end`,
          },
        })
        .returning({ hits: rateLimits.hits, resetAt: rateLimits.resetAt });
      return row!;
    },
    async undoRateLimitHit(key) {
      await db
        .update(rateLimits)
        .set({ hits: sql`greatest(${rateLimits.hits} - 1, 0)` })
        .where(eq(rateLimits.key, key));
    },
    async resetRateLimit(key) {
      await db.delete(rateLimits).where(eq(rateLimits.key, key));
    },
    purgeRateLimits: async (now) => (await db.delete(rateLimits).where(lte(rateLimits.resetAt, now))).rowCount ?? 0,
    async ping() {
      await db.execute(sql`select 1`);
    },
    close: () => db.$client.end(),
  };
}
