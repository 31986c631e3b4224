// dist/server/main.js, the file `npm start` runs (scripts/build.mjs copies this file there):
// V8's compile cache, stack traces through the bundle's source map, then the service, the
// bundle beside it (docs/layout.md, "One bundle"). Plain CommonJS: node runs it as it is.
'use strict';
const diagnostics = require('node:diagnostics_channel');
const Module = require('node:module');
const v8 = require('node:v8');
const { readFileSync, renameSync, rmSync, writeFileSync } = require('node:fs');
const { dirname, join, resolve } = require('node:path');
const vm = require('node:vm');
const { crc32 } = require('node:zlib');

// No allocation-site pretenuring. V8 allocates an allocation site's objects straight in the
// old generation once nearly all of them outlived a collection. At start, the collections
// during the warm-up found the request path's objects alive (its requests were in flight),
// V8 decided so for its sites and kept to it: under load their objects died in the old
// generation, and full collections came many times as often. Young, they die in the young
// generation's collections (docs/performance.md, "Collections", gives the figures). First,
// before anything is compiled: V8's code caches are keyed by its flags.
v8.setFlagsFromString('--no-allocation-site-pretenuring');

// The compile cache (in the system's temporary folder, or NODE_COMPILE_CACHE): a start after
// the first reads the compiled code of the modules loaded from node_modules instead of
// compiling them again (docs/performance.md, "Start"). The bundle has a cache of its own,
// below.
Module.enableCompileCache();

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
      map = new Module.SourceMap(JSON.parse(readFileSync(`${bundle}.map`, 'utf8')));
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

// The bundle, compiled with V8's cache of its code as the last warmed-up start left it.
// Node's compile cache holds what V8 compiled before running a file: the bundle's top
// level, not the functions inside it, which V8 compiles when first called (each module's
// body, the request path). A cache made after running holds those too, so a start reads
// them instead of compiling them (docs/performance.md, "Start"). The file is named by the
// bundle's checksum: V8 itself checks only the source's length, its own version and its
// flags, and a cache it refuses is made again.
// The bundle's text is a function already (scripts/build.mjs writes it so), compiled as it
// is read: wrapping it here would make V8 copy all of it once more. It is ASCII (the build
// checks), which read as latin1 is a plain copy; read as UTF-8, Node's reader left the
// process 2 MiB larger.
// The checksum of the bundle's bytes, which scripts/build.mjs writes in here as it copies
// this file beside the bundle; computed at the start only where it did not.
const builtChecksum = undefined;
const source = readFileSync(bundle, 'latin1');
const cacheDir = Module.getCompileCacheDir();
const cacheFile = cacheDir && join(cacheDir, `service-${builtChecksum ?? crc32(source).toString(16)}.v8cache`);
let cachedData;
try {
  if (cacheFile) cachedData = readFileSync(cacheFile);
} catch {
  // None yet: this start writes it.
}
const script = new vm.Script(source, {
  filename: bundle,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});

// Until this process first listens, V8 does not tier code up: what runs before is the
// start, most of it once, and compiling it again in the baseline and optimising tiers costs
// the start CPU for code that will not run again. The warm-up after listening optimises
// the request path (docs/performance.md, "Start"). Turned off after the cache above is
// checked and on again before it is made, as V8 keys it by its flags. A cluster's primary,
// which serves nothing and listens only for the metrics, may keep to the interpreter.
// Left alone where the command line or NODE_OPTIONS names a tier or --jitless, under which
// turning a tier on would break the process.
const tiers = ['sparkplug', 'maglev', 'turbofan'];
const named = /^--(no-)?(jitless|opt|sparkplug|maglev|turbofan)(=|$)/;
if (![...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((arg) => named.test(arg))) {
  for (const tier of tiers) v8.setFlagsFromString(`--no-${tier}`);
  const listening = diagnostics.tracingChannel('net.server.listen');
  const tierUp = {
    asyncEnd() {
      listening.unsubscribe(tierUp);
      for (const tier of tiers) v8.setFlagsFromString(`--${tier}`);
    },
  };
  tierUp.error = tierUp.asyncEnd;
  listening.subscribe(tierUp);
}
const service = new Module(bundle, module);
service.filename = bundle;
script.runInThisContext().call(service.exports, service.exports, Module.createRequire(bundle), service, bundle, __dirname);
// Once warm, before ready (server/main.ts), when there was no cache or V8 refused it:
// written aside and renamed, so that a process reading it meanwhile (a cluster's worker)
// never sees half of it; where it cannot be written the next start compiles, as this one did.
if (cacheFile && (!cachedData || script.cachedDataRejected)) {
  service.exports.beforeReady?.(() => {
    const written = `${cacheFile}.${process.pid}`;
    try {
      writeFileSync(written, script.createCachedData());
      renameSync(written, cacheFile);
    } catch {
      // A full temporary folder: no cache, and no part of one.
      rmSync(written, { force: true });
    }
  });
}
