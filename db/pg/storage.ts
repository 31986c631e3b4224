// The storage port (domain/storage.ts) on PostgreSQL through node-postgres and drizzle's
// PostgreSQL dialect. Transactions are READ COMMITTED with row locks: lockStock and
// lockCategory are SELECT ... FOR UPDATE, so a rule's checks hold until it commits, on
// any number of instances. Uniqueness (emails, category name keys, idempotency keys) is
// the unique indexes' job; a violation comes back as 'taken' or null, never a 500.
import { and, asc, count, desc, eq, gt, gte, inArray, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { Client, type Pool, type PoolClient } from 'pg';
import type { Queries, Storage } from '../../domain/storage';
import type { PetStatus, Role } from '../../domain/types';
import { asUnavailable, connectionSocket, createAvailability, isConnectionError, openPool } from './connection';
import {
  createPointReads,
  createTurnStatements,
  pointReadOn,
  type PointRead,
  type PointStatement,
  type TurnStatement,
} from './point-reads';
import { toAccount, toApiKey, toCategory, toMessage, toOrder, toPet } from '../rows';
import * as schema from './schema';
import { accounts, apiKeys, categories, deprecatedCalls, idempotencyKeys, inventory, messages, orders, pets, rateLimits } from './schema';
import { pgMigrationsFolder } from '../files';
import { guardTransactions } from '../transaction-guard';

export type PgDb = NodePgDatabase<typeof schema> & { $client: Pool };

const isUniqueViolation = (error: unknown): boolean => {
  const e = error as { code?: string; cause?: unknown } | null;
  return typeof e === 'object' && e !== null && (e.code === '23505' || isUniqueViolation(e.cause));
};

const inventoryColumns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

// The pool, or one of its connections inside a transaction (its own prepared statements run on it).
type Executor = NodePgDatabase<typeof schema> & { $client: Pool | PoolClient };

/** The largest id the spec allows (2^53-1): the end of a keyset range. */
const maxId = 9007199254740991;

/**
 * A page of the rows whose `equal` columns hold the values of the placeholders named
 * beside them, after id `after`, in id order. With one such column, written as a range of
 * row values, `(a, id) > (x, after) and (a, id) <= (x, max) order by a, id`: only an
 * index on (a, id) yields that order, so the page is read from it whatever the statistics
 * say. Written as `a = x and id > after order by id`, PostgreSQL walks the primary key and
 * checks a row by row when it expects a to match often: a walk as long as the table when
 * the rows that match all lie at its end, which its statistics cannot see (`a = x` would
 * make a a constant, dropped from the order). With two or more, the planner picks by its
 * estimates: the index on all of them where it expects few matches, and on the plan test's
 * data (tests/list-plans.test.ts, with the values and as the generic plan); at a million
 * rows it may read an index on fewer of them and check the rest row by row, or read every
 * match and sort it (docs/performance.md, "Where PostgreSQL's p99 goes"). A row range
 * over all of them reads worse: PostgreSQL estimates a row comparison from its first
 * column alone.
 */
function keysetPage(equal: Array<[AnyPgColumn, string]>, id: AnyPgColumn): { where: SQL | undefined; orderBy: SQL[] } {
  const after = p('after');
  const [only, ...more] = equal;
  if (!only) return { where: gt(id, after), orderBy: [asc(id)] };
  if (more.length > 0) return { where: and(gt(id, after), ...equal.map(([c, name]) => eq(c, p(name)))), orderBy: [asc(id)] };
  const [column, name] = only;
  return {
    where: and(sql`(${column}, ${id}) > (${p(name)}, ${after})`, sql`(${column}, ${id}) <= (${p(name)}, ${maxId})`),
    orderBy: [asc(column), asc(id)],
  };
}

const p = sql.placeholder;
// A placeholder where drizzle's types take a value or SQL only (an update's set).
const bound = (name: string) => sql`${p(name)}`;

/**
 * Placing an order in one statement, so in one round trip and without a transaction around
 * it: the pet's rows locked (FOR UPDATE: under READ COMMITTED a waiter reads them again once
 * the holder commits, so what it decides on is current), the stock taken only when the
 * status is $5 and the stock holds $3, the status set to $6 when that leaves 0, and the
 * order inserted only when the stock was taken. It answers the stock and status it found
 * beside the order's id (null: refused), and no row without the pet. domain/store.ts names
 * the terms and the refusals. `once`: the same, but nothing at all when account $1's
 * Idempotency-Key $7 has a record from $8 on (`kept` true), so that it can be sent with the
 * key's lock and lookup in one round trip (domain/idempotency.ts).
 */
const placeOrderSql = (once: boolean) => `
with ${once ? 'kept as (select exists (select 1 from idempotency_keys where account_id = $1::bigint and key = $7::text and created_at >= $8::text) as kept), ' : ''}pet as (
  select i.quantity, p.status from pets p join inventory i on i.pet_id = p.id where p.id = $2::bigint${once ? ' and not (select kept from kept)' : ''} for update
), taken as (
  update inventory set quantity = pet.quantity - $3::integer from pet
  where inventory.pet_id = $2::bigint and pet.status = $5::text and pet.quantity >= $3::integer
  returning inventory.quantity as stock_left
), emptied as (
  update pets set status = $6::text where id = $2::bigint and exists (select 1 from taken where stock_left = 0)
), placed as (
  insert into orders (account_id, pet_id, quantity, complete, created_at)
  select $1::bigint, $2::bigint, $3::integer, false, $4::text from taken
  returning id
)
${once ? 'select kept.kept, pet.quantity as stock, pet.status, placed.id from kept left join pet on true left join placed on true' : 'select pet.quantity as stock, pet.status, placed.id from pet left join placed on true'}`;
const placeOrderText = placeOrderSql(false);
const placeOrderOnceText = placeOrderSql(true);

interface PlacedRow {
  /** With `once` only: the key has a record, and nothing was done. */
  kept?: boolean;
  stock: number | null;
  status: 'available' | 'pending' | 'sold' | null;
  /** A bigint, which node-postgres reads as a string; null when refused. */
  id: string | null;
}

/**
 * The two statements of an authenticated `GET /pets/{id}` (the key with its owner's role,
 * the pet), run by node-postgres directly: rows as arrays, read by position, without
 * drizzle's work per call (placeholders filled, each row mapped field by field). Each
 * reads an array of keys: outside a transaction they are point reads (db/pg/point-reads.ts),
 * one statement for the keys of every request that asked in a turn; in one, one key.
 * node-postgres reads a bigint as a string, which is how the pet's key is given.
 */
const findKeyOwner: PointStatement = {
  name: 'find_key_owner',
  text: 'select k.id, k.account_id, a.role, k.expires_at, k.revoked_at, k.last_used_at, k.key_hash from api_keys k join accounts a on a.id = k.account_id where k.key_hash = any($1::text[])',
  keyColumn: 6,
};
type KeyOwnerRow = [string, string, Role, string | null, string | null, string | null, string];
const findPet: PointStatement = {
  name: 'find_pet',
  text: 'select id, name, category_id, status from pets where id = any($1::bigint[])',
  keyColumn: 0,
};
type PetRow = [string, string, string, PetStatus];

/**
 * The queries, over `db` (the pool, or one pooled connection for a transaction), with
 * `read` running the point reads (on the pool: createPointReads; in a transaction: on
 * its connection). The ones every request or rule makes are named prepared statements,
 * built here once per `db`: each connection parses and plans them once, then only binds
 * and runs them. A list's page is one statement per combination of its filters
 * (keysetPage), so that a list request neither builds its SQL in drizzle nor has it
 * parsed again.
 */
function createQueries(db: Executor, read: PointRead, place: TurnStatement): Queries {
  const first = <T>(rows: T[]): T | null => rows[0] ?? null;
  const orderById = (visible: SQL[]) =>
    db
      .select()
      .from(orders)
      .where(and(eq(orders.id, p('id')), ...visible));
  // Up to 100 ids as one array, a named statement per combination of the other filters:
  // planned once per connection, not on each request (planning a list of 100 values cost
  // more than running it).
  const petsByIds = (status: boolean, category: boolean) =>
    db
      .select()
      .from(pets)
      .where(
        and(
          gt(pets.id, p('after')),
          sql`${pets.id} = any(${p('ids')}::bigint[])`,
          status ? eq(pets.status, p('status')) : undefined,
          category ? eq(pets.categoryId, p('categoryId')) : undefined,
        ),
      )
      .orderBy(asc(pets.id))
      .limit(p('limit'))
      .prepare(`list_pets_by_ids${status ? '_status' : ''}${category ? '_category' : ''}`);
  const petsByIdsShapes = [petsByIds(false, false), petsByIds(true, false), petsByIds(false, true), petsByIds(true, true)];
  // The lists' pages: `where` and `order by` from keysetPage, over placeholders named as
  // the filters (and `after`, `limit`).
  const petsPage = (status: boolean, category: boolean) => {
    const equal: Array<[AnyPgColumn, string]> = [];
    if (category) equal.push([pets.categoryId, 'categoryId']);
    if (status) equal.push([pets.status, 'status']);
    const { where, orderBy } = keysetPage(equal, pets.id);
    return db
      .select()
      .from(pets)
      .where(where)
      .orderBy(...orderBy)
      .limit(p('limit'))
      .prepare(`list_pets${status ? '_status' : ''}${category ? '_category' : ''}`);
  };
  const petsPages = [petsPage(false, false), petsPage(true, false), petsPage(false, true), petsPage(true, true)];
  const inventoryPage = (status: boolean) => {
    const { where, orderBy } = keysetPage(status ? [[pets.status, 'status']] : [], pets.id);
    return db
      .select(inventoryColumns)
      .from(pets)
      .innerJoin(inventory, eq(inventory.petId, pets.id))
      .where(where)
      .orderBy(...orderBy)
      .limit(p('limit'))
      .prepare(`list_inventory${status ? '_status' : ''}`);
  };
  const inventoryPages = [inventoryPage(false), inventoryPage(true)];
  const ordersPage = (account: boolean, complete: boolean) => {
    const equal: Array<[AnyPgColumn, string]> = [];
    if (account) equal.push([orders.accountId, 'accountId']);
    if (complete) equal.push([orders.complete, 'complete']);
    const { where, orderBy } = keysetPage(equal, orders.id);
    return db
      .select()
      .from(orders)
      .where(where)
      .orderBy(...orderBy)
      .limit(p('limit'))
      .prepare(`list_orders${account ? '_of_account' : ''}${complete ? '_complete' : ''}`);
  };
  const ordersPages = [ordersPage(false, false), ordersPage(true, false), ordersPage(false, true), ordersPage(true, true)];
  const apiKeysPage = (() => {
    const { where, orderBy } = keysetPage([[apiKeys.accountId, 'accountId']], apiKeys.id);
    return db
      .select()
      .from(apiKeys)
      .where(where)
      .orderBy(...orderBy)
      .limit(p('limit'))
      .prepare('list_api_keys');
  })();
  const categoriesPage = db
    .select()
    .from(categories)
    .where(gt(categories.id, p('after')))
    .orderBy(asc(categories.id))
    .limit(p('limit'))
    .prepare('list_categories');
  const prepared = {
    findAccountByEmail: db
      .select()
      .from(accounts)
      .where(eq(accounts.email, p('email')))
      .prepare('find_account_by_email'),
    replacePasswordHash: db
      .update(accounts)
      .set({ passwordHash: bound('to') })
      .where(and(eq(accounts.id, p('id')), eq(accounts.passwordHash, p('from'))))
      .returning({ id: accounts.id })
      .prepare('replace_password_hash'),
    lockAccount: db
      .select({ id: accounts.id })
      .from(accounts)
      .where(eq(accounts.id, p('id')))
      .for('update')
      .prepare('lock_account'),
    touchApiKey: db
      .update(apiKeys)
      .set({ lastUsedAt: bound('at') })
      .where(eq(apiKeys.id, p('id')))
      .prepare('touch_api_key'),
    countActiveApiKeys: db
      .select({ n: count() })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.accountId, p('accountId')),
          isNull(apiKeys.revokedAt),
          or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, p('now'))),
        ),
      )
      .prepare('count_active_api_keys'),
    findCategory: db
      .select()
      .from(categories)
      .where(eq(categories.id, p('id')))
      .prepare('find_category'),
    lockCategory: db
      .select({ id: categories.id })
      .from(categories)
      .where(eq(categories.id, p('id')))
      .for('update')
      .prepare('lock_category'),
    petInCategory: db
      .select({ id: pets.id })
      .from(pets)
      .where(eq(pets.categoryId, p('id')))
      .limit(1)
      .prepare('pet_in_category'),
    setPetStatus: db
      .update(pets)
      .set({ status: bound('status') })
      .where(eq(pets.id, p('id')))
      .prepare('set_pet_status'),
    findInventory: db
      .select(inventoryColumns)
      .from(pets)
      .innerJoin(inventory, eq(inventory.petId, pets.id))
      .where(eq(pets.id, p('petId')))
      .prepare('find_inventory'),
    // The stock row and the pet row are both locked: status changes are decided under them.
    lockStock: db
      .select({ quantity: inventory.quantity, status: pets.status })
      .from(pets)
      .innerJoin(inventory, eq(inventory.petId, pets.id))
      .where(eq(pets.id, p('petId')))
      .for('update')
      .prepare('lock_stock'),
    setStock: db
      .update(inventory)
      .set({ quantity: bound('quantity') })
      .where(eq(inventory.petId, p('petId')))
      .prepare('set_stock'),
    findOrderAsAdmin: orderById([]).prepare('find_order'),
    findOrderAsCustomer: orderById([eq(orders.accountId, p('accountId'))]).prepare('find_order_of_account'),
    completeOrder: db
      .update(orders)
      .set({ complete: true, shipDate: bound('shipDate') })
      .where(eq(orders.id, p('id')))
      .returning()
      .prepare('complete_order'),
    deleteOrder: db
      .delete(orders)
      .where(eq(orders.id, p('id')))
      .prepare('delete_order'),
    openOrderOfPet: db
      .select({ id: orders.id })
      .from(orders)
      .where(and(eq(orders.petId, p('petId')), eq(orders.complete, false)))
      .limit(1)
      .prepare('open_order_of_pet'),
    findIdempotency: db
      .select({ requestHash: idempotencyKeys.requestHash, outcome: idempotencyKeys.outcome, createdAt: idempotencyKeys.createdAt })
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.accountId, p('accountId')), eq(idempotencyKeys.key, p('key'))))
      .prepare('find_idempotency'),
    // An expired record not purged yet gives way to the new one.
    saveIdempotency: db
      .insert(idempotencyKeys)
      .values({ accountId: p('accountId'), key: p('key'), requestHash: p('requestHash'), outcome: p('outcome'), createdAt: p('createdAt') })
      .onConflictDoUpdate({
        target: [idempotencyKeys.accountId, idempotencyKeys.key],
        set: { requestHash: bound('requestHash'), outcome: bound('outcome'), createdAt: bound('createdAt') },
      })
      .prepare('save_idempotency'),
    findMessage: db
      .select()
      .from(messages)
      .where(and(eq(messages.id, p('id')), eq(messages.accountId, p('accountId'))))
      .prepare('find_message'),
    countQueuedMessages: db
      .select({ n: count() })
      .from(messages)
      .where(and(eq(messages.accountId, p('accountId')), eq(messages.status, 'queued')))
      .prepare('count_queued_messages'),
  };
  return {
    async insertAccount(input) {
      const [row] = await db.insert(accounts).values(input).onConflictDoNothing({ target: accounts.email }).returning();
      return row ? toAccount(row) : null;
    },
    async findAccountByEmail(email) {
      const row = first(await prepared.findAccountByEmail.execute({ email }));
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },
    replacePasswordHash: async (id, from, to) => (await prepared.replacePasswordHash.execute({ id, from, to })).length > 0,
    lockAccount: async (id) => (await prepared.lockAccount.execute({ id })).length > 0,

    insertApiKey: async (input) => toApiKey((await db.insert(apiKeys).values(input).returning())[0]!),
    async findKeyOwner(hash) {
      const row = await read<KeyOwnerRow>(findKeyOwner, hash);
      if (!row) return null;
      const [keyId, accountId, role, expiresAt, revokedAt, lastUsedAt, keyHash] = row;
      return { keyId: Number(keyId), accountId: Number(accountId), role, expiresAt, revokedAt, lastUsedAt, keyHash };
    },
    async listApiKeys(accountId, page) {
      return (await apiKeysPage.execute({ ...page, accountId })).map(toApiKey);
    },
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
      await prepared.touchApiKey.execute({ id: keyId, at });
    },
    countActiveApiKeys: async (accountId, now) => first(await prepared.countActiveApiKeys.execute({ accountId, now }))?.n ?? 0,

    listCategories: async (page) => (await categoriesPage.execute({ ...page })).map(toCategory),
    async findCategory(id) {
      const row = first(await prepared.findCategory.execute({ id }));
      return row ? toCategory(row) : null;
    },
    lockCategory: async (id) => (await prepared.lockCategory.execute({ id })).length > 0,
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
    petInCategory: async (categoryId) => first(await prepared.petInCategory.execute({ id: categoryId }))?.id ?? null,

    async listPets(filter, page) {
      const shape = (filter.status !== undefined ? 1 : 0) + (filter.categoryId !== undefined ? 2 : 0);
      const values = { ...page, status: filter.status, categoryId: filter.categoryId };
      // Ids asked for (at most 100) are primary-key lookups; the other filters are checked on each.
      if (filter.ids !== undefined) {
        return (await petsByIdsShapes[shape]!.execute({ ...values, ids: filter.ids })).map(toPet);
      }
      return (await petsPages[shape]!.execute(values)).map(toPet);
    },
    async findPet(id) {
      const row = await read<PetRow>(findPet, String(id));
      return row ? { id: Number(row[0]), name: row[1], categoryId: Number(row[2]), status: row[3] } : null;
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
      await prepared.setPetStatus.execute({ id, status });
    },
    async deletePet(id) {
      await db.delete(inventory).where(eq(inventory.petId, id));
      await db.delete(pets).where(eq(pets.id, id));
    },

    listInventory: (filter, page) => inventoryPages[filter.status === undefined ? 0 : 1]!.execute({ ...page, status: filter.status }),
    findInventory: async (petId) => first(await prepared.findInventory.execute({ petId })),
    lockStock: async (petId) => first(await prepared.lockStock.execute({ petId })),
    async setStock(petId, quantity) {
      await prepared.setStock.execute({ petId, quantity });
    },

    async listOrders(viewer, filter, page) {
      const ofAccount = viewer.role !== 'admin';
      const statement = ordersPages[(ofAccount ? 1 : 0) + (filter.complete !== undefined ? 2 : 0)]!;
      return (await statement.execute({ ...page, accountId: viewer.accountId, complete: filter.complete })).map(toOrder);
    },
    async findOrder(viewer, id) {
      const row = first(
        await (viewer.role === 'admin'
          ? prepared.findOrderAsAdmin.execute({ id })
          : prepared.findOrderAsCustomer.execute({ id, accountId: viewer.accountId })),
      );
      return row ? toOrder(row) : null;
    },
    async placeOrder(input, terms, unlessKept) {
      const values: unknown[] = [input.accountId, input.petId, input.quantity, input.createdAt, terms.requires, terms.whenEmpty];
      const { rows } = await place<PlacedRow>(
        unlessKept
          ? { name: 'place_order_once', text: placeOrderOnceText, values: [...values, unlessKept.key, unlessKept.notBefore] }
          : { name: 'place_order', text: placeOrderText, values },
      );
      const row = rows[0];
      if (row?.kept) return 'kept';
      if (!row || row.stock === null || row.status === null) return { placed: null, found: null };
      if (row.id === null) return { placed: null, found: { quantity: row.stock, status: row.status } };
      return { placed: { id: Number(row.id), petId: input.petId, quantity: input.quantity, complete: false } };
    },
    completeOrder: async (id, shipDate) => toOrder((await prepared.completeOrder.execute({ id, shipDate }))[0]!),
    async deleteOrder(id) {
      await prepared.deleteOrder.execute({ id });
    },
    openOrderOfPet: async (petId) => first(await prepared.openOrderOfPet.execute({ petId }))?.id ?? null,

    async lockIdempotencyKey(accountId, key) {
      // Two requests with one key on two instances: the second waits here, then replays.
      // One 64-bit lock id from both parts (account ids may exceed the int4 form's range).
      await db.$client.query({
        name: 'lock_idempotency_key',
        text: 'select pg_advisory_xact_lock(hashtextextended($1::text, 0))',
        values: [`${accountId}:${key}`],
      });
    },
    async findIdempotency(accountId, key, notBefore) {
      const row = first(await prepared.findIdempotency.execute({ accountId, key }));
      if (!row || row.createdAt < notBefore) return null;
      return { requestHash: row.requestHash, outcome: row.outcome };
    },
    async saveIdempotency(accountId, key, record, createdAt) {
      await prepared.saveIdempotency.execute({ accountId, key, ...record, createdAt });
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
      const row = first(await prepared.findMessage.execute({ id, accountId }));
      return row ? toMessage(row) : null;
    },
    countQueuedMessages: async (accountId) => first(await prepared.countQueuedMessages.execute({ accountId }))?.n ?? 0,
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

