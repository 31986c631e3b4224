// `npm start` loads the TypeScript sources through this CommonJS hook instead of tsx.
// tsx registers ESM loader hooks that run on a second thread and answer every import
// through it; that, and transpiling, was about half a second of each start. Here each
// .ts file is transpiled by esbuild (tsx's own transpiler) once, kept in
// node_modules/.cache/petstore-ts under a hash of its path and text, and later starts
// only read the JavaScript back. An edited file has another hash, so a stale copy is
// never run. Files still load from where they are, so paths a module resolves from its
// own __dirname (openapi.yaml, the migrations, the docs assets) are unchanged.
'use strict';
const { Buffer } = require('node:buffer');
const { createHash } = require('node:crypto');
const { readFileSync } = require('node:fs');
const { SourceMap } = require('node:module');
const { join } = require('node:path');
const { cacheFolder, writeCacheFile } = require('./start-cache.cjs');

const cacheDir = cacheFolder('petstore-ts');
let esbuild;
/** Each loaded .ts file's JavaScript, by its path: where its inline source map is read from. */
const compiled = new Map();

require.extensions['.ts'] = function loadTypeScript(module, filename) {
  const source = readFileSync(filename, 'utf8');
  const cached = join(cacheDir, `${createHash('sha256').update(filename).update('\0').update(source).digest('hex')}.js`);
  let code;
  try {
    code = readFileSync(cached, 'utf8');
  } catch {
    // Not transpiled yet: esbuild is loaded only when some file is.
    esbuild ??= require('esbuild');
    code = esbuild.transformSync(source, {
      loader: 'ts',
      format: 'cjs',
      target: 'node20',
      sourcemap: 'inline',
      sourcefile: filename,
    }).code;
    writeCacheFile(cached, code);
  }
  compiled.set(filename, code);
  module._compile(code, filename);
};

// Stack traces point at the .ts lines, as they did under tsx. Node's own source-map
// support (process.setSourceMapsEnabled) would parse the map of every module at load,
// node_modules' included: about a sixth of a start. Here a file's map is parsed the
// first time one of its frames is printed, and only frames of our .ts files are mapped.
const maps = new Map();
function mapOf(filename) {
  if (!maps.has(filename)) {
    const inline = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(compiled.get(filename));
    maps.set(filename, inline ? new SourceMap(JSON.parse(Buffer.from(inline[1], 'base64').toString('utf8'))) : null);
  }
  return maps.get(filename);
}
function frame(callSite) {
  const text = callSite.toString();
  const file = callSite.getFileName();
  if (!file || !compiled.has(file)) return text;
  const line = callSite.getLineNumber();
  const column = callSite.getColumnNumber();
  const entry = mapOf(file)?.findEntry(line - 1, column - 1);
  if (entry?.originalLine === undefined) return text;
  return text.replace(`${file}:${line}:${column}`, `${file}:${entry.originalLine + 1}:${entry.originalColumn + 1}`);
}
Error.prepareStackTrace = (error, callSites) =>
  Error.prototype.toString.call(error) + callSites.map((callSite) => `\n    at ${frame(callSite)}`).join('');
