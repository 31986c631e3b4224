// The errors, below every layer. Storage and the store rules raise DomainError and
// StorageUnavailable with a code of the contract's Error.code enum and a message; ApiError
// is the contract's Error itself (code, message, status), which handlers and the request
// pipeline throw, and which the one error mapper (server/pipeline/errors.ts) sends.
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

/** The status the contract answers each refusal of a store rule with (openapi.yaml documents each pair). */
const domainStatus: Record<DomainCode, number> = {
  not_found: 404,
  conflict: 409,
  pet_not_found: 422,
  category_not_found: 422,
  pet_not_available: 409,
  insufficient_stock: 409,
  pet_has_open_orders: 409,
  category_in_use: 409,
  order_completed: 409,
  idempotency_key_reused: 409,
  api_key_limit_reached: 409,
  // The queue drains as the worker delivers: the same request succeeds later (Retry-After).
  message_queue_full: 429,
};

/**
 * The 5xx codes that are designed answers, not faults (shedding under overload, a stub, not
 * ready or no database): the error mapper logs none of them (server/pipeline/errors.ts).
 */
export const designedServerErrors: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['overloaded', 'not_implemented', 'unavailable']);

/** The contract's Error, thrown: its code, message and status, and the headers its answer carries. */
export class ApiError extends Error {
  /** Made from a refusal of the store (apiErrorOf, unavailable). */
  readonly byStore: boolean;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number,
    readonly headers: Record<string, string> = {},
    /** What went wrong underneath (logged, never sent). */
    options?: { cause?: unknown; byStore?: boolean },
  ) {
    // A refusal (4xx, or a designed 5xx) is an answer, not a fault: nothing reads its stack,
    // and capturing one was much of what a refused request cost (docs/performance.md, "The
    // request path"). Any other 5xx keeps its stack for the log.
    const stackTraceLimit = Error.stackTraceLimit;
    if (status < 500 || designedServerErrors.has(code)) Error.stackTraceLimit = 0;
    super(message, options);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'ApiError';
    this.byStore = options?.byStore ?? false;
  }
}

/** A store rule's refusal as the contract's error, with any headers the answer carries. */
export const apiErrorOf = (error: { code: DomainCode; message: string }, headers: Record<string, string> = {}) =>
  new ApiError(error.code, error.message, domainStatus[error.code], headers, { byStore: true });

/** The store cannot do this now: 503 with the Retry-After it asks for. */
export const unavailable = (err: StorageUnavailable) =>
  new ApiError(err.code, err.message, 503, { 'Retry-After': String(err.retryAfterSeconds) }, { cause: err.cause ?? err, byStore: true });

export const notFound = (what: string, id: number | string) => new ApiError('not_found', `${what} ${id} was not found`, 404);
export const validationFailed = (message: string) => new ApiError('validation_failed', message, 400);
export const unauthorized = (message: string) => new ApiError('unauthorized', message, 401);
export const forbidden = () => new ApiError('forbidden', 'This operation is for admins only', 403);
