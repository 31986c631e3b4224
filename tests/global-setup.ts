// The tests that start a real server run what `npm start` runs, dist/server/main.js: the
// build runs first, every time (it does nothing when dist/ is up to date), so a stale
// dist/ is never what is tested.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export default function build(): void {
  execFileSync(process.execPath, [join(__dirname, '..', 'scripts', 'build.mjs')], { stdio: 'inherit' });
}
