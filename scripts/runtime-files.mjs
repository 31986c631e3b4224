// node scripts/runtime-files.mjs DEST: what the built service needs to run, copied into DEST
// (the Containerfile's final stage takes DEST whole). After `npm run build`: dist/ without
// tsc's intermediate output, package.json, and of node_modules only the packages the bundles
// load at run time (dist/runtime-packages.json, written by the build) with what they depend
// on; everything else is inside the bundles already. Those packages' source maps and
// TypeScript (sources some ship, type declarations) are left out: nothing reads them at run
// time (the service maps its own stacks through dist/, docs/layout.md, "Source maps").
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dest = process.argv[2];
if (!dest) {
  process.stderr.write('Usage: node scripts/runtime-files.mjs DEST\n');
  process.exit(2);
}

/** The folder of package `name` as Node resolves it from `from` (a package folder or root), or undefined. */
function resolvePackage(name, from) {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === root) return undefined;
  }
}

const packages = new Set();
function visit(folder) {
  if (packages.has(folder)) return;
  packages.add(folder);
  const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8'));
  const needs = { ...manifest.dependencies, ...manifest.optionalDependencies, ...manifest.peerDependencies };
  for (const name of Object.keys(needs)) {
    // An optional dependency or peer that is not installed is one the package does without.
    const found = resolvePackage(name, folder);
    if (found) visit(found);
  }
}
for (const name of JSON.parse(readFileSync(join(root, 'dist', 'runtime-packages.json'), 'utf8'))) {
  const found = resolvePackage(name, root);
  if (found) visit(found);
}

rmSync(dest, { recursive: true, force: true });
mkdirSync(dest, { recursive: true });
cpSync(join(root, 'package.json'), join(dest, 'package.json'));
cpSync(join(root, 'dist'), join(dest, 'dist'), {
  recursive: true,
  filter: (src) => !['compiled', '.tsbuildinfo'].includes(relative(join(root, 'dist'), src)),
});
const unread = /\.(map|ts|mts|cts)$/;
for (const folder of packages) {
  cpSync(folder, join(dest, relative(root, folder)), { recursive: true, filter: (src) => !unread.test(src) });
}
process.stdout.write(`runtime-files: dist/ and ${packages.size} packages into ${dest}\n`);
