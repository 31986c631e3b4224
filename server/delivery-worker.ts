// The service's periodic work. It delivers queued messages ("delivery" is recording it:
// there is no external transport) and, now and then, forgets expired Idempotency-Keys
// and rate-limit counters whose window has ended.
// The queue is the messages table, so what is still queued when the process stops is
// picked up by the next start, by whichever process or instance claims it first
// (storage.deliverDue claims each message once).
import type { Logger } from 'pino';
import { StorageUnavailable } from '../domain/errors';
import { purgeExpiredKeys } from '../domain/idempotency';
import type { Storage } from '../domain/storage';
import type { Config } from './config';

export interface DeliveryWorker {
  /** One pass now: delivers everything due (tests call it instead of waiting for a tick). */
  runOnce(): Promise<string[]>;
  /** Stops the loop; resolves once no pass is running. */
  stop(): Promise<void>;
}

const batchSize = 100;
const purgeEveryMs = 10 * 60_000;

/** Schedules `fn` once after `ms`; returns its cancel. Tests pass their own to fire ticks by hand. */
export type SetTimer = (fn: () => void, ms: number) => () => void;

const realTimer: SetTimer = (fn, ms) => {
  const timer = setTimeout(fn, ms);
  // The worker alone must never keep the process alive.
  timer.unref();
  return () => clearTimeout(timer);
};

export function startDeliveryWorker({
  storage,
  config,
  log,
  intervalMs = 100,
  now = Date.now,
  setTimer = realTimer,
  autostart = true,
  onDelivered,
}: {
  storage: Pick<Storage, 'deliverDue' | 'purgeIdempotency' | 'purgeRateLimits'>;
  config: Pick<Config, 'messageDeliveryDelayMs'>;
  log: Logger;
  intervalMs?: number;
  /** The clock; tests pass their own. */
  now?: () => number;
  /** The timer between passes; tests pass their own. */
  setTimer?: SetTimer;
  /** False: no timer, only runOnce (tests). */
  autostart?: boolean;
  /** Each delivered message's lag, queued to sent, in seconds (server/observability/metrics.ts). */
  onDelivered?: (lagSeconds: number) => void;
}): DeliveryWorker {
  let stopped = false;
  let cancelTimer: (() => void) | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let lastPurge = 0;

  const pass = async (): Promise<string[]> => {
    const at = now();
    const due = new Date(at - config.messageDeliveryDelayMs).toISOString();
    const all: string[] = [];
    let delivered: Array<{ id: string; createdAt: string }>;
    // Drains a backlog in batches without holding a lock for all of it at once.
    do {
      delivered = await storage.deliverDue(due, new Date(at).toISOString(), batchSize);
      const ids = delivered.map((m) => m.id);
      if (ids.length > 0) log.debug({ ids }, 'messages delivered');
      if (onDelivered) for (const m of delivered) onDelivered(Math.max(0, at - Date.parse(m.createdAt)) / 1000);
      all.push(...ids);
    } while (delivered.length === batchSize && !stopped);
    if (at - lastPurge >= purgeEveryMs) {
      lastPurge = at;
      const purged = await purgeExpiredKeys(storage, new Date(at));
      const counters = await storage.purgeRateLimits(at);
      if (purged + counters > 0) log.debug({ purged, counters }, 'expired idempotency keys and rate-limit counters purged');
    }
    return all;
  };

  const tick = async () => {
    cancelTimer = undefined;
    if (stopped) return;
    try {
      const current = pass();
      running = current.catch(() => undefined);
      await current;
    } catch (error) {
      // A busy or failing database must not kill the loop; the next tick retries. An
      // unreachable database is logged once by the storage, not here every tick.
      if (error instanceof StorageUnavailable) log.debug({ err: error }, 'message delivery waits for the database');
      else log.error({ err: error }, 'message delivery failed');
    }
    if (!stopped) schedule();
  };

  const schedule = () => {
    cancelTimer = setTimer(() => void tick(), intervalMs);
  };

  if (autostart) schedule();
  return {
    runOnce: () => pass(),
    async stop() {
      stopped = true;
      cancelTimer?.();
      cancelTimer = undefined;
      await running;
    },
  };
}
