// The body of the checkpoint thread (db/checkpointer.ts): its own connection to the
// service's SQLite file, and a PASSIVE checkpoint every `intervalMs`. PASSIVE never
// waits for, and never blocks, the readers and the writer on the main thread; a pass
// that finds another process's checkpoint running just tries again next time.
// Plain CommonJS: a worker thread runs it as it is, under node, tsx and jest alike.
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const Database = require('better-sqlite3');

let db;
let timer;

/** Stops for good; `failure` (an error) is reported first, as text: a thrown SqliteError loses its message crossing threads. */
function finish(failure) {
  clearInterval(timer);
  if (failure) parentPort.postMessage({ failed: `${failure.code ?? failure.name}: ${failure.message}` });
  if (db?.open) db.close();
  parentPort.close();
}

try {
  db = new Database(workerData.path, { fileMustExist: true });
  const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  // A full disk or an I/O error may pass (space is freed): say so once, keep trying.
  const passing = (error) => error.code === 'SQLITE_FULL' || String(error.code).startsWith('SQLITE_IOERR');
  let stalled = false;
  timer = setInterval(() => {
    try {
      checkpoint.get();
      if (stalled) parentPort.postMessage({ recovered: true });
      stalled = false;
    } catch (error) {
      if (!passing(error)) return finish(error);
      if (!stalled) parentPort.postMessage({ stalled: `${error.code}: ${error.message}` });
      stalled = true;
    }
  }, workerData.intervalMs);
  parentPort.on('message', (message) => {
    if (message === 'stop') finish();
  });
} catch (error) {
  finish(error);
}
