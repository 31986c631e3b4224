// npm run build, also run by npm install (prepare) and before the jest suite, the contract
// suite and the bench:
// tsc compiles the service into dist/compiled/ (tsconfig.build.json, incremental, ES module
// syntax for the bundler, with source maps), esbuild bundles that JavaScript into the one
// file `npm start` runs, dist/server/service.js with its source map (started by
// dist/server/main.js, a copy of server/entry.cjs, which turns V8's compile cache and
// stack traces through the map on first), and the files the service reads at run time are
// copied beside it under the same paths, afresh so that a deleted one does not linger
// (db/files.ts and server/files.ts name them from there). `account:create` is bundled the
// same way, into dist/scripts/account-create.js, for installs that have the build but not
// the sources (an image). dist/runtime-packages.json names the packages the bundles load
// from node_modules at run time (scripts/runtime-files.mjs copies them into an image).
// Why one bundle: docs/layout.md, "One bundle".
//
// Nothing is done when no input is newer than the last build, as make decides: tsc's own
// up-to-date check loads the compiler first, and takes longer than the build-less cases need.
// `npm start` runs this first (scripts/start.mjs), so it never serves a build older than its sources;
// where the build tools are not installed (`npm ci --omit=dev`) a stale build is refused in
// one line instead. The bundle carries the dependencies it bundles as they are in
// node_modules, patches/ applied (patch-package is run first), so a production install
// needs no patching of its own (docs/deployment.md).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import { isAscii } from 'node:buffer';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const buildInfo = join(root, 'dist', '.tsbuildinfo');
const sources = [
  'openapi.yaml',
  'server',
  'handlers',
  'db',
  'domain',
  'generated',
  'tsconfig.json',
  'tsconfig.build.json',
  'package-lock.json',
  'patches',
  'scripts/account-create.ts',
  // The recipe itself: a change to it changes what the build writes.
  'scripts/build.mjs',
];
const assets = [
  'openapi.yaml',
  'generated/openapi.json',
  'db/migrations',
  'db/pg/migrations',
  'db/checkpoint-worker.cjs',
  'server/security/hash-worker.cjs',
  'server/observability/trace-worker.cjs',
  'server/pages/docs-assets',
];

/** The newest modification time under `path` (a file or a folder), in ms. */
function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return -Infinity;
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((latest, name) => Math.max(latest, newest(join(path, name))), stat.mtimeMs);
}

function builtAt() {
  try {
    return statSync(buildInfo).mtimeMs;
  } catch {
    return -Infinity;
  }
}

/** The build tools (devDependencies), or undefined where they are not installed. */
function tools() {
  const require = createRequire(import.meta.url);
  try {
    return {
      tsc: require.resolve('typescript/bin/tsc'),
      esbuild: require('esbuild'),
      patchPackage: require.resolve('patch-package/index.js'),
    };
  } catch {
    return undefined;
  }
}

/**
 * The packages' own source maps are left out: several point at sources they do not ship
 * (drizzle's name `src/*.ts` beside node_modules), so a stack would name files nobody has.
 * Their frames name the package's JavaScript in node_modules instead.
 */
const ownMapsOnly = {
  name: 'own-maps-only',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/].*\.[cm]?js$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replace(/^\/\/# sourceMappingURL=.*$/gm, ''),
      loader: 'js',
    }));
  },
};

