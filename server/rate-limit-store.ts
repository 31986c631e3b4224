// A rate-limit store (express-rate-limit's store interface) over the storage port: the counters live in the database, so
// every process and instance on it counts a client's requests once (docs/deployment.md).
// One upsert per request; the window is fixed, as express-rate-limit's memory store's is.
import type { Options, Store, ClientRateLimitInfo } from 'express-rate-limit';
import type { Storage } from '../domain/storage';

/** `name` keeps each limiter's counters apart: two limiters may count the same client key. */
export function createRateLimitStore(storage: Storage, name: string): Store {
  let windowMs = 60_000;
  return {
    // The counters are shared, not this process's own.
    localKeys: false,
    // Each limiter counts on its own (the interface's way of saying so).
    prefix: `${name}:`,
    init(options: Options) {
      windowMs = options.windowMs;
    },
    async increment(key: string): Promise<ClientRateLimitInfo> {
      const { hits, resetAt } = await storage.hitRateLimit(`${name}:${key}`, windowMs, Date.now());
      return { totalHits: hits, resetTime: new Date(resetAt) };
    },
    async decrement(key: string) {
      await storage.undoRateLimitHit(`${name}:${key}`);
    },
    async resetKey(key: string) {
      await storage.resetRateLimit(`${name}:${key}`);
    },
  };
}
