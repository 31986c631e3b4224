// The handler contract: each operation's input and result types come from
// openapi-typescript's `operations`, and a tag's module must implement exactly its
// operations (generated/operations.ts), so a missing or stray handler fails to compile.
// server/pipeline/operations.ts serves them by operationId and refuses a stray one at start-up.
import type { Logger } from 'pino';
import type { operations } from '../generated/openapi';
import type { OperationId, OperationsByTag } from '../generated/operations';
import { ApiError } from '../domain/errors';
import type { Store } from '../domain/store';
import type { Principal } from '../domain/types';

type Op<K extends OperationId> = operations[K];
type OrEmpty<T> = [T] extends [never] ? Record<string, never> : T;
type ParamsIn<K extends OperationId, In extends 'path' | 'query' | 'header'> = OrEmpty<NonNullable<Op<K>['parameters'][In]>>;
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type RequestBody<K extends OperationId> = undefined extends Op<K>['requestBody']
  ? JsonOf<NonNullable<Op<K>['requestBody']>> | undefined
  : JsonOf<Op<K>['requestBody']>;

export interface Input<K extends OperationId> {
  params: ParamsIn<K, 'path'>;
  query: ParamsIn<K, 'query'>;
  headers: ParamsIn<K, 'header'>;
  body: RequestBody<K>;
  /** The authenticated caller; only operations with security have one. */
  readonly principal: Principal;
  /** The request path and query as sent, for building Link headers. */
  url: string;
}

type Responses<K extends OperationId> = Op<K>['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 204>;

/** What a handler returns: a documented success status and that status's body. */
export type Result<K extends OperationId> = {
  [S in SuccessStatus<K>]: [JsonOf<Responses<K>[S]>] extends [never]
    ? { status: S; headers?: Record<string, string> }
    : { status: S; body: JsonOf<Responses<K>[S]>; headers?: Record<string, string> };
}[SuccessStatus<K>];

/** How a handler hashes a new password (server/security/passwords.ts: on threads of their own, a bound on hashes at once). */
export interface PasswordHasher {
  hash(password: string): Promise<string>;
}

/** Everything a handler may use besides its input. */
export interface AppContext {
  /** The store rules and reads (domain/store.ts); handlers never see the storage under it. */
  repos: Store;
  passwords: PasswordHasher;
  /** The settings handlers read (server/config.ts has them all). */
  config: { messageDeliveryDelayMs: number };
  log: Logger;
}

export type Handler<K extends OperationId> = (input: Input<K>, ctx: AppContext) => Result<K> | Promise<Result<K>>;

/** A handler module implements every operation of its tag, and nothing else. */
export type HandlerModule<T extends keyof OperationsByTag> = { [K in OperationsByTag[T]]: Handler<K> };

export type HandlerTable = { [K in OperationId]: Handler<K> };

const notImplementedMarker = Symbol('notImplemented');

/** Routed but not served yet: answers 501 in the Error shape (with MOCK_UNIMPLEMENTED, server/pipeline/mock.ts answers in its place). */
export function notImplemented<K extends OperationId>(id: K): Handler<K> {
  const handler: Handler<K> = () => {
    throw new ApiError('not_implemented', `${id} is in the contract but not implemented yet`, 501);
  };
  return Object.assign(handler, { [notImplementedMarker]: true });
}

export const isNotImplemented = (handler: unknown) => typeof handler === 'function' && notImplementedMarker in handler;