/** A promise whose failure is reported where it is awaited, not as unhandled before that. */
function settled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

/** One pooled connection's queries, and the writes of its transaction left for the COMMIT. */
interface Session {
  queries: Queries;
  writes: Array<Promise<unknown>>;
}

/**
 * A transaction's queries on one connection. Its idempotency record is the last thing a
 * rule writes, and nothing reads it back in the same transaction: the write is sent at once
 * and answered with the COMMIT, which fails if it did (the transaction commits all or nothing).
 */
function createSession(db: Executor): Session {
  const queries = createQueries(db, pointReadOn(db.$client), (config) => db.$client.query(config));
  const session: Session = {
    writes: [],
    queries: {
      ...queries,
      saveIdempotency(...args) {
        session.writes.push(settled(Promise.resolve(queries.saveIdempotency(...args))));
      },
    },
  };
  return session;
}

export function openPgDatabase(url: string, poolSize = 10, timeoutMs?: number): PgDb {
  return drizzle({ client: openPool(url, poolSize, timeoutMs), schema });
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
  // A connection of its own, without the pool's statement bounds: a migration may take
  // longer, and so may waiting for another instance's (the advisory lock).
  const { connectionString, connectionTimeoutMillis } = db.$client.options;
  const client = new Client({ connectionString, connectionTimeoutMillis, stream: connectionSocket });
  client.on('error', () => {});
  await client.connect();
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
    await client.end();
  }
}

