// Who still calls a deprecated operation: counts per (operation, UTC day, account), kept
// in memory and added to the database in one transaction every few seconds and at
// shutdown, so that a deprecated call costs a map update rather than a write.
// `npm run deprecations` reads them (scripts/deprecations.ts).
import type { Logger } from 'pino';
import type { DeprecatedCalls, Storage } from '../../domain/storage';

/** How long counts wait in memory before they are written. */
export const flushIntervalMs = 10_000;

export interface DeprecatedCallLog {
  /** Counts one call of `operation` by `accountId` at `at` (ms since the epoch). */
  add(operation: string, accountId: number, at: number): void;
  /** Writes what is counted so far; resolves once it is stored (or has failed and been kept for the next try). */
  flush(): Promise<void>;
  /** Stops the timer and writes what is left (shutdown). */
  close(): Promise<void>;
}

/** A day's count for one operation and account, as counted: times in ms since the epoch. */
interface Counted {
  operation: string;
  /** The UTC day: whole days since the epoch. */
  day: number;
  accountId: number;
  calls: number;
  lastAt: number;
}

const dayMs = 86_400_000;

/** As stored: the day and the last call's time in ISO 8601 (done once per flush, not per call). */
const stored = (c: Counted): DeprecatedCalls => ({
  operation: c.operation,
  day: new Date(c.day * dayMs).toISOString().slice(0, 10),
  accountId: c.accountId,
  calls: c.calls,
  lastAt: new Date(c.lastAt).toISOString(),
});

export function createDeprecatedCallLog(storage: Storage, log: Logger, intervalMs = flushIntervalMs): DeprecatedCallLog {
  let pending = new Map<string, Counted>();
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  let failing = false;
  let closed = false;

  const merge = (c: Counted) => {
    const key = `${c.operation} ${c.day} ${c.accountId}`;
    const row = pending.get(key);
    if (!row) return void pending.set(key, c);
    row.calls += c.calls;
    if (c.lastAt > row.lastAt) row.lastAt = c.lastAt;
  };

  const write = async () => {
    timer = undefined;
    if (pending.size === 0) return;
    const batch = [...pending.values()];
    pending = new Map();
    try {
      await storage.addDeprecatedCalls(batch.map(stored));
      if (failing) log.info('Calls of deprecated operations are recorded again');
      failing = false;
    } catch (err) {
      // Kept for the next flush: the counts are few (operations x accounts x days).
      for (const c of batch) merge(c);
      if (!failing) log.warn({ err }, 'Could not record calls of deprecated operations; retrying with the next flush');
      failing = true;
      schedule();
    }
  };
  // One write at a time, in order: a flush waits for the one under way.
  const flush = () => (writing = writing.then(write));
  function schedule() {
    if (closed) return;
    timer ??= setTimeout(() => void flush(), intervalMs).unref();
  }

  return {
    add(operation, accountId, at) {
      merge({ operation, day: Math.floor(at / dayMs), accountId, calls: 1, lastAt: at });
      schedule();
    },
    flush,
    close() {
      closed = true;
      clearTimeout(timer);
      return flush();
    },
  };
}
