// The storage port: what domain/ asks of a database, answered by db/sqlite-storage.ts
// (better-sqlite3) and db/pg/storage.ts (node-postgres). Operations return plain data; no
// rule lives behind them. Each returns `T | Promise<T>`: SQLite answers synchronously, so
// its path costs no promise per statement, PostgreSQL answers with a promise; the domain
// awaits either.
//
// Why an async domain over this port (rather than rules that run synchronously inside a
// better-sqlite3 transaction): the rules are written once and awaited on both engines.
// The SQLite storage makes that safe on its one writing connection by running
// `transaction(fn)` under an async mutex, so no other request's statement runs inside it,
// and by reading outside transactions on a connection that sees only committed rows (in
// memory, by making those reads wait). `transaction` resolves only once its writes are
// committed. db/sqlite-storage.ts has the details (group commit);
// tests/storage-interleaving.test.ts checks them.
import type {
  Account,
  AccountWithSecret,
  ApiKey,
  Category,
  InventoryItem,
  KeyOwner,
  Message,
  Order,
  Page,
  Pet,
  PetFilter,
  PetStatus,
  Principal,
  Role,
} from './types';

export type Awaitable<T> = T | Promise<T>;

/**
 * How long any one wait on the database may take (DATABASE_TIMEOUT_MS): a connection, a
 * statement, a lock. Past it the call fails as unavailable (503), rather than a request
 * hanging on a database that does not answer.
 */
export const defaultDatabaseTimeoutMs = 3_000;

/** An Idempotency-Key of an account, and the oldest record of it still kept. */
export interface KeptIdempotency {
  key: string;
  notBefore: string;
}

export interface StoredIdempotency {
  requestHash: string;
  /** The JSON of the first request's Outcome. */
  outcome: string;
}

/** Calls of one deprecated operation by one account on one UTC day. */
export interface DeprecatedCalls {
  operation: string;
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  accountId: number;
  calls: number;
  /** The last call's time, ISO 8601. */
  lastAt: string;
}

/** One account's calls of a deprecated operation over some days. */
export interface DeprecatedCaller {
  accountId: number;
  email: string;
  calls: number;
  lastAt: string;
}

export interface Queries {
  insertAccount(input: { email: string; passwordHash: string; role: Role; createdAt: string }): Awaitable<Account | null>;
  findAccountByEmail(email: string): Awaitable<AccountWithSecret | null>;
  /** Replaces the account's password hash if it is still `from`; false when it was not (changed meanwhile). */
  replacePasswordHash(accountId: number, from: string, to: string): Awaitable<boolean>;
  /**
   * Locks the account row (FOR UPDATE) for the rest of the transaction; false when there is
   * none. The bounds on what an account holds (keys, queued messages) count under it.
   */
  lockAccount(id: number): Awaitable<boolean>;

  insertApiKey(input: {
    accountId: number;
    name?: string;
    keyHash: string;
    prefix: string;
    lastFour: string;
    expiresAt?: string;
    createdAt: string;
  }): Awaitable<ApiKey>;
  findKeyOwner(keyHash: string): Awaitable<KeyOwner | null>;
  listApiKeys(accountId: number, page: Page): Awaitable<ApiKey[]>;
  /** False when the account has no such key; keeps the first revocation time. */
  revokeApiKey(accountId: number, keyId: number, at: string): Awaitable<boolean>;
  touchApiKey(keyId: number, at: string): Awaitable<void>;
  /** The account's keys neither revoked nor expired at `now`. */
  countActiveApiKeys(accountId: number, now: string): Awaitable<number>;

  listCategories(page: Page): Awaitable<Category[]>;
  findCategory(id: number): Awaitable<Category | null>;
  /** Locks the category row (FOR UPDATE) for the rest of the transaction; false when there is none. */
  lockCategory(id: number): Awaitable<boolean>;
  /** 'taken' when the unique name key is in use. */
  insertCategory(input: { name: string; nameKey: string; description: string | null }): Awaitable<Category | 'taken'>;
  /** Null when there is no such category; 'taken' when another has the name key. */
  updateCategory(id: number, input: { name: string; nameKey: string; description: string | null }): Awaitable<Category | null | 'taken'>;
  deleteCategory(id: number): Awaitable<void>;
  /** Some pet of the category, or null. */
  petInCategory(categoryId: number): Awaitable<number | null>;

  listPets(filter: PetFilter, page: Page): Awaitable<Pet[]>;
  findPet(id: number): Awaitable<Pet | null>;
  /** Inserts the pet with its inventory entry at quantity 0. */
  insertPet(input: { name: string; categoryId: number; status: PetStatus }): Awaitable<Pet>;
  updatePet(id: number, input: { name: string; categoryId: number; status: PetStatus }): Awaitable<Pet | null>;
  setPetStatus(id: number, status: PetStatus): Awaitable<void>;
  /** Deletes the pet and its inventory entry. */
  deletePet(id: number): Awaitable<void>;

