// npm run dev: the contract loop in one command (docs/contract.md). It serves the build, and
// on every change to openapi.yaml or the sources regenerates (`npm run generate`, when
// openapi.yaml changed), rebuilds (scripts/build.mjs: nothing when dist/ is up to date) and
// restarts the service (SIGINT, which drains without SHUTDOWN_DELAY_MS since no balancer
// watches a developer's service, then `node dist/server/main.js` again) when the build
// changed. A failed step is reported and the last good build keeps serving. Ctrl-C stops both.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, statSync, watch } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const folders = ['server', 'handlers', 'db', 'domain'];
const say = (line) => process.stderr.write(`[dev] ${line}\n`);
const mtime = (path) => statSync(join(root, path), { throwIfNoEntry: false })?.mtimeMs ?? -Infinity;
const read = (path) => {
  try {
    return readFileSync(join(root, path), 'utf8');
  } catch {
    return undefined;
  }
};
// openapi.yaml as last seen: events on the file (a save without an edit, a checkout's
// touch) are a change only when its text differs once they are over.
let spec = read('openapi.yaml');
/** Whether generated/openapi.json is openapi.yaml's document (as `npm run generate` writes it). */
function generatedMatches() {
  try {
    return JSON.stringify(parse(spec)) === JSON.stringify(JSON.parse(read('generated/openapi.json') ?? ''));
  } catch {
    return false;
  }
}

/** Runs one step on this Node; true when it passed. */
function step(args) {
  return spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' }).status === 0;
}

let child;
function start() {
  child = spawn(process.execPath, ['dist/server/main.js'], { cwd: root, stdio: 'inherit' });
  const started = child;
  started.once('exit', (code, signal) => {
    if (child === started && !stopping) say(`the service exited (${signal ?? code}); waiting for a change`);
  });
}

let stopping = false;
async function stop() {
  const running = child;
  if (!running || running.exitCode !== null || running.signalCode !== null) return;
  stopping = true;
  const exited = new Promise((resolve) => running.once('exit', resolve));
  running.kill('SIGINT');
  await exited;
  stopping = false;
}

async function cycle(specChanged, why = 'openapi.yaml changed') {
  if (specChanged) {
    say(`${why}: npm run generate`);
    if (!step(['--import', 'tsx', 'scripts/generate.ts'])) return say('npm run generate failed: still serving the last build');
  }
  const before = mtime('dist/.tsbuildinfo');
  if (!step(['scripts/build.mjs'])) return say('the build failed: still serving the last build');
  if (!child || child.exitCode !== null || child.signalCode !== null || mtime('dist/.tsbuildinfo') !== before) {
    if (child) say('restarting the service on the new build');
    await stop();
    start();
  }
}

// Changes while a cycle runs are gathered for the next one; a burst of saves is one change.
let running = false;
let pending = { sources: false, spec: false };
let timer;
function changed(isSpec) {
  pending = { sources: pending.sources || !isSpec, spec: pending.spec || isSpec };
  clearTimeout(timer);
  timer = setTimeout(drain, 300);
}
async function drain() {
  if (running || !(pending.sources || pending.spec)) return;
  running = true;
  // Read once the burst of events is over: mid-write the file can be empty.
  const now = pending.spec ? read('openapi.yaml') : spec;
  const specChanged = now !== spec;
  spec = now;
  const { sources } = pending;
  pending = { sources: false, spec: false };
  // openapi.yaml saved as it was, and nothing else: nothing to do.
  if (sources || specChanged) await cycle(specChanged);
  running = false;
  if (pending.sources || pending.spec) void drain();
}

watch(root, (_event, name) => {
  if (name === 'openapi.yaml') changed(true);
});
for (const folder of folders) watch(join(root, folder), { recursive: true }, () => changed(false));

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    clearTimeout(timer);
    void stop().then(() => process.exit(0));
  });
}

say(`watching openapi.yaml and ${folders.join('/, ')}/`);
// At start, by content, not by date: a fresh clone's files all have the checkout's time.
await cycle(!generatedMatches(), 'generated/ does not match openapi.yaml');
