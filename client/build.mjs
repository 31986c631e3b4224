// The package's build (`npm run build` here, and `npm pack` through prepack): index.ts as
// an ES module (dist/index.mjs) and as CommonJS (dist/index.cjs), openapi-fetch left to
// npm as the dependency it is, and the declarations tsc writes for them (tsconfig.build.json,
// which fails on a Node built-in): dist/index.d.mts and dist/index.d.cts, one per format as
// `nodenext` resolution wants, both over the types-only dist/openapi.d.ts. Uses esbuild
// and TypeScript from the service's own devDependencies.
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
const require = createRequire(import.meta.url);
const { buildSync } = require('esbuild');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(here, 'tsconfig.build.json')], { stdio: 'inherit' });
const types = join(dist, '.types');
copyFileSync(join(types, 'index.d.ts'), join(dist, 'index.d.mts'));
copyFileSync(join(types, 'index.d.ts'), join(dist, 'index.d.cts'));
copyFileSync(join(types, 'openapi.d.ts'), join(dist, 'openapi.d.ts'));
rmSync(types, { recursive: true, force: true });

for (const [format, file] of [
  ['esm', 'index.mjs'],
  ['cjs', 'index.cjs'],
]) {
  buildSync({
    entryPoints: [join(here, 'index.ts')],
    outfile: join(dist, file),
    bundle: true,
    packages: 'external',
    // Neither Node nor the browser: a built-in module would fail the bundle here.
    platform: 'neutral',
    format,
    target: 'es2022',
    logLevel: 'warning',
  });
}
