// createApp builds the Express app and never listens: tests drive it in process,
// server/main.ts serves it. A request flows: request id -> rate limit -> body ->
// express-openapi-validator (route, security, schema) -> handler -> error mapper.
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
import { createLogger, type Logger } from './log';
import { registerOperations, type AppContext, type HandlerTable } from './operations';
import { rateLimiter } from './rate-limit';
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
}

export function createApp({ db, config, spec = loadSpec(), log, handlers }: AppOptions): Express {
  const logger = log ?? createLogger(config.logLevel);
  const repos = createRepositories(db);
  const ctx: AppContext = { db, repos, config, log: logger };
  const operations = operationsOf(spec);

  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);

  app.use(requestId);
  // First, so that every answer of a deprecated operation says so, a 401 or 429 included.
  app.use(deprecationHeaders(operations));
  // HEAD is GET without a body (RFC 9110); Node drops the body because the response was
  // created for a HEAD request, so the GET operation can serve it.
  app.use((req, _res, next) => {
    if (req.method === 'HEAD') req.method = 'GET';
    next();
  });
  app.use(rateLimiter(config.rateLimitPerMinute));
  app.use(specRouter(spec));
  // Before the validator, which answers 404 for any path the spec does not declare.
  app.use(createDocsRouter(spec));
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
  registerOperations(app, operations, { ...defaultHandlers, ...handlers } as never, ctx);
  app.use((req, _res, next) => next(new ApiError('not_found', `Nothing is at ${req.method} ${req.path}`, 404)));
  app.use(errorMapper(logger));
  return app;
}
