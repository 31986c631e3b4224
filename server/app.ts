// createApp builds the Express app and never listens: tests drive it in process,
// server/main.ts serves it (server/http/server.ts). A request flows: (its metrics and
// span, when on) -> request id -> a declared body over the limit -> route (once) ->
// (an overloaded service sheds; the probes, the contract and /docs answer here) ->
// headers for browsers -> 404/405, or the operation's own chain, in the order of checks
// (openapi.yaml, info: "Order of checks"): deprecation -> per-address limit -> access
// log -> sunset -> sign-up or failed-login limit -> express-openapi-validator's match and
// security (401, 403) -> per-account limit -> body -> integers -> the validator's request
// and response checks -> handler; then the error mapper.
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Logger } from 'pino';
import type { Db } from '../db/client';
import { createSqliteStorage } from '../db/sqlite-storage';
import type { Storage } from '../domain/storage';
import { createStore } from '../domain/store';
import { handlers as defaultHandlers } from '../handlers';
import type { AppContext, HandlerTable } from '../handlers/types';
import { bodyReader, declaredTooLarge } from './pipeline/body';
import { installJsonSender } from './pipeline/json';
import { browserHeaders } from './pipeline/browser-headers';
import { createDocsRouter } from './pages/docs';
import type { Config } from './config';
import { createDeprecatedCallLog, type DeprecatedCallLog } from './deprecation/call-log';
import { createDeprecation } from './deprecation/headers';
import { ApiError } from '../domain/errors';
import { errorMapper } from './pipeline/errors';
import { createLifecycle, type Lifecycle } from './http/server';
import { accessLog, createLogger } from './observability/log';
import type { Metrics } from './observability/metrics';
import { canonicalIntegers } from './pipeline/params';
import { createPathTable } from './pipeline/path-table';
import { schemaSettings } from './pipeline/schemas';
import { operationHandlers } from './pipeline/operations';
import { shedWhenOverloaded, type OverloadMonitor } from './http/overload';
import { createRateLimiters, memoryStores, type RateLimitStoreFactory } from './security/rate-limit';
import { createRateLimitStore } from './security/rate-limit-store';
import { requestId } from './pipeline/request-id';
import { probes } from './pages/probes';
import { compressAnswers } from './pipeline/compress';
import { isWarmUp, type WarmUpState } from './pipeline/warm-up';
import { createPasswordHashing, type PasswordHashing } from './security/passwords';
import { createSecurityHandlers } from './security/auth';
import type { Tracing } from './observability/tracing';
import { loadSpecYaml, specRouter } from './pages/openapi';
import { dereferenced, loadSpec, operationsOf, type OpenApiDocument } from './spec';

// The mock and openapi-sampler are loaded only when MOCK_UNIMPLEMENTED is on.
type MockModule = typeof import('./pipeline/mock');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand, as said above
const mockModule = (): MockModule => require('./pipeline/mock') as MockModule;

export interface AppOptions {
  /** The database behind the storage port (db/open.ts). */
  storage?: Storage;
  /** A SQLite database, for callers that open one directly; wrapped in its storage. */
  db?: Db;
  config: Config;
  /** The contract to serve; openapi.yaml unless a test passes a variant. */
  spec?: OpenApiDocument;
  log?: Logger;
  /** Replaces handlers by operationId (tests use it to make one throw). */
  handlers?: Partial<HandlerTable>;
  /** Where rate-limit counters live; in this process's memory unless given. */
  rateLimitStores?: RateLimitStoreFactory;
  /** Shared with the HTTP server: whether the service is stopping, and the work under way. */
  lifecycle?: Lifecycle;
  /** The clock, ms since the epoch (deprecation sunsets); tests move it. */
  now?: () => number;
  /** Where calls of deprecated operations are counted; main.ts flushes it at shutdown. */
  deprecatedCalls?: DeprecatedCallLog;
  /** The event-loop monitor (server/http/overload.ts): while it says overloaded, requests are shed. */
  overload?: OverloadMonitor | null;
  /** Prometheus metrics (server/observability/metrics.ts); none unless given. */
  metrics?: Metrics;
  /** OpenTelemetry spans for each request and its storage calls (server/observability/tracing.ts); none unless given. */
  tracing?: Tracing;
  /** Password hashing and its bound on hashes at once; made from config.passwordHashing unless given. */
  passwords?: PasswordHashing;
  /** While `pending`, /readyz answers 503: main.ts warms the app up (server/pipeline/warm-up.ts). */
  warmUp?: WarmUpState;
}

