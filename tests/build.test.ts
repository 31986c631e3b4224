// `npm start` runs dist/, built by scripts/build.mjs when an input is newer than the last
// build: on a copy of what the build reads, an edited source and an added or deleted
// migration each reach dist/ on the next build, so a stale dist/ is never what runs.
import { execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../scripts/server-process';

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

  it('compiles what npm start runs, with the files its modules read beside them', () => {
    for (const path of [
      'server/main.js',
      'openapi.yaml',
      'generated/openapi.json',
      'db/checkpoint-worker.cjs',
      'db/migrations/meta/_journal.json',
      'server/docs-assets',
    ]) {
      expect(existsSync(built(path))).toBe(true);
    }
  });

  it('compiles an edited source again', () => {
    appendFileSync(join(dir, 'server/spec.ts'), '\nexport const builtAgain = 1;\n');
    build();
    expect(readFileSync(built('server/spec.js'), 'utf8')).toContain('builtAgain');
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
