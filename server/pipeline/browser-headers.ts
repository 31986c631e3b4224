// What browsers are told beyond the body: `Cache-Control: no-store` on every answer of an
// operation that takes credentials, so no shared or browser cache keeps one account's
// data (a 401 or 429 included); and, for the origins the operator allows (CORS_ORIGINS,
// none by default), the CORS headers that let a page on them call the API.
import type { RequestHandler } from 'express';

/** What a page may send beyond the CORS-safelisted headers. */
const allowedRequestHeaders = 'Authorization, Content-Type, Idempotency-Key, X-Request-Id, Prefer';
/** What a page may read beyond the CORS-safelisted response headers. */
const exposedHeaders =
  'Location, Link, RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, Deprecation, Sunset, Idempotent-Replayed, X-Mock';
/** How long a browser may reuse a preflight's answer, in seconds. */
const preflightMaxAge = '600';

/** After routing (server/app.ts): reads the request's spec path and operation. */
export function browserHeaders(corsOrigins: readonly string[]): RequestHandler {
  const origins = new Set(corsOrigins);
  return (req, res, next) => {
    const op = req.operation;
    if (op && op.security !== 'public') res.setHeader('Cache-Control', 'no-store');
    if (origins.size === 0) return next();
    // The answer depends on the Origin whether or not it is allowed: caches must key on it.
    res.vary('Origin');
    const origin = req.headers.origin;
    if (origin === undefined || !origins.has(origin)) return next();
    res.setHeader('Access-Control-Allow-Origin', origin);
    // A preflight: OPTIONS naming the method to come, on a path of the spec.
    const found = req.specPath;
    if (req.method === 'OPTIONS' && found && req.headers['access-control-request-method'] !== undefined) {
      res.setHeader('Access-Control-Allow-Methods', found.allow);
      res.setHeader('Access-Control-Allow-Headers', allowedRequestHeaders);
      res.setHeader('Access-Control-Max-Age', preflightMaxAge);
      res.status(204).end();
      return;
    }
    res.setHeader('Access-Control-Expose-Headers', exposedHeaders);
    next();
  };
}
