// WAL checkpoints off the event loop (docs/storage.md, "Checkpoints").
//
// SQLite's automatic checkpoint runs inside whichever COMMIT takes the write-ahead log
// past 1000 pages: it copies those pages into the database file and fsyncs both files,
// holding the event loop for milliseconds every few hundred writes, with every
// connection's requests waiting behind it. Here a worker thread with its own
// connection runs the checkpoints instead, and the main connection checkpoints only as a
// backstop, at 10000 pages (about 40 MB): PASSIVE checkpoints cannot start the log over
// while writes keep coming, so under steady writes it does get there, and then finds
// most pages already copied. Durability is as before: with synchronous=NORMAL a commit
// is durable once a checkpoint has synced it. The thread runs only while commits come:
// an idle service holds no second Node environment (docs/performance.md, "Memory").
import { Worker } from 'node:worker_threads';
import type { Database } from 'better-sqlite3';
import { checkpointWorkerFile } from './files';

/** SQLite's own default: what the main connection goes back to without the thread. */
const defaultAutoCheckpointPages = 1000;
const backstopPages = 10_000;

export interface Checkpointer {
  /** Stops the thread and closes its connection; resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Checkpoints for the file behind `sqlite`, or null for an in-memory or read-only
 * database. The thread runs only while there is something to checkpoint: it is started
 * when this connection has changed rows (not before `startAfterMs` after this call), and
 * it ends, its last checkpoint done, once no row has changed for `idleAfterMs`. If the
 * thread fails, `onError` hears why and the main connection takes its checkpoints back for
 * good (SQLite's default, every 1000 pages).
 */
export function startCheckpointer(
  sqlite: Database,
  {
    intervalMs = 100,
    startAfterMs = 1000,
    idleAfterMs = 30_000,
    onError = () => {},
    onStall = () => {},
  }: {
    intervalMs?: number;
    startAfterMs?: number;
    idleAfterMs?: number;
    onError?: (error: Error) => void;
    /** Checkpoints failing for want of space or on I/O errors (the thread keeps trying), then null once one succeeds. */
    onStall?: (error: Error | null) => void;
  } = {},
): Checkpointer | null {
  if (sqlite.memory || sqlite.readonly) return null;
  // The main connection takes its checkpoints back, unless it is closed already.
  const checkpointInCommits = () => {
    if (sqlite.open) sqlite.pragma(`wal_autocheckpoint = ${defaultAutoCheckpointPages}`);
  };
  let failed = false;
  let stopping = false;
  const fail = (error: Error) => {
    if (failed) return;
    failed = true;
    checkpointInCommits();
    onError(error);
  };

  // A thread is a Node environment of its own (its memory: docs/performance.md, "Memory"): none while nothing is written.
  // A transaction that changed no row (the message delivery's every 100 ms, mostly) adds
  // nothing to the log, so rows changed, not commits, are what is watched.
  let worker: Worker | undefined;
  let ending = false;
  let exited = Promise.resolve();
  const start = () => {
    // execArgv: [] so the thread does not inherit the process's preloads or flags: it runs
    // one plain CommonJS file.
    const thread = new Worker(checkpointWorkerFile, { workerData: { path: sqlite.name, intervalMs }, execArgv: [] });
    // The thread alone must never keep the process alive.
    thread.unref();
    worker = thread;
    exited = new Promise<void>((resolve) =>
      thread.once('exit', () => {
        worker = undefined;
        ending = false;
        checkpointInCommits();
        resolve();
      }),
    );
    thread.on('message', (message: { failed?: string; stalled?: string; recovered?: true }) => {
      if (message.failed) fail(new Error(`WAL checkpoint thread: ${message.failed}`));
      if (message.stalled) onStall(new Error(`WAL checkpoint: ${message.stalled}`));
      if (message.recovered) onStall(null);
    });
    thread.once('error', fail);
    thread.once('online', () => {
      if (!failed && !ending && sqlite.open) sqlite.pragma(`wal_autocheckpoint = ${backstopPages}`);
    });
  };

  const totalChanges = sqlite.prepare('SELECT total_changes()').pluck();
  let changes = totalChanges.get() as number;
  let lastChange = performance.now();
  // Changes no running thread has seen yet: one that is ending may have missed them.
  let unseen = false;
  // Not in the service's first moment: a thread booting its own Node takes CPU from the start.
  const notBefore = performance.now() + startAfterMs;
  const watch = setInterval(() => {
    if (failed || stopping || !sqlite.open) return;
    const now = performance.now();
    const total = totalChanges.get() as number;
    if (total !== changes) {
      changes = total;
      lastChange = now;
      unseen = true;
    }
    if (!worker) {
      if (unseen && now >= notBefore) {
        unseen = false;
        start();
      }
    } else if (!ending) {
      unseen = false;
      if (now - lastChange >= idleAfterMs) {
        ending = true;
        worker.postMessage('stop');
      }
    }
  }, intervalMs);
  // Until a thread is up, the commits checkpoint as SQLite does by default.
  watch.unref();

  return {
    async stop() {
      stopping = true;
      clearInterval(watch);
      // Held from here: a stopping process may have nothing else left on its event loop,
      // and would otherwise exit before the thread and the rest of the shutdown finish.
      worker?.ref();
      worker?.postMessage('stop');
      await exited;
      checkpointInCommits();
    },
  };
}
