// Rows to the contract's shapes, for both engines: db/schema.ts and db/pg/schema.ts
// describe the same columns, so their rows have one shape (checked by the compiler where
// db/pg/storage.ts passes its rows here).
import type { ApiKey, Category, Message, Order, Pet } from '../domain/types';
import type { accounts, apiKeys, categories, messages, orders, pets } from './schema';

export const toCategory = (row: typeof categories.$inferSelect): Category => ({
  id: row.id,
  name: row.name,
  ...(row.description !== null && { description: row.description }),
});

export const toPet = (row: typeof pets.$inferSelect): Pet => ({
  id: row.id,
  name: row.name,
  categoryId: row.categoryId,
  status: row.status,
});

export const toOrder = (row: typeof orders.$inferSelect): Order => ({
  id: row.id,
  petId: row.petId,
  quantity: row.quantity,
  complete: row.complete,
  ...(row.shipDate !== null && { shipDate: row.shipDate }),
});

export const toApiKey = (row: typeof apiKeys.$inferSelect): ApiKey => ({
  id: row.id,
  ...(row.name !== null && { name: row.name }),
  prefix: row.prefix,
  lastFour: row.lastFour,
  createdAt: row.createdAt,
  ...(row.lastUsedAt !== null && { lastUsedAt: row.lastUsedAt }),
  ...(row.expiresAt !== null && { expiresAt: row.expiresAt }),
  ...(row.revokedAt !== null && { revokedAt: row.revokedAt }),
});

export const toMessage = (row: typeof messages.$inferSelect): Message => ({
  id: row.id,
  message: row.message,
  status: row.status,
  createdAt: row.createdAt,
  ...(row.sentAt !== null && { sentAt: row.sentAt }),
});

export const toAccount = (row: typeof accounts.$inferSelect) => ({
  id: row.id,
  email: row.email,
  role: row.role,
  createdAt: row.createdAt,
});
