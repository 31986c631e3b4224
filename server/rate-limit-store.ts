// A rate-limit store (express-rate-limit's store interface) over the storage port, for
// several processes or instances on one database (docs/deployment.md, "Shared rate limits").
// The database holds each client's budget for the current fixed window; a process takes a
// lease of part of it in one atomic statement (storage.takeRateLimitLease) and spends it
// in memory, so a busy client costs a write per lease, not per request. The grants of a
// window never exceed the limit, so processes together never admit more than it; a lease
// left unspent only under-admits, by at most `maxLease` per process, client and window.
import type { ClientRateLimitInfo, Options, Store } from 'express-rate-limit';
import type { Storage } from '../domain/storage';

/** The largest lease for a limit: a twentieth of it, at least 1. */
export const maxLease = (limit: number) => Math.max(1, Math.floor(limit / 20));

interface Lease {
  /** Tokens this process holds and has not spent. */
  tokens: number;
  /** The window's total granted to every process, as of this process's last lease. */
  granted: number;
  resetAt: number;
  /** The next lease to ask for: 1 at first, doubling while the client stays busy. */
  size: number;
  /** The store had no more to give: refuse without asking again until the window ends. */
  exhausted: boolean;
  /** Requests refused in this window; a decrement takes these back first. */
  refused: number;
  /** A lease under way: the client's other requests wait for it rather than ask too. */
  pending?: Promise<void> | undefined;
}

/** `name` keeps each limiter's budgets apart: two limiters may count the same client key. */
export function createRateLimitStore(storage: Pick<Storage, 'takeRateLimitLease' | 'resetRateLimit'>, name: string): Store {
  let windowMs = 60_000;
  let limit = 1;
  const leases = new Map<string, Lease>();
  let sweeper: NodeJS.Timeout | undefined;

  const info = (lease: Lease): ClientRateLimitInfo => ({
    // What this process knows: the grants as of its last lease, less what it has not spent
    // (others may have spent theirs since, so the remaining count is an estimate).
    totalHits: lease.exhausted && lease.tokens === 0 ? limit + lease.refused : lease.granted - lease.tokens,
    resetTime: new Date(lease.resetAt),
  });

  const take = (key: string, lease: Lease): Promise<void> =>
    (lease.pending ??= (async () => {
      try {
        const want = Math.min(lease.size, maxLease(limit));
        const got = await storage.takeRateLimitLease(`${name}:${key}`, windowMs, Date.now(), want, limit);
        if (got.resetAt !== lease.resetAt) Object.assign(lease, { tokens: 0, size: 1, refused: 0, resetAt: got.resetAt });
        lease.tokens += got.granted;
        lease.granted = got.hits;
        lease.size = Math.min(want * 2, maxLease(limit));
        // Less than asked for: the window's budget is spent.
        lease.exhausted = got.granted < want;
      } finally {
        lease.pending = undefined;
      }
    })());

  const increment = (key: string): ClientRateLimitInfo | Promise<ClientRateLimitInfo> => {
    let lease = leases.get(key);
    if (lease && !lease.pending && lease.resetAt <= Date.now()) lease = undefined;
    if (!lease) {
      lease = { tokens: 0, granted: 0, resetAt: 0, size: 1, exhausted: false, refused: 0 };
      leases.set(key, lease);
    }
    if (!lease.pending) {
      if (lease.tokens > 0) {
        lease.tokens--;
        return info(lease);
      }
      if (lease.exhausted) {
        lease.refused++;
        return info(lease);
      }
    }
    return take(key, lease).then(() => increment(key));
  };

  return {
    // The budgets are shared, not this process's own.
    localKeys: false,
    // Each limiter counts on its own (the interface's way of saying so).
    prefix: `${name}:`,
    init(options: Options) {
      windowMs = options.windowMs;
      if (typeof options.limit === 'number') limit = options.limit;
      // Leases of ended windows are dropped once a window.
      clearInterval(sweeper);
      sweeper = setInterval(() => {
        const now = Date.now();
        for (const [key, lease] of leases) if (!lease.pending && lease.resetAt <= now) leases.delete(key);
      }, windowMs);
      sweeper.unref();
    },
    increment,
    decrement(key: string) {
      const lease = leases.get(key);
      if (!lease || lease.resetAt <= Date.now()) return;
      // A refused request is taken back as a refusal: it was granted nothing.
      if (lease.refused > 0) {
        lease.refused--;
        return;
      }
      // The token goes back to the lease, or to the database when the lease is full: what a
      // process holds stays within one lease, and so does what it can leave unspent.
      if (lease.tokens < maxLease(limit)) {
        lease.tokens++;
        return;
      }
      return Promise.resolve(storage.takeRateLimitLease(`${name}:${key}`, windowMs, Date.now(), -1, limit)).then((got) => {
        lease.granted = got.hits;
      });
    },
    async resetKey(key: string) {
      leases.delete(key);
      await storage.resetRateLimit(`${name}:${key}`);
    },
  };
}
