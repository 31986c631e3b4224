// Rate limits that a client cannot dodge by what it writes in its headers:
// - per client address, on every request, before authentication (a made-up Bearer
//   value is not an identity and costs no database lookup beyond this limit);
// - per account, after authentication;
// - failed HTTP Basic logins, per account and per address: past the limit, Basic
//   answers 429 until the window ends. API keys keep working, so a guesser cannot lock
//   a real user out of the keys they already have.
// Every counter lives in a store made by one factory (in memory by default), the seam
// for a store shared between processes.
import type { Request, RequestHandler } from 'express';
import { ipKeyGenerator, MemoryStore, rateLimit, type Options, type Store } from 'express-rate-limit';
import type { Config } from './config';
import { ApiError } from './errors';
import type { Logger } from './log';
import { credentialsOf } from './security';

export type RateLimiterName = 'address' | 'account' | 'login-account' | 'login-address';

/** Makes the store behind one limiter; called once per limiter, with its name. */
export type RateLimitStoreFactory = (name: RateLimiterName) => Store;

export const memoryStores: RateLimitStoreFactory = () => new MemoryStore();

/** Probes must keep answering while a client is being limited. */
const isProbe = (req: Request) => req.path === '/healthz' || req.path === '/readyz';

const addressOf = (req: Request) => ipKeyGenerator(req.ip ?? 'unknown');

function limiter(
  name: RateLimiterName,
  stores: RateLimitStoreFactory,
  log: Logger,
  options: Pick<Options, 'windowMs' | 'limit' | 'keyGenerator' | 'skip'> & Partial<Options>,
): RequestHandler {
  return rateLimit({
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    identifier: name,
    store: stores(name),
    // Without TRUST_PROXY an X-Forwarded-For header is ignored on purpose; the library
    // would otherwise print a warning the first time a client sends one.
    validate: { xForwardedForHeader: false },
    ...options,
    handler: (req, res, next) => {
      const info = (req as Request & { rateLimit?: { used: number; limit: number; resetTime?: Date } }).rateLimit;
      const seconds = Math.max(1, Math.ceil(((info?.resetTime?.getTime() ?? Date.now() + options.windowMs) - Date.now()) / 1000));
      // Logged once per client and window, not once per refused request.
      if (info && info.used === info.limit + 1) log.warn({ limiter: name, address: req.ip }, 'rate limit reached');
      const what = name.startsWith('login') ? 'Too many failed logins' : 'Too many requests';
      next(new ApiError('rate_limited', `${what}; retry in ${seconds} seconds`, 429, { 'Retry-After': String(seconds) }));
    },
  });
}

/**
 * Runs `handlers` only for requests `applies` to, as their own `skip` would, without an
 * async pass through each for every other request (the login limiters skip all but
 * HTTP Basic, which the hot GETs never send).
 */
function onlyFor(applies: (req: Request) => boolean, handlers: RequestHandler[]): RequestHandler {
  return handlers.reduceRight<RequestHandler>(
    (rest, handler) => (req, res, next) => {
      if (!applies(req)) return next();
      // Express 5 would catch a rejected promise of a handler it runs itself; so does this.
      Promise.resolve(handler(req, res, (err?: unknown) => (err === undefined ? rest(req, res, next) : next(err)))).catch(next);
    },
    (_req, _res, next) => next(),
  );
}

export interface RateLimiters {
  /** Every request, before authentication. */
  perAddress: RequestHandler;
  /** HTTP Basic attempts; only failures count. */
  logins: RequestHandler;
  /** Authenticated requests; after the validator's security step. */
  perAccount: RequestHandler;
}

export function createRateLimiters(
  config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitPerAddressPerMinute' | 'loginFailuresPerAccount' | 'loginFailuresPerAddress' | 'loginLockoutMs'>,
  log: Logger,
  stores: RateLimitStoreFactory = memoryStores,
): RateLimiters {
  const isBasic = (req: Request) => credentialsOf(req).scheme === 'basic';
  const login = {
    windowMs: config.loginLockoutMs,
    // Only a refused password counts: a 400 about the body is no guess.
    skipSuccessfulRequests: true,
    requestWasSuccessful: (_req: Request, res: { statusCode: number }) => res.statusCode !== 401,
    skip: (req: Request) => !isBasic(req),
  };
  return {
    perAddress: limiter('address', stores, log, {
      windowMs: 60_000,
      limit: config.rateLimitPerAddressPerMinute,
      skip: isProbe,
      keyGenerator: (req) => `ip:${addressOf(req)}`,
    }),
    logins: onlyFor(isBasic, [
      limiter('login-account', stores, log, {
        ...login,
        limit: config.loginFailuresPerAccount,
        standardHeaders: false,
        keyGenerator: (req) => {
          const credentials = credentialsOf(req);
          return `email:${credentials.scheme === 'basic' ? credentials.email.toLowerCase() : ''}`;
        },
      }),
      limiter('login-address', stores, log, {
        ...login,
        limit: config.loginFailuresPerAddress,
        standardHeaders: false,
        keyGenerator: (req) => `ip:${addressOf(req)}`,
      }),
    ]),
    perAccount: limiter('account', stores, log, {
      windowMs: 60_000,
      limit: config.rateLimitPerMinute,
      skip: (req) => !req.principal,
      keyGenerator: (req) => `account:${req.principal?.accountId}`,
    }),
  };
}
