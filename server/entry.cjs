// dist/server/main.js, the file `npm start` runs (scripts/build.mjs copies this file there):
// V8's compile cache, stack traces through the bundle's source map, then the service, the
// bundle beside it (docs/layout.md, "One bundle"). Plain CommonJS: node runs it as it is.
'use strict';
const { enableCompileCache, SourceMap } = require('node:module');
const { readFileSync } = require('node:fs');
const { dirname, join, resolve } = require('node:path');

// The compile cache (in the system's temporary folder, or NODE_COMPILE_CACHE): a start after
// the first reads the bundle's compiled code instead of compiling it again
// (docs/performance.md, "Start").
enableCompileCache();

// A stack names the TypeScript file and line (server/app.ts:123:5), through the bundle's
// source map, however the service is started (npm start, a process manager, a cluster
// worker). Node's own source maps (process.setSourceMapsEnabled) read and parse the map and
// measure every line of the bundle at each start, for stacks that are seldom written: here
// the map is read the first time a stack through the bundle is, and a frame it does not
// cover, or a map that cannot be read, keeps the bundle's line.
const bundle = join(__dirname, 'service.js');
let map;
function mapped(site) {
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (site.getFileName() !== bundle || !line || !column) return undefined;
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${bundle}.map`, 'utf8')));
    } catch {
      map = null;
    }
  }
  const origin = map?.findOrigin(line, column);
  if (!origin?.fileName) return undefined;
  const at = `${bundle}:${line}:${column}`;
  const to = `${resolve(dirname(bundle), origin.fileName)}:${origin.lineNumber}:${origin.columnNumber}`;
  return String(site).replace(at, to);
}
Error.prepareStackTrace = (error, sites) => {
  let header;
  try {
    header = Error.prototype.toString.call(error);
  } catch {
    header = '<error>';
  }
  return header + sites.map((site) => `\n    at ${mapped(site) ?? site}`).join('');
};

require('./service.js');
