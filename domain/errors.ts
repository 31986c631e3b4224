// The error type of the store rules, below every layer: storage and domain/ raise it with a
// code of the contract's Error.code enum and a message; only server/errors.ts knows which
// HTTP status a code becomes.
import type { components } from '../generated/openapi';

export type ErrorCode = components['schemas']['Error']['code'];

/** The codes a store rule may refuse with. */
export type DomainCode = Extract<
  ErrorCode,
  | 'not_found'
  | 'conflict'
  | 'pet_not_found'
  | 'category_not_found'
  | 'pet_not_available'
  | 'insufficient_stock'
  | 'pet_has_open_orders'
  | 'category_in_use'
  | 'order_completed'
  | 'idempotency_key_reused'
  | 'api_key_limit_reached'
  | 'message_queue_full'
>;

export class DomainError extends Error {
  constructor(
    readonly code: DomainCode,
    message: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** A rule's answer that may be stored and replayed (domain/idempotency.ts). */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: { code: DomainCode; message: string } };

/**
 * The store cannot do this now: `unavailable` when the database does not answer,
 * `storage_unavailable` when a write could not be made durable (a full disk, an I/O
 * error). Raised by db/ for either engine, to be retried after `retryAfterSeconds`. After
 * `storage_unavailable` nothing was stored; after `unavailable` a transaction whose
 * connection broke during its COMMIT may have been (its outcome is unknown).
 */
export class StorageUnavailable extends Error {
  constructor(
    readonly code: Extract<ErrorCode, 'unavailable' | 'storage_unavailable'>,
    message: string,
    readonly retryAfterSeconds: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StorageUnavailable';
  }
}
