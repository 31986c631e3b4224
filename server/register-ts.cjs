// `npm start` loads the TypeScript sources through this CommonJS hook instead of tsx.
// tsx registers ESM loader hooks that run on a second thread and answer every import
// through it; that, and transpiling, was about half a second of each start. Here each
// .ts file is transpiled by esbuild (tsx's own transpiler) once, kept in
// node_modules/.cache/petstore-ts under a hash of its path and text, and later starts
// only read the JavaScript back. An edited file has another hash, so a stale copy is
// never run. Files still load from where they are, so paths a module resolves from its
// own __dirname (openapi.yaml, the migrations, the docs assets) are unchanged.
'use strict';
const { createHash } = require('node:crypto');
const { mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

// Stack traces point at the .ts lines, as they did under tsx.
process.setSourceMapsEnabled(true);

const cacheDir = join(__dirname, '..', 'node_modules', '.cache', 'petstore-ts');
let esbuild;

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
    try {
      mkdirSync(cacheDir, { recursive: true });
      const partial = `${cached}.${process.pid}.tmp`;
      writeFileSync(partial, code);
      renameSync(partial, cached);
    } catch {
      // A read-only checkout: transpile again next time.
    }
  }
  module._compile(code, filename);
};