export function createApp({
  storage: given,
  db,
  config,
  spec: givenSpec,
  log,
  handlers,
  rateLimitStores,
  lifecycle = createLifecycle(),
  now = Date.now,
  deprecatedCalls,
  overload,
  metrics,
  tracing,
  warmUp,
  passwords = createPasswordHashing(config.passwordHashing),
}: AppOptions): Express {
  const spec = givenSpec ?? loadSpec();
  const logger = log ?? createLogger(config.logLevel);
  const opened = given ?? (db ? createSqliteStorage(db) : undefined);
  if (!opened) throw new Error('createApp needs a storage (or a SQLite db)');
  // Timed outermost, so that a transaction's time includes its spans' (when tracing).
  const traced = tracing ? tracing.storage(opened) : opened;
  const storage = metrics ? metrics.storage(traced) : traced;
  const repos = createStore(storage, config.bounds, metrics?.events);
  const ctx: AppContext = { repos, passwords, config, log: logger };
  const operations = operationsOf(spec);

  // Counters live where every process serving this database sees them: in the database
  // on PostgreSQL or with WEB_CONCURRENCY workers; one process alone keeps them in memory,
  // which spares the default path a write per request.
  const shared = storage.engine === 'postgres' || config.webConcurrency > 1;
  const stores = rateLimitStores ?? (shared ? (name: string) => createRateLimitStore(storage, name) : memoryStores);
  const limits = createRateLimiters(config, logger, stores, metrics?.rateLimited);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // res.json in one write, the checks res.send would repeat on each answer settled here.
  installJsonSender(app.response);
  app.set('trust proxy', config.trustProxy);
  // Exact routing: /PETS and /pets/ are not /pets (the validator reads these settings too).
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  // One pass for what every request needs first.
  const first: RequestHandler = (req, res, next) => {
    requestId(req, res);
    // No browser may guess a type other than the Content-Type (an error echoing input as HTML).
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // The API's GETs are not conditional (openapi.yaml documents no ETag and no 304), so
    // Express must not answer 304 to a bare `If-None-Match: *`; only the pages (/docs and
    // the contract, server/pages/) serve validators.
    if (!req.path.startsWith('/docs/') && !req.path.startsWith('/openapi.')) {
      delete req.headers['if-none-match'];
      delete req.headers['if-modified-since'];
    }
    // HEAD is GET without a body (RFC 9110); Node drops the body because the response was
    // created for a HEAD request, so the GET operation can serve it. The probes and the
    // deprecation headers below treat both alike.
    if (req.method === 'HEAD') req.method = 'GET';
    // A stopping service says so to the load balancer and lets each connection go.
    if (lifecycle.draining) {
      res.setHeader('Connection', 'close');
      if (req.path === '/readyz') return next(new ApiError('unavailable', 'The service is shutting down', 503));
    }
    next();
  };
  // The contract and /docs, before routing, which answers 404 for any path the spec does
  // not declare. Their routers are entered only for their own paths.
  const contract = specRouter(spec, givenSpec ? undefined : loadSpecYaml);
  const docs = createDocsRouter(spec);
  const contractAndDocs: RequestHandler = (req, res, next) => {
    const path = req.path;
    if (path === '/openapi.json' || path === '/openapi.yaml') return contract(req, res, next);
    if (path === '/docs' || path === '/docs/') return docs(req, res, next);
    if (path.startsWith('/docs/')) return docs(req, res, next);
    next();
  };
  // Routing, once: the spec's path and the operation the method names there. A path the
  // spec does not have is a 404 and a method it does not declare a 405 (dispatch, below),
  // after the headers for browsers, so that a page on an allowed origin can read them.
  const lookup = createPathTable(operations);
  const route: RequestHandler = (req, _res, next) => {
    const found = lookup(req.path);
    if (found) {
      req.specPath = found.specPath;
      // The validator's match tries this route first (the carried patch, openapi.metadata.js).
      req.openApiRouteHint = found.specPath.path;
      req.pathValues = found.values;
      req.operation = found.specPath.operations.get(req.method.toLowerCase());
    }
    next();
  };
  // The spec with its references inlined (server/spec.ts), for the checks made from it.
  const inlined = dereferenced(spec);
  const validator = OpenApiValidator.middleware({
    // The validator annotates a deep copy of its own; ours stays as it is.
    apiSpec: inlined as never,
    // Checked by `npm run generate` (scripts/spec-check.ts), not at each start.
    validateApiSpec: false,
    // The spec is one self-contained document: its references are inlined once at start,
    // above, rather than bundled, which walks every $ref and was most of the validator's
    // start-up. 'none' (our patch): no parser for a document with no $ref left.
    $refParser: { mode: 'none' },
    // What a value must be: formats, unknown query parameters (server/pipeline/schemas.ts,
    // where the example check and the mock take the same settings).
    ...schemaSettings(config.validateResponses),
    validateSecurity: { handlers: createSecurityHandlers(repos, passwords) },
    ignoreUndocumented: false,
    fileUploader: false,
  }) as unknown as RequestHandler[];
  // The validator's steps, by the names it gives them, so that ours go between them in
  // the one order of checks (openapi.yaml, info: "Order of checks").
  const step = (name: string): RequestHandler => {
    const found = validator.find((m) => m.name === name);
    if (!found) throw new Error(`express-openapi-validator has no ${name} step: the order of checks cannot be kept`);
    return found;
  };
  const matchOperation = [step('pathParamsMiddleware'), step('metadataMiddleware')];
  // It returns its promise, settled only once its next() has run on to a later step's promise:
  // so inOneLayer counts the key or password check for the drain (tests/shutdown.test.ts).
  const authenticate = step('securityMiddleware');
  const validate = [step('requestMiddleware'), ...(config.validateResponses ? [step('responseMiddleware')] : [])];

  // Each operation's own chain, put together here: only what the operation needs (a body
  // reader where it takes a body, the login limiter where it takes a password), in the
  // order of checks.
  // Stubs answer from the spec when MOCK_UNIMPLEMENTED is on, chosen here per operation.
  const mock = config.mockUnimplemented ? mockModule().createMock(inlined) : undefined;
  const table = { ...defaultHandlers, ...handlers };
  // Not ready while warming up: the balancer sends nothing yet to a cold process.
  if (warmUp) {
    // The validator builds its request and response checkers (their Ajv instances) at its
    // first request; given a request it matched to no operation, a step builds them and
    // passes it by. The warm-up runs each as a step of its own, before its first request.
    warmUp.setUp = validate.map(
      (check) => () =>
        new Promise<void>((resolve, reject) => {
          void check({} as Request, {} as Response, (err?: unknown) =>
            err === undefined
              ? resolve()
              : reject(err instanceof Error ? err : new Error('The validator could not set up', { cause: err })),
          );
        }),
    );
    const readiness = table.getReadiness;
    table.getReadiness = (input, c) => {
      if (warmUp.pending) throw new ApiError('unavailable', 'The service is warming up; ready in a moment', 503);
      return readiness(input, c);
    };
  }
  const handlerOf = operationHandlers(operations, table as never, ctx, mock);
  const deprecationOf = createDeprecation(operations, { now, calls: deprecatedCalls ?? createDeprecatedCallLog(storage, logger) });
  const accessLine = accessLog(logger);
  const body = bodyReader(config.bodyLimitBytes);
  const chains = new Map<string, RequestHandler>();
  const warmChains = new Map<string, RequestHandler>();
  const warmUpPrincipal: RequestHandler = (req, _res, next) => {
    req.principal = { accountId: 0, role: 'admin' };
    next();
  };
  for (const [id, entry] of Object.entries(operations)) {
    const op = { ...entry, id };
    const deprecation = deprecationOf(id);
    const integers = canonicalIntegers(op);
    const steps: RequestHandler[] = [
      // First, so that every answer of a deprecated operation says so, a 401 or 429 included.
      ...(deprecation ? [deprecation.headers] : []),
      limits.perAddress,
      accessLine,
      ...(deprecation ? [deprecation.sunset] : []),
      ...(id === 'createAccount' ? [limits.signups] : []),
      ...(op.security === 'basic' ? [limits.logins] : []),
      ...matchOperation,
      authenticate,
      ...(op.security !== 'public' ? [limits.perAccount] : []),
      ...(op.body ? body : []),
      ...(integers ? [integers] : []),
      ...validate,
      handlerOf(id),
    ];
    chains.set(id, inOneLayer(steps, lifecycle));
    // The warm-up's chain: the same steps but those that count, log or authenticate a
    // client (limits, the access line, the deprecated-call count); a principal of no
    // account stands in for the key. Only GETs, which read, are warmed.
    if (op.method === 'get') {
      const warm = steps.filter(
        (s) => s !== limits.perAddress && s !== limits.perAccount && s !== accessLine && s !== deprecation?.headers,
      );
      const at = warm.indexOf(authenticate);
      if (at >= 0) warm[at] = warmUpPrincipal;
      warmChains.set(id, inOneLayer(warm, lifecycle));
    }
  }
  const dispatch: RequestHandler = (req, res, next) => {
    const op = req.operation;
    if (op) return ((isWarmUp(req) ? warmChains : chains).get(op.id) as RequestHandler)(req, res, next);
    if (!req.specPath) return next(new ApiError('not_found', `Nothing is at ${req.method} ${req.path}`, 404));
    const allow = req.specPath.allow;
    next(new ApiError('method_not_allowed', `${req.method} is not allowed on ${req.path}; allowed are ${allow}`, 405, { Allow: allow }));
  };

  app.use(
    inOneLayer(
      [
        ...(metrics ? [unlessWarmUp(metrics.requests(operations))] : []),
        ...(tracing ? [unlessWarmUp(tracing.middleware)] : []),
        first,
        declaredTooLarge(config.bodyLimitBytes),
        route,
        // Before anything costs: while the event loop is behind, only /healthz gets through.
        shedWhenOverloaded(overload),
        probes(inlined, table, ctx, config.validateResponses),
        contractAndDocs,
        compressAnswers(),
        // Before anything may refuse the request, so that refusals carry them; a preflight is answered here.
        browserHeaders(config.corsOrigins),
        dispatch,
      ],
      lifecycle,
    ),
  );
  app.use(errorMapper(logger, metrics?.answered));
  return app;
}

