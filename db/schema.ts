// The tables behind openapi.yaml. Timestamps are ISO 8601 text (they sort as strings);
// ids are SQLite rowids, which the spec caps at 2^53-1 for JSON clients.
import { sql } from 'drizzle-orm';
import { blob, check, index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core';

export const accounts = sqliteTable(
  'accounts',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    // Stored lower-cased: emails are unique ignoring case.
    email: text('email').notNull().unique(),
    passwordHash: text('password_hash').notNull(),
    role: text('role', { enum: ['customer', 'admin'] })
      .notNull()
      .default('customer'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [check('accounts_role_check', sql`${t.role} in ('customer', 'admin')`)],
);

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name'),
    // SHA-256 of the whole secret, hex. The secret itself is never stored.
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

export const categories = sqliteTable('categories', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  name: text('name').notNull(),
  // lower(name): the unique key that makes names unique ignoring case.
  nameKey: text('name_key').notNull().unique(),
  description: text('description'),
});

export const pets = sqliteTable(
  'pets',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    name: text('name').notNull(),
    categoryId: integer('category_id')
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

export const inventory = sqliteTable(
  'inventory',
  {
    petId: integer('pet_id')
      .primaryKey()
      .references(() => pets.id, { onDelete: 'cascade' }),
    quantity: integer('quantity').notNull().default(0),
  },
  (t) => [check('inventory_quantity_check', sql`${t.quantity} >= 0`)],
);

export const orders = sqliteTable(
  'orders',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    // No foreign key: a completed order keeps its petId as history after the pet is deleted.
    petId: integer('pet_id').notNull(),
    quantity: integer('quantity').notNull(),
    shipDate: text('ship_date'),
    complete: integer('complete', { mode: 'boolean' }).notNull().default(false),
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

export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    accountId: integer('account_id')
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

export const messages = sqliteTable(
  'messages',
  {
    id: text('id').primaryKey(),
    accountId: integer('account_id')
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

// Rate-limit budgets shared by every process on this file (WEB_CONCURRENCY workers): one
// row per client key and window; `hits` counts the requests granted to processes' leases
// in the window, `granted` the last lease (server/security/rate-limit-store.ts).
export const rateLimits = sqliteTable('rate_limits', {
  key: text('key').primaryKey(),
  hits: integer('hits').notNull(),
  resetAt: integer('reset_at').notNull(),
  granted: integer('granted').notNull().default(0),
});

// A readiness check's write while writes are failing (db/sqlite-storage.ts): a row as
// large as one request's write, inserted and deleted in one transaction, so that it
// succeeds only where the database has room for new pages again. Always empty.
export const writeChecks = sqliteTable('write_checks', {
  room: blob('room', { mode: 'buffer' }).notNull(),
});

// Calls of deprecated operations, one row per operation, UTC day and account
// (server/deprecation/call-log.ts adds to them in batches), read by `npm run deprecations`.
export const deprecatedCalls = sqliteTable(
  'deprecated_calls',
  {
    operation: text('operation').notNull(),
    day: text('day').notNull(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    calls: integer('calls').notNull(),
    lastAt: text('last_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.operation, t.day, t.accountId] })],
);
