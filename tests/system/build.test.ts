// `npm start` runs dist/, built by scripts/build.mjs when an input is newer than the last
// build: on a copy of what the build reads, an edited source and an added or deleted
// migration each reach dist/ on the next build, so a stale dist/ is never what runs.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { repoRoot, startServer } from '../../scripts/server-process';

jest.setTimeout(180_000);

describe('npm run build', () => {
  let dir: string;
  const build = () => execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: dir, encoding: 'utf8' });
  const built = (path: string) => join(dir, 'dist', path);

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-build-'));
    for (const path of [
      'openapi.yaml',
      'server',
      'handlers',
      'db',
      'domain',
      'generated',
      'dist',
      'scripts/build.mjs',
      'scripts/start.mjs',
      'scripts/account-create.ts',
      'scripts/runtime.cjs',
      'tsconfig.json',
      'tsconfig.build.json',
      'package-lock.json',
      'package.json',
      'patches',
    ]) {
      cpSync(join(repoRoot, path), join(dir, path), { recursive: true });
    }
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
    build();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('bundles what npm start runs, with the files it reads beside it', () => {
    for (const path of [
      'server/main.js',
      'server/service.js',
      'server/service.js.map',
      'openapi.yaml',
      'generated/openapi.json',
      'db/checkpoint-worker.cjs',
      'server/security/hash-worker.cjs',
      'server/observability/trace-worker.cjs',
      'db/migrations/meta/_journal.json',
      'db/pg/migrations/meta/_journal.json',
      'server/pages/docs-assets',
      'scripts/account-create.js',
    ]) {
      expect(existsSync(built(path))).toBe(true);
    }
    // What the bundles leave to node_modules, for an image to carry (scripts/runtime-files.mjs).
    expect(JSON.parse(readFileSync(built('runtime-packages.json'), 'utf8'))).toEqual(
      // The tracing thread's SDK is loaded by its file beside the bundle, not by the bundle.
      expect.arrayContaining(['better-sqlite3', 'swagger-ui-dist', '@opentelemetry/api', '@opentelemetry/sdk-node']),
    );
  });

  it('runs from the bundle alone, finding its migrations, pages and checkpoint thread beside it', async () => {
    // Sources moved away: only dist/ (and node_modules) can serve.
    const moved = join(dir, 'moved-away');
    for (const path of ['server', 'db', 'generated', 'openapi.yaml']) cpSync(join(dir, path), join(moved, path), { recursive: true });
    for (const path of ['server', 'db', 'generated', 'openapi.yaml']) rmSync(join(dir, path), { recursive: true });
    const server = await startServer({ DATABASE_PATH: join(dir, 'data', 'bundle.db') }, 30_000, dir);
    try {
      expect((await fetch(`${server.url}/openapi.yaml`)).status).toBe(200);
      expect((await fetch(`${server.url}/docs/assets/docs.css`)).status).toBe(200);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      // A sign-up hashes its password on a thread whose file sits beside the bundle.
      const signUp = await fetch(`${server.url}/accounts`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: 'bundle@example.com', password: 'a long enough password' }),
      });
      expect(signUp.status).toBe(201);
      // account:create, bundled for installs without the sources, makes an admin who can log in.
      const created = spawnSync(process.execPath, [built('scripts/account-create.js'), '--email=bundle-admin@example.com', '--admin'], {
        cwd: dir,
        env: { ...process.env, DATABASE_PATH: join(dir, 'data', 'bundle.db'), LOG_LEVEL: 'error' },
        input: 'a long enough password\n',
        encoding: 'utf8',
      });
      expect(created.stdout).toContain('Created admin account');
      const adminKey = await fetch(`${server.url}/api-keys`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from('bundle-admin@example.com:a long enough password').toString('base64')}` },
      });
      expect(adminKey.status).toBe(201);
      // The demo catalogue went in through the migrated schema.
      expect(server.log()).toMatch(/New database .*petstore.*\.db, with the demo catalogue/);
      // The checkpoint thread starts a second after the service; a missing file would fail it.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(server.child.exitCode).toBeNull();
      expect(server.log()).not.toContain('checkpoint');
    } finally {
      await server.stop();
      for (const path of ['server', 'db', 'generated', 'openapi.yaml']) cpSync(join(moved, path), join(dir, path), { recursive: true });
      rmSync(moved, { recursive: true });
    }
  });

  it("keeps V8's compiled code of the bundle for the next start (the compile cache, in the temporary folder)", async () => {
    const tmp = join(dir, 'tmp');
    mkdirSync(tmp, { recursive: true });
    // With NODE_COMPILE_CACHE set, Node would turn the cache on by itself; main.js must.
    expect(process.env.NODE_COMPILE_CACHE).toBeUndefined();
    const server = await startServer({ TMPDIR: tmp, DATABASE_PATH: join(dir, 'data', 'cache.db') }, 30_000, dir);
    expect(await server.stop()).toBe(0);
    const cache = join(tmp, 'node-compile-cache');
    const files = existsSync(cache) ? readdirSync(cache, { recursive: true }) : [];
    expect(files.length).toBeGreaterThan(0);
  });

  it("keeps V8's cache of the bundle's code as a warm start left it, which the next start reads", async () => {
    const tmp = join(dir, 'tmp-bundle');
    mkdirSync(tmp, { recursive: true });
    const env = { TMPDIR: tmp, DATABASE_PATH: join(dir, 'data', 'bundle-cache.db'), WARM_UP_MS: '1000' };
    const caches = () =>
      readdirSync(tmp, { recursive: true })
        .map(String)
        .filter((f) => f.includes('.v8cache'));
    const ready = async (url: string) => {
      for (let i = 0; i < 300 && (await fetch(`${url}/readyz`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 100));
    };
    const first = await startServer(env, 30_000, dir);
    await ready(first.url);
    // Written before /readyz said ready, named by the bundle's checksum, which the build wrote into main.js.
    const checksum = crc32(readFileSync(built('server/service.js'))).toString(16);
    expect(caches()).toEqual([expect.stringMatching(new RegExp(`service-${checksum}\\.v8cache$`))]);
    const file = join(tmp, caches()[0]!);
    const written = statSync(file).mtimeMs;
    expect(await first.stop()).toBe(0);

    const second = await startServer(env, 30_000, dir);
    await ready(second.url);
    expect(await second.stop()).toBe(0);
    // V8 took it: a cache it refuses is written again.
    expect(statSync(file).mtimeMs).toBe(written);
    expect(caches()).toHaveLength(1);
  });

  it('compiles an edited source again', () => {
    // A statement, not an unused export, which the bundler would rightly leave out.
    appendFileSync(join(dir, 'server/spec.ts'), "\nif (process.env.BUILT_AGAIN) console.log('builtAgain');\n");
    build();
    expect(readFileSync(built('server/service.js'), 'utf8')).toContain('builtAgain');
    // The new bundle's checksum, for its code cache.
    const checksum = crc32(readFileSync(built('server/service.js'))).toString(16);
    expect(readFileSync(built('server/main.js'), 'utf8')).toContain(`const builtChecksum = '${checksum}';`);
  });

  it('copies a new migration, and drops a deleted one', () => {
    const migration = 'db/migrations/9999_probe.sql';
    writeFileSync(join(dir, migration), 'SELECT 1;\n');
    build();
    expect(existsSync(built(migration))).toBe(true);
    unlinkSync(join(dir, migration));
    // A deletion leaves no newer file behind, but the folder itself changed.
    build();
    expect(existsSync(built(migration))).toBe(false);
  });

  it('npm start builds first when a source is newer than dist/, then serves that build', async () => {
    const marker = `fresh-build-${Date.now()}`;
    appendFileSync(join(dir, 'server/main.ts'), `\nconsole.error('${marker}');\n`);
    // npm does not pass signals on: npm and the service get a process group of their own.
    const child = spawn('npm', ['start', '--silent'], {
      cwd: dir,
      detached: true,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(dir, 'data', 'start.db') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    try {
      const deadline = Date.now() + 120_000;
      while (!/listening on http/.test(output) && child.exitCode === null && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(output).toMatch(/listening on http/);
      expect(output).toContain(marker);
      // Said before the build, in one line, and only then the service's own lines.
      expect(output.split('\n')[0]).toBe('Building the service into dist/: its sources changed since the last build');
      expect(readFileSync(built('server/service.js'), 'utf8')).toContain(marker);
    } finally {
      process.kill(-child.pid!, 'SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });

  it('refuses a stale dist/ in one line naming npm run build where the build tools are not installed', () => {
    // The copy's node_modules without the devDependencies the build runs, as `npm ci --omit=dev` leaves it.
    const bare = mkdtempSync(join(tmpdir(), 'petstore-build-bare-'));
    try {
      cpSync(join(dir, 'scripts'), join(bare, 'scripts'), { recursive: true });
      cpSync(join(dir, 'dist'), join(bare, 'dist'), { recursive: true });
      cpSync(join(dir, 'server'), join(bare, 'server'), { recursive: true });
      mkdirSync(join(bare, 'node_modules'));
      for (const name of readdirSync(join(repoRoot, 'node_modules'))) {
        if (!['esbuild', 'typescript', 'patch-package', '.bin'].includes(name))
          symlinkSync(join(repoRoot, 'node_modules', name), join(bare, 'node_modules', name));
      }
      // Built after the sources were copied: up to date, so nothing needs the missing tools.
      utimesSync(join(bare, 'dist', '.tsbuildinfo'), new Date(), new Date());
      expect(spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: bare, encoding: 'utf8' }).status).toBe(0);
      appendFileSync(join(bare, 'server/main.ts'), '\n');
      const refused = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: bare, encoding: 'utf8' });
      expect({ status: refused.status, stderr: refused.stderr }).toEqual({
        status: 1,
        stderr:
          'dist/ is older than its sources and the build tools are not installed (npm ci --omit=dev): run `npm run build` where they are\n',
      });
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });
});