/** `step`, but not for the warm-up's requests (no metrics, no spans of them). */
const unlessWarmUp =
  (step: RequestHandler): RequestHandler =>
  (req, res, next) =>
    isWarmUp(req) ? next() : step(req, res, next);

/**
 * Runs `handlers` one after another inside a single Express layer, as the router would
 * run them as layers of their own: an error passed to `next`, thrown, or rejected by a
 * returned promise skips the rest and goes to the error handlers. The router allocates
 * and matches per layer; with two dozen layers that was a fifth of what a request
 * allocated (docs/performance.md). Every handler here is mounted at `/`, so the
 * router's path trimming has nothing to do for them.
 *
 * A handler whose work outlives its call returns the promise of that work (and calls
 * `next` inside it, if at all): `lifecycle.working` counts those not settled, so that a
 * drain waits for them even once the client has gone (server/http/server.ts). What runs
 * after the layer (not found, the error mapper) is synchronous.
 */
export function inOneLayer(handlers: RequestHandler[], lifecycle: Lifecycle): RequestHandler {
  const settled = () => {
    if (--lifecycle.working === 0) lifecycle.onIdle?.();
  };
  return (req, res, done) => {
    let i = 0;
    // Made on the request's first promise, and shared by the rest.
    let failed: ((e: unknown) => void) | undefined;
    const next = (err?: unknown): void => {
      if (err) return done(err);
      const handler = handlers[i++];
      if (!handler) return done();
      try {
        const result: unknown = handler(req, res, next);
        if (result instanceof Promise) {
          lifecycle.working++;
          failed ??= (e: unknown) => {
            // Settled once the error mapper has answered.
            try {
              next(e ?? new Error('Rejected promise'));
            } finally {
              settled();
            }
          };
          result.then(settled, failed);
        }
      } catch (e) {
        next(e);
      }
    };
    next();
  };
}
