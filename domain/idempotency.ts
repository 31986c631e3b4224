// Idempotency-Key, in one place: look up the key, compare the request, run the work, store
// its outcome, all in the caller's one transaction, and say whether it was a replay. The
// HTTP layer alone turns that into headers and an Error body.
import { createHash } from 'node:crypto';
import { DomainError, type Outcome } from './errors';
import type { Queries } from './storage';

/** How long a key is remembered (openapi.yaml, info: x-limits.idempotencyKeySeconds). */
export const idempotencyRetentionMs = 24 * 60 * 60 * 1000;

/** JSON with object keys sorted at every level, so equal bodies hash equally. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const requestHashOf = (request: unknown) => createHash('sha256').update(canonicalJson(request), 'utf8').digest('hex');

/**
 * Runs `work` once per (account, key): the first outcome, a refusal included, is stored
 * with a hash of `request` and replayed for the same request; another request with the
 * key is refused with `idempotency_key_reused`. `work` must refuse before it writes (a
 * refusal is stored, so its transaction commits).
 */
export async function idempotent<T>(
  tx: Queries,
  scope: { accountId: number; key: string; request: unknown; now: Date },
  work: () => Promise<T>,
): Promise<{ outcome: Outcome<T>; replayed: boolean }> {
  const { accountId, key, now } = scope;
  const requestHash = requestHashOf(scope.request);
  await tx.lockIdempotencyKey(accountId, key);
  const notBefore = new Date(now.getTime() - idempotencyRetentionMs).toISOString();
  const stored = await tx.findIdempotency(accountId, key, notBefore);
  if (stored) {
    if (stored.requestHash !== requestHash) {
      throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was already used with a different body');
    }
    return { outcome: JSON.parse(stored.outcome) as Outcome<T>, replayed: true };
  }
  let outcome: Outcome<T>;
  try {
    outcome = { ok: true, value: await work() };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    outcome = { ok: false, error: { code: error.code, message: error.message } };
  }
  await tx.saveIdempotency(accountId, key, { requestHash, outcome: JSON.stringify(outcome) }, now.toISOString());
  return { outcome, replayed: false };
}

/** Forgets expired keys; the service's periodic work calls it (server/delivery-worker.ts). */
export function purgeExpiredKeys(tx: Pick<Queries, 'purgeIdempotency'>, now: Date) {
  return tx.purgeIdempotency(new Date(now.getTime() - idempotencyRetentionMs).toISOString());
}
