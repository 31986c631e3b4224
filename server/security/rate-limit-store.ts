// A rate-limit store (express-rate-limit's store interface) over the storage port, for
// several processes or instances on one database (docs/deployment.md, "Shared rate limits").
// The database holds each client's budget for the current fixed window; a process takes a
// lease of part of it in one atomic statement (storage.takeRateLimitLease) and spends it
// in memory, so a busy client costs a write per lease, not per request. The grants of a
// window never exceed the limit, so the processes together never admit more than it.
import type { ClientRateLimitInfo, Options, Store } from 'express-rate-limit';
import type { Storage } from '../../domain/storage';

/** The largest lease for a limit: a twentieth of it, at least 1. */
export const maxLease = (limit: number) => Math.max(1, Math.floor(limit / 20));

interface Lease {
  /** Tokens this process holds and has not spent (a request taken back returns its token here). */
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
  pending: Promise<void> | undefined;
}

/** `name` keeps each limiter's budgets apart: two limiters may count the same client key. */
export function createRateLimitStore(storage: Pick<Storage, 'takeRateLimitLease' | 'resetRateLimit'>, name: string): Store {
  let windowMs = 60_000;
  let limit = 1;
  const leases = new Map<string, Lease>();
  let sweeper: NodeJS.Timeout | undefined;

  // What this process knows: the window's grants as of its last lease, less what it has not
  // spent; exact for one process, an estimate with several (others spend theirs meanwhile).
  const info = (lease: Lease, admitted: boolean): ClientRateLimitInfo => ({
    totalHits: admitted ? lease.granted - lease.tokens : limit + lease.refused,
    resetTime: new Date(lease.resetAt),
  });

  const ask = async (key: string, client: Lease) => {
    const want = Math.min(client.size, maxLease(limit));
    const got = await storage.takeRateLimitLease(`${name}:${key}`, windowMs, Date.now(), want, limit);
    // Another process started the next window: what this one held belonged to the last.
    if (got.resetAt !== client.resetAt) Object.assign(client, { tokens: 0, refused: 0, exhausted: false, resetAt: got.resetAt });
    client.tokens += got.granted;
    client.granted = got.hits;
    client.size = Math.min(want * 2, maxLease(limit));
    // Less than asked for: the window's budget is spent.
    client.exhausted = got.granted < want;
  };
  // One lease under way per client; `finally` runs after the assignment even when the
  // storage throws at once (a refused write), so a failed lease is asked for again.
  const take = (key: string, client: Lease): Promise<void> =>
    (client.pending ??= ask(key, client).finally(() => {
      client.pending = undefined;
    }));

  const increment = (key: string): ClientRateLimitInfo | Promise<ClientRateLimitInfo> => {
    let lease = leases.get(key);
    if (!lease) {
      lease = { tokens: 0, granted: 0, resetAt: 0, size: 1, exhausted: false, refused: 0, pending: undefined };
      leases.set(key, lease);
    }
    if (!lease.pending) {
      // A new window: a busy client keeps its lease size, not its tokens.
      if (lease.resetAt <= Date.now()) Object.assign(lease, { tokens: 0, granted: 0, exhausted: false, refused: 0 });
      if (lease.tokens > 0) {
        lease.tokens--;
        return info(lease, true);
      }
      if (lease.exhausted) {
        lease.refused++;
        return info(lease, false);
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
      // Clients whose window ended are dropped once a window.
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
      // A refused request is taken back as a refusal: it was granted nothing. An admitted
      // one returns its token to this process, which spends it on the client's next request.
      if (lease.refused > 0) lease.refused--;
      else lease.tokens++;
    },
    async resetKey(key: string) {
      leases.delete(key);
      await storage.resetRateLimit(`${name}:${key}`);
    },
  };
}
