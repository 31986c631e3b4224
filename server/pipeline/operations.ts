// The runner of the handler table: each operation's handler (handlers/types.ts) served as
// the last step of its chain, by operationId. Routes come from the spec's operationIds, so
// a missing or stray handler fails start-up as it fails to compile.
import type { Request, RequestHandler, Response } from 'express';
import { operationTable, type OperationId } from '../../generated/operations';
import type { Principal } from '../../domain/types';
import { isNotImplemented, type AppContext, type Handler, type Input } from '../../handlers/types';
import type { OperationEntry } from '../spec';
import { principalOf } from '../security/auth';
import type { MockAnswers } from './mock';

/**
 * The middleware that serves each operation, by operationId, for the end of its chain
 * (server/app.ts). `operations` is the spec's operation table (`operationsOf` of the
 * document being served); start-up fails when it and the handler table disagree:
 * openapi.yaml edited without `npm run generate`, or a handler left behind by an
 * operation removed from the spec. Stubs are served (501) and logged; with `mock` (MOCK_UNIMPLEMENTED),
 * each stub is replaced here, once, by the mock's answers (server/pipeline/mock.ts).
 */
export function operationHandlers(
  operations: Record<string, OperationEntry>,
  handlers: Record<string, Handler<never> | undefined>,
  ctx: AppContext,
  mock?: MockAnswers,
): (id: string) => RequestHandler {
  const generated = operationTable as Record<string, OperationEntry>;
  const byId = new Map<string, RequestHandler>();
  for (const [id, { method, path }] of Object.entries(operations)) {
    const handler = handlers[id] as Handler<OperationId> | undefined;
    // An operation the generated table lacks is one a test's variant of the spec adds, with its handler.
    const moved = id in generated && (generated[id]?.method !== method || generated[id]?.path !== path);
    if (!handler || moved) {
      throw new Error(
        `Operation ${id} (${method.toUpperCase()} ${path}) has no matching handler: run \`npm run generate\` and implement it`,
      );
    }
    if (mock && isNotImplemented(handler)) {
      byId.set(id, mock(id, method, path));
      continue;
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
  if (mock)
    ctx.log.warn(
      { operations: stubs },
      stubs.length > 0
        ? 'MOCK_UNIMPLEMENTED: operations not implemented yet answer from openapi.yaml (X-Mock)'
        : 'MOCK_UNIMPLEMENTED: every operation is implemented, none is mocked',
    );
  else if (stubs.length > 0) ctx.log.info({ operations: stubs }, 'operations not implemented yet (they answer 501)');
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
