// Idempotency-Key records: the first response to a request, kept per (account, key) with
// a hash of the request body. Callers use these inside their own write transaction, so
// the record and the work it describes are committed together or not at all.
import { createHash } from 'node:crypto';
import { and, eq, lt, sql } from 'drizzle-orm';
import { prepared, type Db } from './client';
import { idempotencyKeys } from './schema';

/** How long a key is remembered (the contract says 24 hours). */
export const idempotencyRetentionMs = 24 * 60 * 60 * 1000;

export interface StoredResponse {
  status: number;
  body: unknown;
}

/** JSON with object keys sorted at every level, so equal bodies hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export const requestHashOf = (body: unknown) => createHash('sha256').update(canonicalJson(body), 'utf8').digest('hex');

export function createIdempotencyRepository(db: Db) {
  const p = sql.placeholder;
  const byKey = prepared(() =>
    db
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.accountId, p('accountId')), eq(idempotencyKeys.key, p('key'))))
      .prepare(),
  );
  const insert = prepared(() =>
    db
      .insert(idempotencyKeys)
      .values({
        accountId: p('accountId'),
        key: p('key'),
        requestHash: p('requestHash'),
        responseStatus: p('responseStatus'),
        responseBody: p('responseBody'),
        createdAt: p('createdAt'),
      })
      .prepare(),
  );
  const purge = prepared(() => db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, p('cutoff'))).prepare());

  return {
    /** The live record for this account and key, or null (expired records are gone). */
    find(accountId: number, key: string): { requestHash: string; response: StoredResponse } | null {
      const row = byKey().get({ accountId, key });
      if (!row) return null;
      return { requestHash: row.requestHash, response: { status: row.responseStatus, body: JSON.parse(row.responseBody) } };
    },

    save(accountId: number, key: string, requestHash: string, response: StoredResponse, now: Date): void {
      insert().run({
        accountId,
        key,
        requestHash,
        responseStatus: response.status,
        responseBody: JSON.stringify(response.body),
        createdAt: now.toISOString(),
      });
    },

    /** Forgets keys older than the retention period (an index range on created_at). */
    purgeExpired(now: Date): void {
      const cutoff = new Date(now.getTime() - idempotencyRetentionMs).toISOString();
      purge().run({ cutoff });
    },
  };
}
