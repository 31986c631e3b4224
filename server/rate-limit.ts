// Per key (per client address when there is no Bearer key), with the IETF
// RateLimit-Policy / RateLimit headers (draft 8) on every response.
import type { RequestHandler } from 'express';
import { ipKeyGenerator, rateLimit, type Store } from 'express-rate-limit';
import { ApiError } from './errors';
import { bearerKeyHash } from './security';

/** `store` holds the counters (server/rate-limit-store.ts: in the database, shared by every process). */
export function rateLimiter(perMinute: number, store?: Store): RequestHandler {
  return rateLimit({
    ...(store && { store }),
    windowMs: 60_000,
    limit: perMinute,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    // Probes must keep answering while a client is being limited.
    skip: (req) => req.path === '/healthz' || req.path === '/readyz',
    keyGenerator: (req) => {
      const keyHash = bearerKeyHash(req);
      return keyHash ? `key:${keyHash}` : `ip:${ipKeyGenerator(req.ip ?? 'unknown')}`;
    },
    handler: (_req, res, next) => {
      const retryAfter = res.getHeader('Retry-After') ?? '60';
      next(new ApiError('rate_limited', `Too many requests; retry in ${String(retryAfter)} seconds`, 429));
    },
  });
}
