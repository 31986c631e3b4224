// Local exposure: the database files are owner-only, and account:create takes the
// password from stdin (or a prompt that does not echo) instead of the command line.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createDatabase } from '../db/client';
import { repoRoot } from '../scripts/server-process';

const dir = mkdtempSync(join(tmpdir(), 'petstore-exposure-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the database file', () => {
  it('is created 0600, and so are its -wal and -shm files', () => {
    const path = join(dir, 'fresh', 'petstore.db');
    const db = createDatabase(path);
    db.$client.exec('create table mode_probe (x); insert into mode_probe values (1)');
    const modes = ['', '-wal', '-shm'].map((suffix) => [suffix, statSync(path + suffix).mode & 0o777]);
    db.$client.close();
    expect(modes).toEqual([
      ['', 0o600],
      ['-wal', 0o600],
      ['-shm', 0o600],
    ]);
  });
});

describe('npm run account:create', () => {
  const run = (args: string[], input: string) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'scripts/account-create.ts', ...args], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_PATH: join(dir, 'accounts.db') },
      input,
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('reads the password from stdin when --password is not given', () => {
    const result = run(['--email', 'stdin-admin@example.com', '--admin'], 'a long admin password\n');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const db = new Database(join(dir, 'accounts.db'), { readonly: true });
    const row = db.prepare("select role, password_hash as hash from accounts where email = 'stdin-admin@example.com'").get() as {
      role: string;
      hash: string;
    };
    db.close();
    expect(row.role).toBe('admin');
    // The same function as sign-up (handlers/accounts.ts, registerAccount): today's argon2id.
    expect(row.hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
  });

  it('takes --password still, with a warning that it is in the process list', () => {
    const result = run(['--email', 'argv-admin@example.com', '--password', 'a long admin password', '--admin'], '');
    expect({ status: result.status, stderr: result.stderr }).toEqual({
      status: 0,
      stderr: 'account:create: --password puts the password in the process list and the shell history; pipe it on stdin instead\n',
    });
  });

  it('refuses an email already there, unless --exists-ok finds it with the same role, and changes nothing', () => {
    const db = join(dir, 'accounts.db');
    const hashOf = () => {
      const file = new Database(db, { readonly: true });
      const row = file.prepare("select password_hash as hash from accounts where email = 'again@example.com'").get() as { hash: string };
      file.close();
      return row.hash;
    };
    expect(run(['--email', 'again@example.com', '--admin'], 'a long admin password\n').status).toBe(0);
    const hash = hashOf();
    const again = run(['--email', 'again@example.com', '--admin'], 'another long password\n');
    expect({ status: again.status, stderr: again.stderr }).toEqual({
      status: 1,
      stderr: 'An account with the email again@example.com already exists (admin).\n',
    });
    const ok = run(['--email', 'again@example.com', '--admin', '--exists-ok'], 'another long password\n');
    expect({ status: ok.status, stdout: ok.stdout }).toEqual({
      status: 0,
      stdout: expect.stringMatching(/^The admin account \d+ <again@example\.com> is already there; left unchanged/),
    });
    expect(run(['--email', 'again@example.com', '--exists-ok'], 'another long password\n').status).toBe(1);
    expect(hashOf()).toBe(hash);
  });

  it('refuses a short password from stdin', () => {
    const result = run(['--email', 'short@example.com'], 'short\n');
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('8+ characters');
  });

  it('refuses an email sign-up refuses (RFC 5321: a 65-character local part), naming the field, and stores nothing', () => {
    const email = `${'a'.repeat(65)}@example.com`;
    const result = run(['--email', email, '--admin'], 'a long admin password\n');
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('Not an account sign-up would accept (openapi.yaml, NewAccount): /email must match pattern');
    const db = new Database(join(dir, 'accounts.db'), { readonly: true });
    expect(db.prepare('select count(*) as n from accounts where email = ?').get(email)).toEqual({ n: 0 });
    db.close();
    // 64 is within the bound.
    expect(run(['--email', `${'a'.repeat(64)}@example.com`, '--admin'], 'a long admin password\n').status).toBe(0);
  });
});
