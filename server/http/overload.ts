// Load shedding: when the event loop falls behind (a timer fires later than it should by
// more than OVERLOAD_EVENT_LOOP_DELAY_MS), new requests are refused at the front of the
// chain with a cheap 503 `overloaded` and Retry-After, and /readyz says not ready, until
// a sample finds the loop on time again. Everything a request would cost (body, key,
// validation, the database) is skipped, so the backlog drains instead of growing.
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { ApiError } from '../../domain/errors';

export interface OverloadMonitor {
  /** Whether new requests are being shed now. */
  readonly overloaded: boolean;
  /** The last sample's delay, ms. */
  readonly delayMs: number;
  /** Counts a refused request (for the log line that ends an episode). */
  shed(): void;
  /** Starts sampling (once listening: start-up's own work is no overload). */
  start(): void;
  stop(): void;
}

/** What a shed request is told to wait before it tries again. */
export const retryAfterSeconds = 1;
/** An episode (for the log) ends after the loop has kept up this long. */
const quietMs = 5_000;

/**
 * Samples the loop's delay with a timer: how late each tick fires past its due time is
 * what a request arriving then waits before any of its code runs. The timer runs in
 * the loop's timers phase, before the poll phase reads the requests that queued up
 * while the loop was busy, so those already meet the new state. Null when `boundMs` is 0.
 */
export function createOverloadMonitor(boundMs: number, log: Logger): OverloadMonitor | null {
  if (boundMs <= 0) return null;
  // Often enough that a delay past the bound is seen within about half the bound.
  const intervalMs = Math.max(5, Math.min(100, Math.floor(boundMs / 2)));
  let due = 0;
  let timer: NodeJS.Timeout | undefined;
  // One warn line where an episode begins and one info line once it has ended, however
  // often the state flips within it.
  let episode: { startedAt: number; lastAt: number; shed: number; maxDelayMs: number } | null = null;
  const monitor = {
    overloaded: false,
    delayMs: 0,
    shed: () => void (episode && episode.shed++),
    start: () => {
      due = performance.now() + intervalMs;
      timer ??= setInterval(sample, intervalMs).unref();
    },
    stop: () => clearInterval(timer),
  };
  const sample = () => {
    const now = performance.now();
    const delayMs = Math.max(0, now - due);
    // Node schedules the next tick from when this one runs.
    due = now + intervalMs;
    monitor.delayMs = delayMs;
    monitor.overloaded = delayMs > boundMs;
    if (monitor.overloaded) {
      if (!episode) {
        episode = { startedAt: Date.now(), lastAt: now, shed: 0, maxDelayMs: 0 };
        log.warn({ delayMs: Math.round(delayMs), boundMs }, 'Overloaded: new requests are refused with 503 overloaded');
      }
      episode.lastAt = now;
      episode.maxDelayMs = Math.max(episode.maxDelayMs, delayMs);
    } else if (episode && now - episode.lastAt >= quietMs) {
      const { shed, maxDelayMs, startedAt } = episode;
      episode = null;
      log.info(
        { shed, maxDelayMs: Math.round(maxDelayMs), boundMs, durationMs: Date.now() - startedAt - quietMs },
        'No longer overloaded: the event loop keeps up again',
      );
    }
  };
  return monitor;
}

/**
 * First in the chain after the request id: while overloaded, every request but
 * `/healthz` (the process is alive) is answered 503, `/readyz` included, so a balancer
 * sends the traffic elsewhere meanwhile.
 */
export function shedWhenOverloaded(monitor: OverloadMonitor | null | undefined): RequestHandler {
  return (req, _res, next) => {
    if (!monitor?.overloaded || req.path === '/healthz') return next();
    monitor.shed();
    next(
      new ApiError('overloaded', 'The service is overloaded and did not take this request; try again shortly', 503, {
        'Retry-After': String(retryAfterSeconds),
      }),
    );
  };
}
