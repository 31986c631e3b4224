// Idempotency-Key, in one place: look up the key, compare the request, run the work, store
// its outcome, all in the caller's one transaction, and say whether it was a replay. The
// HTTP layer alone turns that into headers and an Error body.
import { createHash } from 'node:crypto';
import { DomainError, type Outcome } from './errors';
import type { KeptIdempotency, Queries, StoredIdempotency } from './storage';

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

/** What `work` answers when the key had a record, so that it did nothing. */
export const kept = 'kept';

/**
 * Runs `work` once per (account, key): the first outcome, a refusal included, is stored
 * with a hash of `request` and replayed for the same request; another request with the
 * key is refused with `idempotency_key_reused`. `work` must refuse before it writes (a
 * refusal is stored, so its transaction commits), and must do nothing, answering `kept`,
 * when the key has a record from `unlessKept.notBefore` on: it is started beside the key's
 * lock and lookup, not after them, so that on PostgreSQL the three go in one round trip
 * (a pipelined connection runs them in the order sent, the lock first).
 */
export async function idempotent<T>(
  tx: Queries,
  scope: { accountId: number; key: string; request: unknown; now: Date },
  work: (unlessKept: KeptIdempotency) => Promise<T | typeof kept>,
): Promise<{ outcome: Outcome<T>; replayed: boolean }> {
  const { accountId, key, now } = scope;
  const requestHash = requestHashOf(scope.request);
  const notBefore = new Date(now.getTime() - idempotencyRetentionMs).toISOString();
  const [locked, found, tried] = await Promise.allSettled([
    tx.lockIdempotencyKey(accountId, key),
    tx.findIdempotency(accountId, key, notBefore),
    outcomeOf(() => work({ key, notBefore })),
  ]);
  for (const step of [locked, found, tried]) if (step.status === 'rejected') throw step.reason;
  const stored = (found as PromiseFulfilledResult<StoredIdempotency | null>).value;
  const outcome = (tried as PromiseFulfilledResult<Outcome<T | typeof kept>>).value;
  if (stored) {
    if (stored.requestHash !== requestHash) {
      throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was already used with a different body');
    }
    return { outcome: JSON.parse(stored.outcome) as Outcome<T>, replayed: true };
  }
  // Found no record under the key's lock, yet the work saw one: the storage broke its word.
  if (outcome.ok && outcome.value === kept) throw new Error('The Idempotency-Key record changed under its lock');
  await tx.saveIdempotency(accountId, key, { requestHash, outcome: JSON.stringify(outcome) }, now.toISOString());
  return { outcome: outcome as Outcome<T>, replayed: false };
}

/** The work's value, or the refusal it threw as an outcome; any other throw as it is. */
async function outcomeOf<T>(work: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return { ok: false, error: { code: error.code, message: error.message } };
  }
}

/** Forgets expired keys; the service's periodic work calls it (server/delivery-worker.ts). */
export function purgeExpiredKeys(tx: Pick<Queries, 'purgeIdempotency'>, now: Date) {
  return tx.purgeIdempotency(new Date(now.getTime() - idempotencyRetentionMs).toISOString());
}
