// The tables of db/schema.ts in PostgreSQL's dialect, column for column, so both engines
// hand the same plain rows to domain/. Ids are identity bigints read as JS numbers (the
// spec caps ids at 2^53-1); timestamps stay ISO 8601 text, as on SQLite, so they compare
// and serialise the same way on both engines.
import { sql } from 'drizzle-orm';
import { bigint, boolean, check, index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';

const id = () => bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity();
const ref = (name: string) => bigint(name, { mode: 'number' });

export const accounts = pgTable(
  'accounts',
  {
    id: id(),
    // Stored lower-cased: the unique index makes emails unique ignoring case.
    email: text('email').notNull().unique(),
    passwordHash: text('password_hash').notNull(),
    role: text('role', { enum: ['customer', 'admin'] })
      .notNull()
      .default('customer'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [check('accounts_role_check', sql`${t.role} in ('customer', 'admin')`)],
);

export const apiKeys = pgTable(
  'api_keys',
  {
    id: id(),
    accountId: ref('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name'),
    keyHash: text('key_hash').notNull().unique(),
    prefix: text('prefix').notNull(),
    lastFour: text('last_four').notNull(),
    createdAt: text('created_at').notNull(),
    lastUsedAt: text('last_used_at'),
    expiresAt: text('expires_at'),
    revokedAt: text('revoked_at'),
  },
  (t) => [index('api_keys_account_idx').on(t.accountId, t.id)],
);

export const categories = pgTable('categories', {
  id: id(),
  name: text('name').notNull(),
  // lower(name): the unique index behind "names are unique ignoring case".
  nameKey: text('name_key').notNull().unique(),
  description: text('description'),
});

export const pets = pgTable(
  'pets',
  {
    id: id(),
    name: text('name').notNull(),
    categoryId: ref('category_id')
      .notNull()
      .references(() => categories.id, { onDelete: 'restrict' }),
    status: text('status', { enum: ['available', 'pending', 'sold'] })
      .notNull()
      .default('available'),
  },
  (t) => [
    index('pets_status_idx').on(t.status, t.id),
    index('pets_category_idx').on(t.categoryId, t.id),
    // Both filters at once: without it a category's pets are read one by one for their status.
    index('pets_category_status_idx').on(t.categoryId, t.status, t.id),
    check('pets_status_check', sql`${t.status} in ('available', 'pending', 'sold')`),
  ],
);

export const inventory = pgTable(
  'inventory',
  {
    petId: ref('pet_id')
      .primaryKey()
      .references(() => pets.id, { onDelete: 'cascade' }),
    quantity: integer('quantity').notNull().default(0),
  },
  (t) => [check('inventory_quantity_check', sql`${t.quantity} >= 0`)],
);

export const orders = pgTable(
  'orders',
  {
    id: id(),
    accountId: ref('account_id')
      .notNull()
      .references(() => accounts.id),
    // No foreign key: a completed order keeps its petId as history after the pet is deleted.
    petId: ref('pet_id').notNull(),
    quantity: integer('quantity').notNull(),
    shipDate: text('ship_date'),
    complete: boolean('complete').notNull().default(false),
    createdAt: text('created_at').notNull(),
  },
  (t) => [
    index('orders_account_idx').on(t.accountId, t.id),
    index('orders_account_complete_idx').on(t.accountId, t.complete, t.id),
    index('orders_complete_idx').on(t.complete, t.id),
    index('orders_pet_idx').on(t.petId, t.complete),
    check('orders_quantity_check', sql`${t.quantity} >= 1`),
  ],
);

export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    accountId: ref('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    // SHA-256 of the canonical request body: the same key with another body is a conflict.
    requestHash: text('request_hash').notNull(),
    // The domain outcome of the first request (domain/idempotency.ts), as JSON.
    outcome: text('outcome').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.key] }), index('idempotency_keys_created_idx').on(t.createdAt)],
);

export const messages = pgTable(
  'messages',
  {
    id: text('id').primaryKey(),
    accountId: ref('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    message: text('message').notNull(),
    status: text('status', { enum: ['queued', 'sent'] })
      .notNull()
      .default('queued'),
    createdAt: text('created_at').notNull(),
    sentAt: text('sent_at'),
  },
  (t) => [index('messages_status_idx').on(t.status, t.createdAt), check('messages_status_check', sql`${t.status} in ('queued', 'sent')`)],
);

// Shared rate-limit budgets: one row per client key and window, so N instances count once;
// `hits` counts the requests granted to instances' leases, `granted` the last lease.
export const rateLimits = pgTable('rate_limits', {
  key: text('key').primaryKey(),
  hits: integer('hits').notNull(),
  resetAt: bigint('reset_at', { mode: 'number' }).notNull(),
  granted: integer('granted').notNull().default(0),
});

// Calls of deprecated operations, one row per operation, UTC day and account.
export const deprecatedCalls = pgTable(
  'deprecated_calls',
  {
    operation: text('operation').notNull(),
    day: text('day').notNull(),
    accountId: ref('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    calls: integer('calls').notNull(),
    lastAt: text('last_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.operation, t.day, t.accountId] })],
);
