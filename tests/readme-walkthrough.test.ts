// The README's "First calls" walkthrough, run as written against a real server, twice on
// one database with the passwords typed at its prompts, so the README cannot drift from
// what the service does and stays rerunnable.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { repoRoot, startServer, type ServerProcess } from '../scripts/server-process';
import { describeOnPosix } from './platform';

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> };

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

/** Runs `script` in bash -euo pipefail with `input` on its stdin; resolves with its stdout, rejects with its stderr. */
function runShell(script: string, input: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd: repoRoot, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`the walkthrough exited with ${code}:\n${stderr}\n${stdout}`));
    });
    child.stdin.end(input);
  });
}

describe('README.md', () => {
  it('starts with the two commands: install and serve, install and test', () => {
    const first = shellBlocks(readme)[0] ?? '';
    const commands = first
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter(Boolean);
    // `npm run setup` is package.json's install on the Node chosen for the platform (npm ci on it).
    expect(commands).toEqual(['npm run setup && npm start', 'npm run setup && npm test']);
    expect(pkg.scripts.setup).toBe('node scripts/setup.mjs');
    expect(readme.indexOf('```sh')).toBeLessThan(readme.indexOf('\n## '));
  });

  describeOnPosix("the README's blocks are bash, with curl", '"First calls", run twice against one real server and database', () => {
    let dir: string;
    let server: ServerProcess | undefined;
    afterAll(async () => {
      if (server && server.child.exitCode === null) await server.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('puts no password on a command line: each is read with read -rs', () => {
      const script = shellBlocks(section('First calls')).join('\n');
      expect(script).not.toMatch(/--password|curl[^\n|]* -u /);
      expect(script).not.toMatch(/correct horse|a long admin password/);
      expect(script.match(/^read -rsp .*$/gm)).toHaveLength(2);
    });

    it('goes from nothing to a delivered message and a placed order, and does it again', async () => {
      const blocks = shellBlocks(section('First calls'));
      expect(blocks.length).toBeGreaterThanOrEqual(4);
      const script = blocks.join('\n');
      // The base address must be overridable, or this test would talk to port 3000.
      expect(script).toContain('B=${B:-http://localhost:3000}');

      dir = mkdtempSync(join(tmpdir(), 'petstore-readme-'));
      const databasePath = join(dir, 'petstore.db');
      // The defaults a new user gets: demo data on, the default delivery delay.
      server = await startServer({ DATABASE_PATH: databasePath });
      // What a reader types at the two prompts.
      const input = 'correct horse battery staple\na long admin password\n';
      const env = { B: server.url, DATABASE_PATH: databasePath };

      const pets: number[] = [];
      for (const run of [1, 2]) {
        const stdout = await runShell(script, input, env);
        // What the README's comments promise, as printed.
        if (run === 1) {
          expect(stdout).toMatch(/"email":"ada@example\.com","role":"customer"/);
          expect(stdout).toMatch(/Created admin account \d+ <admin@example\.com>/);
        } else {
          expect(stdout).toMatch(/"code":"conflict"/);
          expect(stdout).toMatch(/The admin account \d+ <admin@example\.com> is already there/);
        }
        expect(stdout).toMatch(/HTTP\/1\.1 401 Unauthorized/);
        const queued = /\{"id":"(msg_[a-f0-9]{24})","message":"Hello from the pet store","status":"queued","createdAt":"[^"]+"\}/.exec(
          stdout,
        );
        expect(queued).not.toBeNull();
        expect(stdout).toContain(`{"id":"${queued?.[1]}","message":"Hello from the pet store","status":"sent"`);
        // One answer per line (curl -w '\n'): each JSON answer is a line of its own.
        const stocked = /^\{"petId":(\d+),"quantity":3,"status":"available"\}$/m.exec(stdout);
        expect(stocked).not.toBeNull();
        const petId = Number(stocked?.[1]);
        expect(stdout).toMatch(new RegExp(`\\{"id":\\d+,"petId":${petId},"quantity":1,"complete":false\\}`));
        expect(stdout.split('\n')).toContain(`{"petId":${petId},"quantity":2,"status":"available"}`);
        expect(stdout).toMatch(/^\{"code":"unauthorized","message":"[^"]*","status":401\}$/m);
        expect(stdout).not.toContain('undefined');
        pets.push(petId);
      }
      expect(new Set(pets).size).toBe(2);

      // And what is stored.
      expect(await server.stop()).toBe(0);
      const file = new Database(databasePath, { readonly: true });
      try {
        expect(file.prepare("select role from accounts where email = 'admin@example.com'").get()).toEqual({ role: 'admin' });
        expect(
          file
            .prepare(
              'select o.pet_id as petId, o.quantity, o.complete from orders o join accounts a on a.id = o.account_id where a.email = ? order by o.id',
            )
            .all('ada@example.com'),
        ).toEqual(pets.map((petId) => ({ petId, quantity: 1, complete: 0 })));
        for (const petId of pets) {
          expect(file.prepare('select quantity from inventory where pet_id = ?').get(petId)).toEqual({ quantity: 2 });
          expect(file.prepare('select name from pets where id = ?').get(petId)).toEqual({ name: 'Polly' });
        }
        expect(file.prepare("select count(*) as n from categories where name like 'Parrots %'").get()).toEqual({ n: 2 });
        expect(file.prepare("select count(*) as n, sum(status = 'sent') as sent from messages").get()).toEqual({ n: 2, sent: 2 });
      } finally {
        file.close();
      }
    }, 150_000);
  });
});
