// npm run check:platforms (CI): installs the lock as npm would on each platform the project
// supports (`npm ci --os --cpu --libc` into a temporary copy of package.json and
// package-lock.json, no scripts run) and fails if anything installed is made for another
// platform. npm skips an optional package whose os or cpu does not fit, but installs a
// required one and only refuses it on the machine itself (EBADPLATFORM), so each installed
// package.json is read, with npm's own check. It also says which Node the project runs on
// there (scripts/runtime.cjs): the package behind node_modules/.bin/node, or the machine's.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import runtime from './runtime.cjs';

const platforms = [
  { os: 'darwin', cpu: 'arm64' },
  { os: 'darwin', cpu: 'x64' },
  { os: 'linux', cpu: 'x64', libc: 'glibc' },
  { os: 'linux', cpu: 'arm64', libc: 'glibc' },
  { os: 'win32', cpu: 'x64' },
];
// `npm run check:platforms -- darwin-arm64 linux-arm64` checks those alone.
const only = process.argv.slice(2);
const targets = platforms.filter(({ os, cpu }) => only.length === 0 || only.includes(`${os}-${cpu}`));

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const npm = process.env.npm_execpath ?? '';
if (!/npm-cli\.js$/.test(npm)) {
  process.stderr.write('scripts/check-platforms.mjs: run it as `npm run check:platforms`\n');
  process.exit(1);
}
const { checkPlatform } = createRequire(npm)('npm-install-checks');

/** Every package folder under `modules` (a node_modules), nested ones included. */
function packages(modules) {
  if (!existsSync(modules)) return [];
  return readdirSync(modules, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    .flatMap((entry) =>
      entry.name.startsWith('@')
        ? readdirSync(join(modules, entry.name)).map((name) => join(modules, entry.name, name))
        : [join(modules, entry.name)],
    )
    .flatMap((folder) => [folder, ...packages(join(folder, 'node_modules'))]);
}

/** Runs a command; its exit status and stderr. */
function run(command, args, cwd) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

/** Installs the lock as on `target`; what it found, as lines for stdout and stderr, and whether it failed. */
async function check(target) {
  const out = [];
  const err = [];
  let failed = false;
  const platform = `${target.os}-${target.cpu}${target.libc ? ` (${target.libc})` : ''}`;
  const dir = mkdtempSync(join(tmpdir(), 'petstore-platform-'));
  try {
    for (const file of ['package.json', 'package-lock.json']) cpSync(join(root, file), join(dir, file));
    const flags = Object.entries(target).map(([key, value]) => `--${key}=${value}`);
    // --prefer-offline: the registry's metadata from npm's cache where it has it, not asked
    // again per package; what is installed is what the lock names either way.
    const ci = await run(process.execPath, [npm, 'ci', ...flags, '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], dir);
    if (ci.status !== 0) {
      err.push(`${platform}: npm ci failed:\n${ci.stderr}`);
      return { out, err, failed: true };
    }
    const installed = packages(join(dir, 'node_modules')).map((folder) => ({
      path: relative(dir, folder),
      manifest: JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')),
    }));
    const foreign = installed.filter(({ manifest }) => {
      try {
        checkPlatform(manifest, false, target);
        return false;
      } catch {
        return true;
      }
    });
    for (const { path, manifest } of foreign) {
      const wants = ['os', 'cpu', 'libc'].flatMap((key) => (manifest[key] ? [`${key} ${[].concat(manifest[key]).join(',')}`] : []));
      err.push(`${platform}: ${path} is made for ${wants.join(', ')}\n`);
    }

    // The Node npm scripts would find first there, against the choice for that platform.
    const choice = runtime.chooseRuntime({ platform: target.os, arch: target.cpu, nodeVersion: process.version, pkg });
    const runtimes = installed.filter(
      ({ path, manifest }) => path === join('node_modules', manifest.name) && manifest.name in pkg.optionalDependencies,
    );
    const bin = join(dir, 'node_modules', '.bin', 'node');
    const node = existsSync(bin) ? relative(join(dir, 'node_modules'), realpathSync(bin)) : undefined;
    const expected = choice.use === 'package' ? join(choice.name, 'bin', target.os === 'win32' ? 'node.exe' : 'node') : undefined;
    if (node !== expected || runtimes.length !== (expected ? 1 : 0)) {
      err.push(
        `${platform}: node_modules/.bin/node is ${node ?? 'absent'}, where the runtime choice is ${expected ?? "the machine's Node"}\n`,
      );
      failed = true;
    }
    out.push(
      `${platform}: ${installed.length} packages installed, ${foreign.length} of them for another platform; node_modules/.bin/node: ` +
        (node
          ? `${runtimes.map(({ manifest }) => `${manifest.name} ${manifest.version}`).join(', ')} (${node})`
          : "none, so the machine's Node") +
        '\n',
    );
    if (foreign.length > 0) failed = true;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { out, err, failed };
}

// The platforms at once: each install mostly waits on the disk and the network.
let failed = false;
for (const result of await Promise.all(targets.map(check))) {
  for (const line of result.err) process.stderr.write(line);
  for (const line of result.out) process.stdout.write(line);
  if (result.failed) failed = true;
}
process.exit(failed ? 1 : 0);
