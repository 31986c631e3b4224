// The README's "First calls" walkthrough, run as written against a real server, so the
// README cannot drift from what the service does.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { repoRoot, startServer, type ServerProcess } from '../scripts/server-process';

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');

/** The ```sh blocks of the README, or of one of its `## ` sections. */
function shellBlocks(text: string): string[] {
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

function section(heading: string): string {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

describe('README.md', () => {
  it('starts with the two commands: install and serve, install and test', () => {
    const first = shellBlocks(readme)[0] ?? '';
    const commands = first
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter(Boolean);
    expect(commands).toHaveLength(2);
    expect(commands[0]).toMatch(/^npm (ci|install) && npm start$/);
    expect(commands[1]).toMatch(/^npm (ci|install) && npm test$/);
    expect(readme.indexOf('```sh')).toBeLessThan(readme.indexOf('\n## '));
  });

  describe('"First calls", run against a real server', () => {
    let dir: string;
    let server: ServerProcess | undefined;
    afterAll(async () => {
      if (server && server.child.exitCode === null) await server.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('goes from nothing to a delivered message and a placed order', async () => {
      const blocks = shellBlocks(section('First calls'));
      expect(blocks.length).toBeGreaterThanOrEqual(4);
      const script = blocks.join('\n');
      // The base address must be overridable, or this test would talk to port 3000.
      expect(script).toContain('B=${B:-http://localhost:3000}');

      dir = mkdtempSync(join(tmpdir(), 'petstore-readme-'));
      const databasePath = join(dir, 'petstore.db');
      // The defaults a new user gets: demo data on, the default delivery delay.
      server = await startServer({ DATABASE_PATH: databasePath });

      const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
        cwd: repoRoot,
        env: { ...process.env, B: server.url, DATABASE_PATH: databasePath },
        timeout: 60_000,
      });

      // What the README's comments promise, as printed.
      expect(stdout).toMatch(/"email":"ada@example\.com","role":"customer"/);
      expect(stdout).toMatch(/HTTP\/1\.1 401 Unauthorized/);
      const queued = /\{"id":"(msg_[a-f0-9]{24})","message":"Hello from the pet store","status":"queued","createdAt":"[^"]+"\}/.exec(
        stdout,
      );
      expect(queued).not.toBeNull();
      expect(stdout).toContain(`{"id":"${queued?.[1]}","message":"Hello from the pet store","status":"sent"`);
      expect(stdout).toMatch(/Created admin account \d+ <admin@example\.com>/);
      const stocked = /\{"petId":(\d+),"quantity":3,"status":"available"\}/.exec(stdout);
      expect(stocked).not.toBeNull();
      const petId = Number(stocked?.[1]);
      expect(stdout).toMatch(new RegExp(`\\{"id":\\d+,"petId":${petId},"quantity":1,"complete":false\\}`));
      expect(stdout).toContain(`{"petId":${petId},"quantity":2,"status":"available"}`);

      // And what is stored.
      expect(await server.stop()).toBe(0);
      const file = new Database(databasePath, { readonly: true });
      try {
        expect(file.prepare("select role from accounts where email = 'admin@example.com'").get()).toEqual({ role: 'admin' });
        expect(
          file
            .prepare(
              'select o.pet_id as petId, o.quantity, o.complete from orders o join accounts a on a.id = o.account_id where a.email = ?',
            )
            .all('ada@example.com'),
        ).toEqual([{ petId, quantity: 1, complete: 0 }]);
        expect(file.prepare('select quantity from inventory where pet_id = ?').get(petId)).toEqual({ quantity: 2 });
        expect(file.prepare('select name from pets where id = ?').get(petId)).toEqual({ name: 'Polly' });
        expect(file.prepare('select status from messages where id = ?').get(queued?.[1])).toEqual({ status: 'sent' });
      } finally {
        file.close();
      }
    }, 90_000);
  });
});
