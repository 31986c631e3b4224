import { and, asc, eq, gt, isNull } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import type { Db } from './client';
import { accounts, apiKeys } from './schema';
import type { Role } from './accounts';

export type ApiKey = components['schemas']['ApiKey'];

export interface KeyOwner {
  keyId: number;
  accountId: number;
  role: Role;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  keyHash: string;
}

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

export function createApiKeysRepository(db: Db) {
  return {
    create(input: {
      accountId: number;
      name?: string;
      keyHash: string;
      prefix: string;
      lastFour: string;
      expiresAt?: string;
    }): ApiKey {
      const row = db
        .insert(apiKeys)
        .values({ ...input, createdAt: new Date().toISOString() })
        .returning()
        .get();
      return toApiKey(row);
    },

    findOwnerByHash(keyHash: string): KeyOwner | null {
      const row = db
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
        .where(eq(apiKeys.keyHash, keyHash))
        .get();
      return row ?? null;
    },

    /** One page of an account's keys, by id, after the given id. */
    listForAccount(accountId: number, page: { after: number; limit: number }): ApiKey[] {
      return db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.accountId, accountId), gt(apiKeys.id, page.after)))
        .orderBy(asc(apiKeys.id))
        .limit(page.limit)
        .all()
        .map(toApiKey);
    },

    /** False when the account has no such key. Revoking twice keeps the first time. */
    revoke(accountId: number, keyId: number): boolean {
      const owned = db
        .select({ id: apiKeys.id })
        .from(apiKeys)
        .where(and(eq(apiKeys.id, keyId), eq(apiKeys.accountId, accountId)))
        .get();
      if (!owned) return false;
      db.update(apiKeys)
        .set({ revokedAt: new Date().toISOString() })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
        .run();
      return true;
    },

    touch(keyId: number, at: string): void {
      db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, keyId)).run();
    },
  };
}
