// The typed bridge from generated/ to handlers: each operation's input and result types
// come from openapi-typescript's `operations`, and routes come from the spec's
// operationIds, so a missing or stray handler fails to compile and fails start-up.
import type { Request, RequestHandler, Response } from 'express';
import type { operations } from '../generated/openapi';
import { operationTable, type OperationId, type OperationsByTag } from '../generated/operations';
import type { OperationEntry } from './spec';
import type { Config } from './config';
import type { Logger } from './log';
import type { PasswordHashing } from './passwords';
import type { Store } from '../domain/store';
import type { Principal } from '../domain/types';
import { principalOf } from './security';
import { ApiError } from '../domain/errors';

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

/** Everything a handler may use besides its input. */
export interface AppContext {
  /** The store rules and reads (domain/store.ts); handlers never see the storage under it. */
  repos: Store;
  /** Every password is hashed and checked here, under its bound on hashes at once (server/passwords.ts). */
  passwords: PasswordHashing;
  config: Config;
  log: Logger;
}

export type Handler<K extends OperationId> = (input: Input<K>, ctx: AppContext) => Result<K> | Promise<Result<K>>;

/** A handler module implements every operation of its tag, and nothing else. */
export type HandlerModule<T extends keyof OperationsByTag> = { [K in OperationsByTag[T]]: Handler<K> };

export type HandlerTable = { [K in OperationId]: Handler<K> };

const notImplementedMarker = Symbol('notImplemented');

/** Routed but not served yet: answers 501 in the Error shape. */
export function notImplemented<K extends OperationId>(id: K): Handler<K> {
  const handler: Handler<K> = () => {
    throw new ApiError('not_implemented', `${id} is in the contract but not implemented yet`, 501);
  };
  return Object.assign(handler, { [notImplementedMarker]: true });
}

export const isNotImplemented = (handler: unknown) => typeof handler === 'function' && notImplementedMarker in handler;

/**
 * The middleware that serves each operation, by operationId, for the end of its chain
 * (server/app.ts). `operations` is the spec's operation table (`operationsOf` of the
 * document being served); start-up fails when it and the handler table disagree:
 * openapi.yaml edited without `npm run generate`, or a handler left behind by an
 * operation removed from the spec. Stubs are served (501) and logged.
 */
export function operationHandlers(
  operations: Record<string, OperationEntry>,
  handlers: Record<string, Handler<never> | undefined>,
  ctx: AppContext,
): (id: string) => RequestHandler {
  const generated = operationTable as Record<string, OperationEntry>;
  const byId = new Map<string, RequestHandler>();
  for (const [id, { method, path }] of Object.entries(operations)) {
    const handler = handlers[id] as Handler<OperationId> | undefined;
    if (!handler || generated[id]?.method !== method || generated[id]?.path !== path) {
      throw new Error(
        `Operation ${id} (${method.toUpperCase()} ${path}) has no matching handler: run \`npm run generate\` and implement it`,
      );
    }
    byId.set(id, async (req: Request, res: Response) => {
      // Each Express layer resets req.params; the validator's are the coerced ones.
      req.params = req.openapi?.pathParams ?? {};
      send(res, await handler(inputOf(req), ctx));
    });
  }
  const stray = Object.keys(handlers).filter((id) => !operations[id]);
  if (stray.length > 0) {
    throw new Error(
      `Handlers with no operation in openapi.yaml: ${stray.join(', ')}. Delete them (the operation was removed from the spec) or restore the operation`,
    );
  }
  const stubs = Object.keys(operations).filter((id) => isNotImplemented(handlers[id]));
  if (stubs.length > 0) ctx.log.info({ operations: stubs }, 'operations not implemented yet (they answer 501)');
  return (id) => byId.get(id) as RequestHandler;
}

/**
 * A handler's input. The caller is a getter on the class, found only when a handler asks
 * (an operation without security has none). Not a getter in an object literal: V8 gives
 * such a literal a hidden class of its own on every evaluation, kept in the old
 * generation, and its getter's closure then held the whole request (headers, response,
 * validator state) through every young-generation collection: under load a fifth of all
 * a request allocated was promoted, and those collections took most of the p99 (README
 * "Performance").
 */
class HandlerInput {
  readonly #req: Request;
  readonly params: unknown;
  readonly query: unknown;
  readonly headers: unknown;
  readonly body: unknown;
  readonly url: string;

  constructor(req: Request) {
    this.#req = req;
    this.params = req.params;
    this.query = req.query;
    // Header parameters are typed with the spec's spelling (`Idempotency-Key`); Node
    // lower-cases names, so look them up without regard to case.
    this.headers = new Proxy(req.headers, {
      get: (headers, name) => (typeof name === 'string' ? headers[name.toLowerCase()] : undefined),
    });
    this.body = req.body;
    this.url = req.originalUrl;
  }

  get principal(): Principal {
    return principalOf(this.#req);
  }
}

const inputOf = (req: Request) => new HandlerInput(req) as unknown as Input<OperationId>;

function send(res: Response, result: { status: number; body?: unknown; headers?: Record<string, string> }): void {
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  res.status(result.status);
  if (result.body === undefined) res.end();
  else res.json(result.body);
}
