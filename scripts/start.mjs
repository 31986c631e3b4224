// npm start: the build check (scripts/build.mjs: it builds when an input is newer than
// dist/, and refuses a stale dist/ where the build tools are not installed), then the
// service, dist/server/main.js, in this same process: a second Node process would add its
// own start to the service's (docs/performance.md, "Start"). On a Node.js the project does
// not support, it stops first with one line saying what to run or install (scripts/runtime.cjs).
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';
import runtime from './runtime.cjs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const refusal = runtime.startRefusal({ platform: process.platform, arch: process.arch, nodeVersion: process.version, pkg });
if (refusal) {
  process.stderr.write(`${refusal}\n`);
  process.exit(1);
}

await import('./build.mjs');
const main = new URL('../dist/server/main.js', import.meta.url);
// A cluster's workers (WEB_CONCURRENCY) run the script this process was started with:
// the service itself, not the build check again.
process.argv[1] = fileURLToPath(main);
await import(main.href);
