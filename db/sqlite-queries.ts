// The storage port's queries on better-sqlite3 (domain/storage.ts): each operation is
// one or two prepared statements, synchronous, returning plain data. Nothing here knows
// about transactions: db/sqlite-storage.ts decides where and when they run.
import { and, asc, count, desc, eq, gt, gte, inArray, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import type { DeprecatedCalls, Queries, StoredIdempotency } from '../domain/storage';
import type { Principal } from '../domain/types';
import { bound, param, prepared, rowLimit, type Db } from './client';
import { toAccount, toApiKey, toCategory, toMessage, toOrder, toPet } from './rows';
import {
  accounts,
  apiKeys,
  categories,
  deprecatedCalls,
  idempotencyKeys,
  inventory,
  messages,
  orders,
  pets,
  rateLimits,
  writeChecks,
} from './schema';

const isUniqueViolation = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE';

const inventoryColumns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

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
export function createQueries(db: Db): Queries {
  const p = param;

  const insertAccount = prepared(() =>
    db
      .insert(accounts)
      .values({ email: p('email'), passwordHash: p('passwordHash'), role: p('role'), createdAt: p('createdAt') })
      .onConflictDoNothing({ target: accounts.email })
      .returning()
      .prepare(),
  );
  const accountByEmail = prepared(() =>
    db
      .select()
      .from(accounts)
      .where(eq(accounts.email, p('email')))
      .prepare(),
  );
  const replacePasswordHash = prepared(() =>
    db
      .update(accounts)
      .set({ passwordHash: bound('to') })
      .where(and(eq(accounts.id, p('id')), eq(accounts.passwordHash, p('from'))))
      .prepare(),
  );
  const accountById = prepared(() =>
    db
      .select({ id: accounts.id })
      .from(accounts)
      .where(eq(accounts.id, p('id')))
      .prepare(),
  );

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
    db
      .select({ id: apiKeys.id })
      .from(apiKeys)
      .where(and(eq(apiKeys.id, p('id')), eq(apiKeys.accountId, p('accountId'))))
      .prepare(),
  );
  const revokeKey = prepared(() =>
    db
      .update(apiKeys)
      .set({ revokedAt: bound('at') })
      .where(and(eq(apiKeys.id, p('id')), isNull(apiKeys.revokedAt)))
      .prepare(),
  );
  const touchKey = prepared(() =>
    db
      .update(apiKeys)
      .set({ lastUsedAt: bound('at') })
      .where(eq(apiKeys.id, p('id')))
      .prepare(),
  );
  const activeKeys = prepared(() =>
    db
      .select({ n: count() })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.accountId, p('accountId')),
          isNull(apiKeys.revokedAt),
          or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, p('now'))),
        ),
      )
      .prepare(),
  );

  const categoryPage = prepared(() =>
    db
      .select()
      .from(categories)
      .where(gt(categories.id, p('after')))
      .orderBy(asc(categories.id))
      .limit(rowLimit('limit'))
      .prepare(),
  );
  const categoryById = prepared(() =>
    db
      .select()
      .from(categories)
      .where(eq(categories.id, p('id')))
      .prepare(),
  );
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
  const deleteCategory = prepared(() =>
    db
      .delete(categories)
      .where(eq(categories.id, p('id')))
      .prepare(),
  );
  const petOfCategory = prepared(() =>
    db
      .select({ id: pets.id })
      .from(pets)
      .where(eq(pets.categoryId, p('id')))
      .limit(rowLimit(1))
      .prepare(),
  );

  // The filters are the leading columns of an index that ends in id (pets_status_idx,
  // pets_category_idx, pets_category_status_idx), read from the cursor on. `ids` binds one
  // placeholder per id, one statement per count (the spec caps ids at 100), so each id is
  // a primary-key search, taken in id order until the page is full; with ids the other
  // filters are written `+column`, which keeps them out of the index choice and checks them
  // on those rows (through pets_category_idx, SQLite looked up all 100 ids and sorted them).
  const petPage = byShape((status: boolean, category: boolean, ids: number) => {
    const where: SQL[] = [gt(pets.id, p('after'))];
    const equal = (c: typeof pets.status | typeof pets.categoryId, name: string) => (ids >= 0 ? sql`+${c} = ${p(name)}` : eq(c, p(name)));
    if (status) where.push(equal(pets.status, 'status'));
    if (category) where.push(equal(pets.categoryId, 'categoryId'));
    if (ids >= 0)
      where.push(
        inArray(
          pets.id,
          Array.from({ length: ids }, (_, i) => p(`id${i}`)),
        ),
      );
    return db
      .select()
      .from(pets)
      .where(and(...where))
      .orderBy(asc(pets.id))
      .limit(rowLimit('limit'))
      .prepare();
  });
  const petById = prepared(() =>
    db
      .select()
      .from(pets)
      .where(eq(pets.id, p('id')))
      .prepare(),
  );
  const insertPet = prepared(() =>
    db
      .insert(pets)
      .values({ name: p('name'), categoryId: p('categoryId'), status: p('status') })
      .returning()
      .prepare(),
  );
  const insertStock = prepared(() =>
    db
      .insert(inventory)
      .values({ petId: p('petId'), quantity: 0 })
      .prepare(),
  );
  const updatePet = prepared(() =>
    db
      .update(pets)
      .set({ name: bound('name'), categoryId: bound('categoryId'), status: bound('status') })
      .where(eq(pets.id, p('id')))
      .returning()
      .prepare(),
  );
  const setPetStatus = prepared(() =>
    db
      .update(pets)
      .set({ status: bound('status') })
      .where(eq(pets.id, p('id')))
      .prepare(),
  );
  const deleteStock = prepared(() =>
    db
      .delete(inventory)
      .where(eq(inventory.petId, p('id')))
      .prepare(),
  );
  const deletePet = prepared(() =>
    db
      .delete(pets)
      .where(eq(pets.id, p('id')))
      .prepare(),
  );

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
    db
      .select(inventoryColumns)
      .from(pets)
      .innerJoin(inventory, eq(inventory.petId, pets.id))
      .where(eq(pets.id, p('id')))
      .prepare(),
  );
  const setStock = prepared(() =>
    db
      .update(inventory)
      .set({ quantity: bound('quantity') })
      .where(eq(inventory.petId, p('petId')))
      .prepare(),
  );

  // One statement per viewer kind and `complete` filter, each with its own index. A
  // placeholder skips the column's boolean mapping: `complete` is bound as 0/1.
  const orderPage = byShape((customer: boolean, byComplete: boolean) => {
    const where: SQL[] = [gt(orders.id, p('after'))];
    if (customer) where.push(eq(orders.accountId, p('accountId')));
    if (byComplete) where.push(eq(orders.complete, p('complete')));
    return db
      .select()
      .from(orders)
      .where(and(...where))
      .orderBy(asc(orders.id))
      .limit(rowLimit('limit'))
      .prepare();
  });
  const orderById = byShape((customer: boolean) => {
    const where: SQL[] = [eq(orders.id, p('id'))];
    if (customer) where.push(eq(orders.accountId, p('accountId')));
    return db
      .select()
      .from(orders)
      .where(and(...where))
      .prepare();
  });
  // No RETURNING (it cost more than the insert itself; figures in commit 88a1b06): the new
  // row is what was written, with the id the insert reports.
  const insertOrder = prepared(() =>
    db
      .insert(orders)
      .values({ accountId: p('accountId'), petId: p('petId'), quantity: p('quantity'), complete: false, createdAt: p('createdAt') })
      .prepare(),
  );
  const completeOrder = prepared(() =>
    db
      .update(orders)
      .set({ complete: true, shipDate: bound('shipDate') })
      .where(eq(orders.id, p('id')))
      .returning()
      .prepare(),
  );
  const deleteOrder = prepared(() =>
    db
      .delete(orders)
      .where(eq(orders.id, p('id')))
      .prepare(),
  );
  // `complete = 0` is written into the SQL: drizzle would bind `false` as a bare `?`,
  // which the planner reads (db/client.ts, param).
  const openOrderOfPet = prepared(() =>
    db
      .select({ id: orders.id })
      .from(orders)
      .where(and(eq(orders.petId, p('petId')), eq(orders.complete, sql`0`)))
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
  const purgeIdempotency = prepared(() =>
    db
      .delete(idempotencyKeys)
      .where(sql`${idempotencyKeys.createdAt} < ${p('before')}`)
      .prepare(),
  );

  const insertMessage = prepared(() =>
    db
      .insert(messages)
      .values({ id: p('id'), accountId: p('accountId'), message: p('message'), status: 'queued', createdAt: p('createdAt') })
      .returning()
      .prepare(),
  );
  const messageById = prepared(() =>
    db
      .select()
      .from(messages)
      .where(and(eq(messages.id, p('id')), eq(messages.accountId, p('accountId'))))
      .prepare(),
  );
  const queuedMessages = prepared(() =>
    db
      .select({ n: count() })
      .from(messages)
      .where(and(eq(messages.accountId, p('accountId')), eq(messages.status, 'queued')))
      .prepare(),
  );
  // One UPDATE statement: atomic under SQLite's write lock, across processes too. The
  // status is written into the SQL, as `complete = 0` is above.
  const queued = sql.raw(`'queued'`);
  const deliverDue = prepared(() => {
    const due = db
      .select({ id: messages.id })
      .from(messages)
      .where(and(eq(messages.status, queued), lte(messages.createdAt, p('createdBefore'))))
      .orderBy(asc(messages.createdAt))
      .limit(rowLimit('limit'));
    return db
      .update(messages)
      .set({ status: 'sent', sentAt: bound('sentAt') })
      .where(and(eq(messages.status, queued), inArray(messages.id, due)))
      .returning({ id: messages.id, createdAt: messages.createdAt })
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
    replacePasswordHash: (id, from, to) => replacePasswordHash().run({ id, from, to }).changes > 0,
    // The transaction's write lock (BEGIN IMMEDIATE) already excludes every other writer.
    lockAccount: (id) => accountById().get({ id }) !== undefined,

    insertApiKey: (input) => toApiKey(insertApiKey().get({ name: null, expiresAt: null, ...input })),
    findKeyOwner: (hash) => keyOwner().get({ hash }) ?? null,
    listApiKeys: (accountId, page) =>
      apiKeyPage()
        .all({ accountId, ...page })
        .map(toApiKey),
    revokeApiKey(accountId, keyId, at) {
      if (!ownedKey().get({ id: keyId, accountId })) return false;
      revokeKey().run({ id: keyId, at });
      return true;
    },
    touchApiKey(keyId, at) {
      touchKey().run({ id: keyId, at });
    },
    countActiveApiKeys: (accountId, now) => activeKeys().get({ accountId, now })?.n ?? 0,

    listCategories: (page) =>
      categoryPage()
        .all({ ...page })
        .map(toCategory),
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
      const values: Record<string, unknown> = {
        after: page.after,
        limit: page.limit,
        status: filter.status,
        categoryId: filter.categoryId,
      };
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
    placeOrder(input, terms, unlessKept) {
      // Under the write lock (a transaction of its own, or the caller's): what it reads holds.
      if (unlessKept) {
        const record = idempotencyRecord().get({ accountId: input.accountId, key: unlessKept.key });
        if (record && record.createdAt >= unlessKept.notBefore) return 'kept';
      }
      const row = inventoryById().get({ id: input.petId });
      const found = row ? { quantity: row.quantity, status: row.status } : null;
      if (!found || found.status !== terms.requires || found.quantity < input.quantity) return { placed: null, found };
      const stockLeft = found.quantity - input.quantity;
      setStock().run({ petId: input.petId, quantity: stockLeft });
      if (stockLeft === 0 && terms.whenEmpty !== found.status) setPetStatus().run({ id: input.petId, status: terms.whenEmpty });
      const { lastInsertRowid } = insertOrder().run(input);
      return { placed: toOrder({ ...input, id: Number(lastInsertRowid), complete: false, shipDate: null }) };
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
    deliverDue: (createdBefore, sentAt, limit) => deliverDue().all({ createdBefore, sentAt, limit }),
  };
}

/** The operations that only read: outside a transaction they go to the read connection. */
export const readOnly = [
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

/**
 * The service's own statements beside the store's: rate-limit counters shared by the
 * processes on one file (one upsert per lease, atomic across them), and the readiness check's
 * write (db/sqlite-storage.ts).
 */
export function createServiceQueries(db: Db) {
  const p = param;
  // A lease: min(want, limit - hits) of a running window, or a new window's first grant.
  // The SET expressions all read the row as it was, so `granted` and `hits` agree.
  const fresh = sql`min(${p('want')}, ${p('limit')})`;
  const grant = sql`max(min(${p('want')}, ${p('limit')} - ${rateLimits.hits}), 0)`;
  const ended = sql`${rateLimits.resetAt} <= ${p('now')}`;
  const lease = prepared(() =>
    db
      .insert(rateLimits)
      .values({ key: p('key'), hits: fresh, resetAt: p('resetAt'), granted: fresh })
      .onConflictDoUpdate({
        target: rateLimits.key,
        set: {
          granted: sql`case when ${ended} then ${fresh} else ${grant} end`,
          hits: sql`case when ${ended} then ${fresh} else ${rateLimits.hits} + ${grant} end`,
          resetAt: sql`case when ${ended} then ${p('resetAt')} else ${rateLimits.resetAt} end`,
        },
      })
      .returning({ granted: rateLimits.granted, hits: rateLimits.hits, resetAt: rateLimits.resetAt })
      .prepare(),
  );
  const resetHits = prepared(() =>
    db
      .delete(rateLimits)
      .where(eq(rateLimits.key, p('key')))
      .prepare(),
  );
  const purgeHits = prepared(() =>
    db
      .delete(rateLimits)
      .where(lte(rateLimits.resetAt, p('now')))
      .prepare(),
  );
  const insertWriteCheck = prepared(() =>
    db
      .insert(writeChecks)
      .values({ room: p('room') })
      .prepare(),
  );
  const deleteWriteChecks = prepared(() => db.delete(writeChecks).prepare());
  const addCalls = prepared(() =>
    db
      .insert(deprecatedCalls)
      .values({ operation: p('operation'), day: p('day'), accountId: p('accountId'), calls: p('calls'), lastAt: p('lastAt') })
      .onConflictDoUpdate({
        target: [deprecatedCalls.operation, deprecatedCalls.day, deprecatedCalls.accountId],
        set: {
          calls: sql`${deprecatedCalls.calls} + excluded.calls`,
          lastAt: sql`max(${deprecatedCalls.lastAt}, excluded.last_at)`,
        },
      })
      .prepare(),
  );
  const lastAt = sql<string>`max(${deprecatedCalls.lastAt})`;
  const callers = prepared(() =>
    db
      .select({
        accountId: deprecatedCalls.accountId,
        email: accounts.email,
        calls: sql<number>`sum(${deprecatedCalls.calls})`.mapWith(Number),
        lastAt,
      })
      .from(deprecatedCalls)
      .innerJoin(accounts, eq(accounts.id, deprecatedCalls.accountId))
      .where(and(eq(deprecatedCalls.operation, p('operation')), gte(deprecatedCalls.day, p('since'))))
      .groupBy(deprecatedCalls.accountId, accounts.email)
      .orderBy(desc(lastAt), asc(deprecatedCalls.accountId))
      .prepare(),
  );
  return {
    takeRateLimitLease: (key: string, windowMs: number, now: number, want: number, limit: number) =>
      lease().get({ key, now, resetAt: now + windowMs, want, limit }),
    resetRateLimit: (key: string) => {
      resetHits().run({ key });
    },
    purgeRateLimits: (now: number) => purgeHits().run({ now }).changes,
    addDeprecatedCalls: (counts: DeprecatedCalls[]) => {
      for (const c of counts) addCalls().run({ ...c });
    },
    deprecatedCallers: (operation: string, since: string) => callers().all({ operation, since }),
    /** Inserts a row of `room` bytes and deletes it again: it needs that many bytes of free pages. */
    checkWrite: (room: Buffer) => {
      insertWriteCheck().run({ room });
      deleteWriteChecks().run();
    },
  };
}
