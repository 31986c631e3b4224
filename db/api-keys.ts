import { and, asc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { bound, prepared, type Db } from './client';
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

const p = sql.placeholder;

export function createApiKeysRepository(db: Db) {
  const insert = prepared(() =>
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
  const ownerByHash = prepared(() =>
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
      .where(eq(apiKeys.keyHash, p('keyHash')))
      .prepare(),
  );
  const pageForAccount = prepared(() =>
    db
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.accountId, p('accountId')), gt(apiKeys.id, p('after'))))
      .orderBy(asc(apiKeys.id))
      .limit(p('limit'))
      .prepare(),
  );
  const owned = prepared(() =>
    db
      .select({ id: apiKeys.id })
      .from(apiKeys)
      .where(and(eq(apiKeys.id, p('keyId')), eq(apiKeys.accountId, p('accountId'))))
      .prepare(),
  );
  const revokeOnce = prepared(() =>
    db
      .update(apiKeys)
      .set({ revokedAt: bound('at') })
      .where(and(eq(apiKeys.id, p('keyId')), isNull(apiKeys.revokedAt)))
      .prepare(),
  );
  const touchKey = prepared(() => db.update(apiKeys).set({ lastUsedAt: bound('at') }).where(eq(apiKeys.id, p('keyId'))).prepare());

  return {
    create(input: {
      accountId: number;
      name?: string;
      keyHash: string;
      prefix: string;
      lastFour: string;
      expiresAt?: string;
    }): ApiKey {
      const row = insert().get({ ...input, name: input.name ?? null, expiresAt: input.expiresAt ?? null, createdAt: new Date().toISOString() });
      return toApiKey(row);
    },

    findOwnerByHash(keyHash: string): KeyOwner | null {
      return ownerByHash().get({ keyHash }) ?? null;
    },

    /** One page of an account's keys, by id, after the given id. */
    listForAccount(accountId: number, page: { after: number; limit: number }): ApiKey[] {
      return pageForAccount().all({ accountId, after: page.after, limit: page.limit }).map(toApiKey);
    },

    /** False when the account has no such key. Revoking twice keeps the first time. */
    revoke(accountId: number, keyId: number): boolean {
      if (!owned().get({ keyId, accountId })) return false;
      revokeOnce().run({ keyId, at: new Date().toISOString() });
      return true;
    },

    touch(keyId: number, at: string): void {
      touchKey().run({ keyId, at });
    },
  };
}
