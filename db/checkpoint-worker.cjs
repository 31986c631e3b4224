// The body of the checkpoint thread (db/checkpointer.ts): its own connection to the
// service's SQLite file, and a PASSIVE checkpoint every `intervalMs` until it is asked to
// end. PASSIVE never waits for, and never blocks, the readers and the writer on the main
// thread; a pass that finds another process's checkpoint running just tries again next time.
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
  const pass = () => {
    try {
      checkpoint.get();
      if (stalled) parentPort.postMessage({ recovered: true });
      stalled = false;
    } catch (error) {
      if (!passing(error)) return finish(error);
      if (!stalled) parentPort.postMessage({ stalled: `${error.code}: ${error.message}` });
      stalled = true;
    }
  };
  timer = setInterval(pass, workerData.intervalMs);
  // Asked to end (no commit for a while, or the service stops): what the log holds is copied first.
  parentPort.on('message', (message) => {
    if (message !== 'stop') return;
    pass();
    if (db.open) finish();
  });
} catch (error) {
  finish(error);
}
