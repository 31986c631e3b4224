// The start-up caches under node_modules/.cache, one folder each: register-ts.cjs keeps
// the JavaScript of each .ts file, spec.ts the parsed openapi.yaml. Each file is named by a hash of what it was
// made from, so a stale one is never read; both are written here, the same way.
// Plain CommonJS: register-ts.cjs needs it before any TypeScript can load.
'use strict';
const { mkdirSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

/** The cache folder `name` (petstore-ts, petstore-spec). */
function cacheFolder(name) {
  return join(__dirname, '..', 'node_modules', '.cache', name);
}

/**
 * Writes `text` to `file` whole or not at all (a temporary file renamed into place, so a
 * start running beside this one never reads half of it). A read-only checkout or a full
 * disk only costs time: the next start makes the file again.
 */
function writeCacheFile(file, text) {
  try {
    mkdirSync(join(file, '..'), { recursive: true });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, text);
    renameSync(partial, file);
  } catch {
    // Not cached; see above.
  }
}

module.exports = { cacheFolder, writeCacheFile };
