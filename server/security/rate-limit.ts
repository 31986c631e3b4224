// Rate limits that a client cannot dodge by what it writes in its headers:
// - per client address, on every request, before authentication (a made-up Bearer
//   value is not an identity and costs no database lookup beyond this limit);
// - per account, after authentication;
// - sign-ups per address, over an hour: accounts are cheap to ask for and each holds keys
//   and messages, so one address may make few of them;
// - failed HTTP Basic logins, per account and per address: past the limit, Basic
//   answers 429 until the window ends. API keys keep working, so a guesser cannot lock
//   a real user out of the keys they already have.
// - password checks per account, successful ones too: each costs a hash's worth of CPU
//   (server/security/passwords.ts), the dearest thing a customer can ask for, so one account may
//   have few of them a minute whatever its per-account request limit.
// Every counter lives in a store made by one factory (in memory by default), the seam
// for the store shared between processes (server/security/rate-limit-store.ts).
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { ClientRateLimitInfo, Options, Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import { addressKey } from '../address-key';
import type { Config } from '../config';
import { ApiError } from '../../domain/errors';
import { credentialsOf } from './auth';

export type RateLimiterName = 'address' | 'account' | 'login-account' | 'login-address' | 'password-checks' | 'signup';

/** Makes the store behind one limiter; called once per limiter, with its name. */
export type RateLimitStoreFactory = (name: RateLimiterName) => Store;

export const memoryStores: RateLimitStoreFactory = () => new ImmediateMemoryStore();

/**
 * Counters in this process's memory, as express-rate-limit's MemoryStore keeps them (a
 * window per client from its first hit; clients not seen for a whole window dropped in
 * bulk), but answering at once: the library's store answers in a promise, which cost
 * each limiter of every request a turn of the microtask queue (docs/performance.md).
 */
export class ImmediateMemoryStore implements Store {
  readonly localKeys = true;
  private windowMs = 60_000;
  // Clients hit in this window, and those hit only in the one before: what is still in
  // `previous` when the next window starts has been idle a whole window and is dropped.
  private current = new Map<string, { totalHits: number; resetTime: Date }>();
  private previous = new Map<string, { totalHits: number; resetTime: Date }>();
  private interval: NodeJS.Timeout | undefined;

  init(options: Pick<Options, 'windowMs'>): void {
    this.windowMs = options.windowMs;
    clearInterval(this.interval);
    this.interval = setInterval(() => {
      this.previous = this.current;
      this.current = new Map();
    }, this.windowMs);
    this.interval.unref();
  }

  increment(key: string): ClientRateLimitInfo {
    const client = this.client(key);
    const now = Date.now();
    if (client.resetTime.getTime() <= now) {
      client.totalHits = 0;
      client.resetTime = new Date(now + this.windowMs);
    }
    client.totalHits++;
    return client;
  }

  decrement(key: string): void {
    const client = this.client(key);
    if (client.totalHits > 0) client.totalHits--;
  }

  resetKey(key: string): void {
    this.current.delete(key);
    this.previous.delete(key);
  }

  private client(key: string) {
    let client = this.current.get(key);
    if (!client) {
      client = this.previous.get(key) ?? { totalHits: 0, resetTime: new Date(Date.now() + this.windowMs) };
      this.previous.delete(key);
      this.current.set(key, client);
    }
    return client;
  }
}

/** Probes must keep answering while a client is being limited. */
const isProbe = (req: Request) => req.path === '/healthz' || req.path === '/readyz';

// A client is counted by its address's key (server/address-key.ts). Behind a proxy the
// service trusts (TRUST_PROXY), req.ip is an X-Forwarded-For entry, text a client may have
// written: a key of a count kept in the database (PostgreSQL, WEB_CONCURRENCY) must be an
// address, not up to 16 KiB of whatever was sent.
const addressOf = (req: Request) => {
  const ip = req.ip ?? 'unknown';
  // The socket's own address is one; only a forwarded one is checked.
  if (req.ip !== undefined && ip !== req.socket.remoteAddress && isIP(ip) === 0) {
    throw new ApiError('bad_request', 'The client address X-Forwarded-For gives is not an IP address', 400);
  }
  return addressKey(ip);
};

/** What a limiter needs besides its store: its window, budget, key and scope. */
interface LimiterOptions {
  windowMs: number;
  limit: number;
  keyGenerator: (req: Request) => string;
  /** Requests the limiter leaves alone (they are neither counted nor refused). */
  skip?: (req: Request) => boolean;
  /** The IETF `RateLimit` and `RateLimit-Policy` headers (draft 8) on every counted answer. */
  headers: boolean;
  /** Counts only the requests whose answer passes this test; the others are taken back when answered. */
  counts?: (res: Response) => boolean;
}

/**
 * A fixed-window limiter over a store of counters. express-rate-limit supplies the store
 * interface, its memory store and the IPv6 address grouping; the middleware itself is
 * ours, because the library's pass costs about a sixth of a hot GET (several awaits, a
 * SHA-256 of the key and a property definition per request: README
 * "Performance"). It writes the same draft-8 headers the library wrote, and one store
 * call per request.
 */
function limiter(name: RateLimiterName, store: Store, log: Logger, options: LimiterOptions, onRefusal?: OnRefusal): RequestHandler {
  const { windowMs, limit, keyGenerator, skip, headers, counts } = options;
  void store.init?.({ windowMs, limit } as Options);
  const windowSeconds = Math.ceil(windowMs / 1000);
  const policy = `"${name}"; q=${limit}; w=${windowSeconds}; pk=:`;
  const what = name.startsWith('login')
    ? 'Too many failed logins'
    : name === 'signup'
      ? 'Too many sign-ups from this address'
      : name === 'password-checks'
        ? 'Too many password checks for this account'
        : 'Too many requests';

  const decide = (req: Request, res: Response, next: NextFunction, key: string, hit: ClientRateLimitInfo) => {
    const now = Date.now();
    const resetAt = hit.resetTime?.getTime() ?? now + windowMs;
    if (headers && !res.headersSent) {
      res.append('RateLimit', `"${name}"; r=${Math.max(limit - hit.totalHits, 0)}; t=${Math.max(0, Math.ceil((resetAt - now) / 1000))}`);
      res.append('RateLimit-Policy', `${policy}${partitionKey(key)}:`);
    }
    if (counts) {
      // A request that does not count is taken back once answered, unless its window is over.
      res.once('finish', () => {
        if (counts(res) || Date.now() >= resetAt) return;
        Promise.resolve(store.decrement(key)).catch((err: unknown) =>
          log.error({ err, limiter: name }, 'rate-limit store failed to take back a hit'),
        );
      });
    }
    if (hit.totalHits <= limit) return next();
    const seconds = Math.max(1, Math.ceil((resetAt - now) / 1000));
    // Logged once per client and window, not once per refused request.
    if (hit.totalHits === limit + 1) log.warn({ limiter: name, address: req.ip }, 'rate limit reached');
    onRefusal?.(name);
    next(
      new ApiError('rate_limited', `${what}; retry in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}`, 429, {
        'Retry-After': String(seconds),
      }),
    );
  };

  return (req, res, next) => {
    if (skip?.(req)) return next();
    const key = keyGenerator(req);
    let hit: ReturnType<Store['increment']>;
    try {
      hit = store.increment(key);
    } catch (err) {
      return next(err);
    }
    // The memory store answers at once; the database's store, shared between processes,
    // in a promise. That promise is returned, so that a drain waits for the database's
    // answer (server/app.ts, inOneLayer).
    if (hit instanceof Promise) return hit.then((h) => decide(req, res, next, key, h), next);
    decide(req, res, next, key, hit);
  };
}

/**
 * The draft-8 partition key, as express-rate-limit computes it: the base64 of the first
 * 12 hex digits of the key's SHA-256. Remembered per key (a bounded map), since the same
 * few clients send most requests.
 */
const partitionKeys = new Map<string, string>();
function partitionKey(key: string): string {
  let pk = partitionKeys.get(key);
  if (pk === undefined) {
    pk = Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');
    if (partitionKeys.size >= 10_000) partitionKeys.clear();
    partitionKeys.set(key, pk);
  }
  return pk;
}

/** Hears each request a limiter refuses (server/observability/metrics.ts counts them by limiter). */
export type OnRefusal = (limiter: RateLimiterName) => void;

/** Each is placed in the chains of the operations it limits (server/app.ts). */
export interface RateLimiters {
  /** Every request, before authentication. */
  perAddress: RequestHandler;
  /** HTTP Basic attempts: failures per account and address, then every password check per account. */
  logins: RequestHandler;
  /** Authenticated requests; after the validator's security step. */
  perAccount: RequestHandler;
  /** Sign-ups per address; only those that create an account count. */
  signups: RequestHandler;
}

export function createRateLimiters(
  config: Pick<
    Config,
    | 'rateLimitPerMinute'
    | 'rateLimitPerAddressPerMinute'
    | 'loginFailuresPerAccount'
    | 'loginFailuresPerAddress'
    | 'loginLockoutMs'
    | 'passwordChecksPerMinute'
    | 'signupsPerAddressPerHour'
  >,
  log: Logger,
  stores: RateLimitStoreFactory = memoryStores,
  onRefusal?: OnRefusal,
): RateLimiters {
  const login = {
    windowMs: config.loginLockoutMs,
    headers: false,
    // Only a refused password counts: a 400 about the body is no guess.
    counts: (res: Response) => res.statusCode === 401,
  };
  const perLoginAccount = limiter(
    'login-account',
    stores('login-account'),
    log,
    {
      ...login,
      limit: config.loginFailuresPerAccount,
      keyGenerator: (req) => {
        const credentials = credentialsOf(req);
        return `email:${credentials.scheme === 'basic' ? credentials.email.toLowerCase() : ''}`;
      },
    },
    onRefusal,
  );
  const perLoginAddress = limiter(
    'login-address',
    stores('login-address'),
    log,
    {
      ...login,
      limit: config.loginFailuresPerAddress,
      keyGenerator: (req) => `ip:${addressOf(req)}`,
    },
    onRefusal,
  );
  // Every password check, the right password too, per account (the email it names, known
  // or not): after the lockouts, so that a locked-out login is not counted here.
  const perPasswordChecks = limiter(
    'password-checks',
    stores('password-checks'),
    log,
    {
      windowMs: 60_000,
      limit: config.passwordChecksPerMinute,
      headers: false,
      keyGenerator: (req) => {
        const credentials = credentialsOf(req);
        return `email:${credentials.scheme === 'basic' ? credentials.email.toLowerCase() : ''}`;
      },
      // A request turned away before its check (503 while the hashing queue is full) made none.
      counts: (res) => res.statusCode !== 503,
    },
    onRefusal,
  );
  return {
    perAddress: limiter(
      'address',
      stores('address'),
      log,
      {
        windowMs: 60_000,
        limit: config.rateLimitPerAddressPerMinute,
        headers: true,
        skip: isProbe,
        keyGenerator: (req) => `ip:${addressOf(req)}`,
      },
      onRefusal,
    ),
    // Only HTTP Basic requests are login attempts; the hot GETs never send one.
    logins: (req, res, next) => {
      if (credentialsOf(req).scheme !== 'basic') return next();
      // decide() returns what `next` returns, so this promise settles after the last one.
      return perLoginAccount(req, res, (err?: unknown) =>
        err === undefined
          ? perLoginAddress(req, res, (err2?: unknown) => (err2 === undefined ? perPasswordChecks(req, res, next) : next(err2)))
          : next(err),
      );
    },
    perAccount: limiter(
      'account',
      stores('account'),
      log,
      {
        windowMs: 60_000,
        limit: config.rateLimitPerMinute,
        headers: true,
        skip: (req) => !req.principal,
        keyGenerator: (req) => `account:${req.principal?.accountId}`,
      },
      onRefusal,
    ),
    signups: limiter(
      'signup',
      stores('signup'),
      log,
      {
        windowMs: 3_600_000,
        limit: config.signupsPerAddressPerHour,
        headers: true,
        keyGenerator: (req) => `ip:${addressOf(req)}`,
        // A sign-up refused (a taken email, a bad body) made nothing.
        counts: (res) => res.statusCode === 201,
      },
      onRefusal,
    ),
  };
}
