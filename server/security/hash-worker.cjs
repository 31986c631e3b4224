// The body of a password-hashing thread (server/security/passwords.ts): computes one hash at a time,
// synchronously, on its own thread, at a lower CPU priority than the event loop, so a
// burst of logins slows logins, not everyone's GETs. Plain CommonJS: a worker runs it as it
// is, under node, tsx and jest alike.
'use strict';
const { argon2Sync, scryptSync } = require('node:crypto');
const { readlinkSync } = require('node:fs');
const { setPriority } = require('node:os');
const { parentPort, workerData } = require('node:worker_threads');

// On Linux a thread has a priority of its own: /proc/thread-self names this thread's id,
// and setpriority on it lowers this thread alone. Elsewhere (macOS, Windows) a priority is
// the whole process's, which would slow the event loop too: the hashes run at its priority,
// and the cap on hashes at once, one core left for the event loop, is what holds there.
if (process.platform === 'linux') {
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), workerData.nice);
  } catch {
    // No /proc mounted, or not allowed: the hashes still run off the event loop.
  }
}

parentPort.on('message', (job) => {
  try {
    const hash =
      job.algorithm === 'scrypt'
        ? scryptSync(job.password, job.salt, job.length, job.scrypt)
        : argon2Sync(job.algorithm, { message: job.password, nonce: job.salt, tagLength: job.length, ...job.argon2 });
    parentPort.postMessage({ hash });
  } catch (error) {
    parentPort.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
});