  listInventory(filter: { status?: PetStatus | undefined }, page: Page): Awaitable<InventoryItem[]>;
  findInventory(petId: number): Awaitable<InventoryItem | null>;
  /**
   * The pet's stock and status, its stock row locked (FOR UPDATE) until the transaction
   * ends: every rule that reads and then changes a pet's stock or status takes it first.
   */
  lockStock(petId: number): Awaitable<{ quantity: number; status: PetStatus } | null>;
  setStock(petId: number, quantity: number): Awaitable<void>;

  listOrders(viewer: Principal, filter: { complete?: boolean | undefined }, page: Page): Awaitable<Order[]>;
  findOrder(viewer: Principal, id: number): Awaitable<Order | null>;
  /**
   * Places the order if the pet's stock allows it, as one atomic step (one statement on
   * PostgreSQL, so no transaction is needed around it): when the pet's status is
   * `terms.requires` and its stock holds `input.quantity`, takes that from the stock, sets
   * the status to `terms.whenEmpty` if nothing is left, and inserts the order. Otherwise it
   * writes nothing and returns the pet's stock and status as it found them (null: no such
   * pet), for the rule to name the refusal. Locks what it reads, as lockStock does.
   * With `unlessKept` it does nothing at all and answers 'kept' when the account's
   * Idempotency-Key already has a record created at or after `notBefore`: the order can
   * then be sent along with the key's lock and lookup (domain/idempotency.ts).
   */
  placeOrder(
    input: { accountId: number; petId: number; quantity: number; createdAt: string },
    terms: { requires: PetStatus; whenEmpty: PetStatus },
    unlessKept?: KeptIdempotency,
  ): Awaitable<{ placed: Order } | { placed: null; found: { quantity: number; status: PetStatus } | null } | 'kept'>;
  completeOrder(id: number, shipDate: string): Awaitable<Order>;
  deleteOrder(id: number): Awaitable<void>;
  /** Some incomplete order of the pet, or null. */
  openOrderOfPet(petId: number): Awaitable<number | null>;

  /**
   * Serialises requests with one (account, key) until the transaction ends (an advisory
   * transaction lock on PostgreSQL; SQLite's write lock already does it).
   */
  lockIdempotencyKey(accountId: number, key: string): Awaitable<void>;
  findIdempotency(accountId: number, key: string, notBefore: string): Awaitable<StoredIdempotency | null>;
  /**
   * The last write of its transaction: PostgreSQL sends it with the COMMIT, whose answer
   * is then its own (a failure fails the transaction).
   */
  saveIdempotency(accountId: number, key: string, record: StoredIdempotency, createdAt: string): Awaitable<void>;
  purgeIdempotency(before: string): Awaitable<number>;

  insertMessage(input: { id: string; accountId: number; message: string; createdAt: string }): Awaitable<Message>;
  findMessage(accountId: number, id: string): Awaitable<Message | null>;
  /** The account's messages still `queued`. */
  countQueuedMessages(accountId: number): Awaitable<number>;
  /**
   * Claims and marks as sent up to `limit` queued messages created at or before
   * `createdBefore`, oldest first; returns their ids. A message is claimed by one caller
   * only, whichever process or instance asks (FOR UPDATE SKIP LOCKED on PostgreSQL, one
   * statement under the write lock on SQLite).
   */
  deliverDue(createdBefore: string, sentAt: string, limit: number): Awaitable<Array<{ id: string; createdAt: string }>>;
}

/** A connection pool's use now, as node-postgres's Pool counts it. */
export interface PoolUse {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

export interface RateLimitLease {
  granted: number;
  hits: number;
  resetAt: number;
}

export interface Storage extends Queries {
  readonly engine: 'sqlite' | 'postgres';
  /** PostgreSQL's connection pool, read by the metrics at each scrape; SQLite has none. */
  readonly pool?: PoolUse;
  /** Runs `work` in one write transaction; a throw rolls it back. */
  transaction<T>(work: (tx: Queries) => Promise<T>): Promise<T>;
  /**
   * Rate-limit budgets shared by every process on this database (server/security/rate-limit-store.ts):
   * grants min(want, limit - granted so far) of the key's fixed window (a new one from `now`
   * if it ended), in one atomic statement, so the grants of a window never exceed `limit`.
   * `want` >= 1; `hits` is the window's total granted after this grant.
   */
  takeRateLimitLease(key: string, windowMs: number, now: number, want: number, limit: number): Awaitable<RateLimitLease>;
  resetRateLimit(key: string): Awaitable<void>;
  /** Forgets counters whose window ended before `now` (periodic work). */
  purgeRateLimits(now: number): Awaitable<number>;
  /** Adds each count to its (operation, day, account) row, in one transaction; a later `lastAt` wins. */
  addDeprecatedCalls(counts: DeprecatedCalls[]): Awaitable<void>;
  /** The accounts that called `operation` on day `since` (`YYYY-MM-DD`) or later, the latest caller first. */
  deprecatedCallers(operation: string, since: string): Awaitable<DeprecatedCaller[]>;
  /** Throws when the database cannot answer. */
  ping(): Awaitable<void>;
  close(): Promise<void>;
}
