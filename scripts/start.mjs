// npm start: the build check (scripts/build.mjs: it builds when an input is newer than
// dist/, and refuses a stale dist/ where the build tools are not installed), then the
// service, dist/server/main.js, in this same process: a second Node process would add its
// own start to the service's (docs/performance.md, "Start").
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

await import('./build.mjs');
const main = new URL('../dist/server/main.js', import.meta.url);
// A cluster's workers (WEB_CONCURRENCY) run the script this process was started with:
// the service itself, not the build check again.
process.argv[1] = fileURLToPath(main);
await import(main.href);