const started = new Date();
if (sources.some((source) => newest(join(root, source)) > builtAt())) {
  const found = tools();
  if (!found) {
    process.stderr.write(
      'dist/ is older than its sources and the build tools are not installed (npm ci --omit=dev): run `npm run build` where they are\n',
    );
    process.exit(1);
  }
  const { tsc, esbuild, patchPackage } = found;
  // Said before the seconds of silence a build takes, whoever asked for it (npm start, npm run dev, the tests).
  process.stderr.write('Building the service into dist/: its sources changed since the last build\n');
  // What is bundled is what runs in production: the patches must be in it (patch-package
  // applies a missing one, passes over an applied one, and fails on one that does not fit).
  if (existsSync(join(root, 'patches'))) {
    execFileSync(process.execPath, [patchPackage, '--error-on-fail', '--error-on-warn'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  for (const folder of ['server', 'db', 'generated', 'scripts']) rmSync(join(root, 'dist', folder), { recursive: true, force: true });
  const bundled = {
    outdir: join(root, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${process.versions.node.split('.')[0]}`,
    // Loaded from node_modules at run time: a native addon, a package that serves its own
    // files, and OpenTelemetry, which only tracing loads.
    external: ['better-sqlite3', 'pg-native', 'swagger-ui-dist', '@opentelemetry/*'],
    // service.js.map, through tsc's maps to the TypeScript sources: a stack names
    // server/app.ts and its line. Only the map is read at run time, not the sources.
    sourcemap: true,
    sourcesContent: false,
    // Whitespace and comments out, names kept: V8 holds the bundle's text for as long as the
    // process runs and scans it at each start (docs/performance.md, "Memory"). A stack
    // still names the file and line, through the map (server/entry.cjs).
    minifyWhitespace: true,
    legalComments: 'none',
    plugins: [ownMapsOnly],
    metafile: true,
    logLevel: 'warning',
  };
  // The service's bundle is written as the function a CommonJS module's text runs in, each
  // end on a line of its own (the source map counts the first): main.js (server/entry.cjs)
  // compiles the text as it reads it and calls the function with the module's five
  // arguments, where wrapping the text there would make a second copy of it, 2.5 MB of
  // memory touched at every start (docs/performance.md, "Start").
  const { metafile } = await esbuild.build({
    ...bundled,
    entryPoints: { 'server/service': join(root, 'dist', 'compiled', 'server', 'main.js') },
    banner: { js: '(function (exports, require, module, __filename, __dirname) {' },
    footer: { js: '});' },
  });
  const { metafile: scripts } = await esbuild.build({
    ...bundled,
    entryPoints: { 'scripts/account-create': join(root, 'dist', 'compiled', 'scripts', 'account-create.js') },
  });
  // The threads' files are copied as they are (assets, below) and load packages of their own
  // (the tracing thread, OpenTelemetry's SDK): read, not written, for the packages they import.
  const { metafile: threads } = await esbuild.build({
    entryPoints: assets.filter((asset) => asset.endsWith('.cjs')).map((asset) => join(root, asset)),
    outdir: join(root, 'dist', 'threads'),
    write: false,
    bundle: true,
    platform: 'node',
    packages: 'external',
    metafile: true,
    logLevel: 'warning',
  });
  // The external imports that are packages (pg-native among them, which pg tries and does without).
  const external = [metafile, scripts, threads]
    .flatMap((built) => Object.values(built.outputs))
    .flatMap((output) => output.imports)
    .filter((i) => i.external && !isBuiltin(i.path))
    .map((i) =>
      i.path
        .split('/')
        .slice(0, i.path.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  writeFileSync(join(root, 'dist', 'runtime-packages.json'), `${JSON.stringify([...new Set(external)].sort(), null, 2)}\n`);
  // The entry `npm start` runs: V8's compile cache, stack traces through the source map,
  // then the bundle (server/entry.cjs says why there, whoever starts main.js).
  // With the bundle's checksum written in, which names V8's cache of its code: computed
  // here once, not at every start.
  const entry = readFileSync(join(root, 'server', 'entry.cjs'), 'utf8');
  const unset = 'const builtChecksum = undefined;';
  if (!entry.includes(unset)) throw new Error(`server/entry.cjs no longer has "${unset}" for the build to fill in`);
  const built = readFileSync(join(root, 'dist', 'server', 'service.js'));
  // main.js reads it as latin1: esbuild writes ASCII, escaping any other character.
  if (!isAscii(built)) throw new Error('dist/server/service.js is not ASCII, which server/entry.cjs reads it as');
  const checksum = crc32(built).toString(16);
  writeFileSync(join(root, 'dist', 'server', 'main.js'), entry.replace(unset, `const builtChecksum = '${checksum}';`));
  for (const asset of assets) {
    const target = join(root, 'dist', asset);
    rmSync(target, { recursive: true, force: true });
    cpSync(join(root, asset), target, { recursive: true });
  }
  // tsc leaves its build info untouched when only an asset changed.
  utimesSync(buildInfo, started, started);
}
