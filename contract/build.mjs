// The package's build, run by `npm pack` (prepack): the suite as one CommonJS file,
// dist/cli.js (its bin), with its four dependencies left to npm, and the contract it checks
// by default, openapi.yaml, copied from the service beside it. `--clean` (postpack) removes
// both again, so the repository keeps one openapi.yaml.
import { copyFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

if (process.argv.includes('--clean')) {
  rmSync(join(here, 'dist'), { recursive: true, force: true });
  rmSync(join(here, 'openapi.yaml'), { force: true });
} else {
  const { buildSync } = await import('esbuild');
  rmSync(join(here, 'dist'), { recursive: true, force: true });
  buildSync({
    entryPoints: [join(here, 'cli.ts')],
    outfile: join(here, 'dist', 'cli.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    packages: 'external',
    banner: { js: '#!/usr/bin/env node' },
    logLevel: 'warning',
  });
  copyFileSync(join(here, '..', 'openapi.yaml'), join(here, 'openapi.yaml'));
}
