// createApp builds the Express app and never listens: tests drive it in process,
// server/main.ts serves it (server/http-server.ts). A request flows: request id ->
// per-address rate limit -> access log -> failed-login limit -> body ->
// express-openapi-validator (route, security, schema) -> per-account rate limit ->
// handler -> error mapper.
import express, { type Express, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Db } from '../db/client';
import { createRepositories } from '../db/repositories';
import { handlers as defaultHandlers } from '../handlers';
import { bodyReader, isStorableDateTime } from './body';
import { createDocsRouter } from './docs';
import type { Config } from './config';
import { deprecationHeaders } from './deprecation';
import { ApiError, errorMapper } from './errors';
import type { Lifecycle } from './http-server';
import { accessLog, createLogger, type Logger } from './log';
import { canonicalIntegers } from './params';
import { registerOperations, type AppContext, type HandlerTable } from './operations';
import { createRateLimiters, type RateLimitStoreFactory } from './rate-limit';
import { requestId } from './request-id';
import { createSecurityHandlers } from './security';
import { loadSpec, operationsOf, specRouter, type OpenApiDocument } from './spec';

export interface AppOptions {
  db: Db;
  config: Config;
  /** The contract to serve; openapi.yaml unless a test passes a variant. */
  spec?: OpenApiDocument;
  log?: Logger;
  /** Replaces handlers by operationId (tests use it to make one throw). */
  handlers?: Partial<HandlerTable>;
  /** Where rate-limit counters live; in this process's memory unless given. */
  rateLimitStores?: RateLimitStoreFactory;
  /** Set by the HTTP server once the service is stopping. */
  lifecycle?: Lifecycle;
}

export function createApp({ db, config, spec = loadSpec(), log, handlers, rateLimitStores, lifecycle }: AppOptions): Express {
  const logger = log ?? createLogger(config.logLevel);
  const repos = createRepositories(db);
  const ctx: AppContext = { db, repos, config, log: logger };
  const operations = operationsOf(spec);

  const limits = createRateLimiters(config, logger, rateLimitStores);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  // Exact routing: /PETS and /pets/ are not /pets (the validator reads these settings too).
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  app.use(requestId);
  // The API's GETs are not conditional (openapi.yaml documents no ETag and no 304), so
  // Express must not answer 304 to a bare `If-None-Match: *`; only /docs serves files
  // with validators.
  app.use((req, _res, next) => {
    if (!req.path.startsWith('/docs/')) {
      delete req.headers['if-none-match'];
      delete req.headers['if-modified-since'];
    }
    next();
  });
  // First, so that every answer of a deprecated operation says so, a 401 or 429 included.
  app.use(deprecationHeaders(operations));
  // HEAD is GET without a body (RFC 9110); Node drops the body because the response was
  // created for a HEAD request, so the GET operation can serve it.
  app.use((req, _res, next) => {
    if (req.method === 'HEAD') req.method = 'GET';
    next();
  });
  // A stopping service says so to the load balancer and lets each connection go.
  app.use((req, res, next) => {
    if (!lifecycle?.draining) return next();
    res.setHeader('Connection', 'close');
    if (req.path === '/readyz') return next(new ApiError('unavailable', 'The service is shutting down', 503));
    next();
  });
  app.use(limits.perAddress);
  app.use(accessLog(logger));
  app.use(limits.logins);
  app.use(specRouter(spec));
  // Before the validator, which answers 404 for any path the spec does not declare.
  app.use(createDocsRouter(spec));
  app.use(canonicalIntegers(spec));
  app.use(bodyReader(config.bodyLimitBytes));
  const validator = OpenApiValidator.middleware({
    // The validator annotates the document it is given; keep ours pristine.
    apiSpec: structuredClone(spec) as never,
    validateApiSpec: true,
    validateRequests: { allowUnknownQueryParameters: false, removeAdditional: false },
    validateResponses: config.validateResponses ? { removeAdditional: false } : false,
    validateFormats: true,
    ajvFormats: { mode: 'full' },
    formats: { 'date-time': { type: 'string', validate: isStorableDateTime } },
    validateSecurity: { handlers: createSecurityHandlers(repos) },
    ignoreUndocumented: false,
    fileUploader: false,
  });
  // The validator's handler type predates Express 5's typings; at run time they match.
  app.use(validator as unknown as RequestHandler[]);
  app.use(limits.perAccount);
  registerOperations(app, operations, { ...defaultHandlers, ...handlers } as never, ctx);
  app.use((req, _res, next) => next(new ApiError('not_found', `Nothing is at ${req.method} ${req.path}`, 404)));
  app.use(errorMapper(logger));
  return app;
}
