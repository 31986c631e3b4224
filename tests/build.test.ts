// `npm start` runs dist/, built by scripts/build.mjs when an input is newer than the last
// build: on a copy of what the build reads, an edited source and an added or deleted
// migration each reach dist/ on the next build, so a stale dist/ is never what runs.
import { execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, startServer } from '../scripts/server-process';

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
      'tsconfig.json',
      'tsconfig.build.json',
      'package-lock.json',
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
      'openapi.yaml',
      'generated/openapi.json',
      'db/checkpoint-worker.cjs',
      'db/migrations/meta/_journal.json',
      'db/pg/migrations/meta/_journal.json',
      'server/docs-assets',
    ]) {
      expect(existsSync(built(path))).toBe(true);
    }
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
      // The demo catalogue went in through the migrated schema.
      expect(server.log()).toContain('New database: loaded the demo catalogue');
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

  it('compiles an edited source again', () => {
    // A statement, not an unused export, which the bundler would rightly leave out.
    appendFileSync(join(dir, 'server/spec.ts'), "\nif (process.env.BUILT_AGAIN) console.log('builtAgain');\n");
    build();
    expect(readFileSync(built('server/main.js'), 'utf8')).toContain('builtAgain');
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
});