export interface PgStorageOptions {
  /** PostgreSQL became unreachable (the error) or answers again (null); once per change. */
  onAvailability?: (error: Error | null) => void;
}

export function createPgStorage(db: PgDb, { onAvailability = () => {} }: PgStorageOptions = {}): Storage {
  const pool = db.$client;
  // The pool's connection bound is the bound on every call (DATABASE_TIMEOUT_MS).
  const availability = createAvailability(pool.options.connectionString!, onAvailability, pool.options.connectionTimeoutMillis);
  pool.on('error', availability.suspect);
  pool.on('connect', (client) => client.on('error', availability.suspect));
  // The queries of each pooled connection, made on its first transaction: its prepared
  // statements run on it, inside the transaction it holds.
  const sessions = new WeakMap<PoolClient, Session>();
  const storage = createUnguardedStorage(db, async (work) => {
    // Checked out here rather than by drizzle's pool transaction, which keeps a connection
    // whose BEGIN failed out of the pool for good; a connection that failed is discarded.
    const client = await pool.connect();
    let failure: unknown;
    try {
      let session = sessions.get(client);
      if (!session) sessions.set(client, (session = createSession(drizzle({ client: client as unknown as Pool, schema }))));
      session.writes = [];
      // Pipelined (openPool): BEGIN goes out with the work's first statement, and the
      // writes left for the COMMIT go out with it, each round trip shared.
      const begun = settled(client.query('begin'));
      try {
        const result = await work(session.queries);
        const committed = settled(client.query('commit'));
        for (const sent of [begun, ...session.writes, committed]) await sent;
        // A write that failed aborted the transaction, and COMMIT then answers ROLLBACK.
        if ((await committed).command !== 'COMMIT') throw new Error('The transaction was rolled back');
        return result;
      } catch (error) {
        // A connection that failed (or timed out) is discarded below, which rolls back; a
        // ROLLBACK sent on it would only wait behind the statement that did not answer.
        if (!isConnectionError(error)) await client.query('rollback');
        throw error;
      }
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
  const queries = createQueries(db, createPointReads(db.$client), createTurnStatements(db.$client));
  return {
    ...queries,
    engine: 'postgres',
    pool: db.$client,
    transaction,
    async takeRateLimitLease(key, windowMs, now, want, limit) {
      // One upsert: concurrent leases from any instance serialise on the row, and the SET
      // expressions all read the row as it was, so `granted` and `hits` agree.
      const fresh = Math.min(want, limit);
      const grant = sql`greatest(least(${want}::integer, ${limit}::integer - ${rateLimits.hits}), 0)`;
      const ended = sql`${rateLimits.resetAt} <= ${now}::bigint`;
      const [row] = await db
        .insert(rateLimits)
        .values({ key, hits: fresh, resetAt: now + windowMs, granted: fresh })
        .onConflictDoUpdate({
          target: rateLimits.key,
          set: {
            granted: sql`case when ${ended} then ${fresh}::integer else ${grant} end`,
            hits: sql`case when ${ended} then ${fresh}::integer else ${rateLimits.hits} + ${grant} end`,
            resetAt: sql`case when ${ended} then ${now + windowMs}::bigint else ${rateLimits.resetAt} end`,
          },
        })
        .returning({ granted: rateLimits.granted, hits: rateLimits.hits, resetAt: rateLimits.resetAt });
      return row!;
    },
    async resetRateLimit(key) {
      await db.delete(rateLimits).where(eq(rateLimits.key, key));
    },
    purgeRateLimits: async (now) => (await db.delete(rateLimits).where(lte(rateLimits.resetAt, now))).rowCount ?? 0,
    async addDeprecatedCalls(counts) {
      if (counts.length === 0) return;
      // One statement; the batch holds each (operation, day, account) once, as ON CONFLICT needs.
      await db
        .insert(deprecatedCalls)
        .values(counts)
        .onConflictDoUpdate({
          target: [deprecatedCalls.operation, deprecatedCalls.day, deprecatedCalls.accountId],
          set: {
            calls: sql`${deprecatedCalls.calls} + excluded.calls`,
            lastAt: sql`greatest(${deprecatedCalls.lastAt}, excluded.last_at)`,
          },
        });
    },
    deprecatedCallers(operation, since) {
      const lastAt = sql<string>`max(${deprecatedCalls.lastAt})`;
      return db
        .select({
          accountId: deprecatedCalls.accountId,
          email: accounts.email,
          calls: sql<number>`sum(${deprecatedCalls.calls})`.mapWith(Number),
          lastAt,
        })
        .from(deprecatedCalls)
        .innerJoin(accounts, eq(accounts.id, deprecatedCalls.accountId))
        .where(and(eq(deprecatedCalls.operation, operation), gte(deprecatedCalls.day, since)))
        .groupBy(deprecatedCalls.accountId, accounts.email)
        .orderBy(desc(lastAt), asc(deprecatedCalls.accountId));
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    close: () => db.$client.end(),
  };
}
