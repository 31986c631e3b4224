// docs/decisions.md, Running it: SIGTERM drains in-flight requests, then closes the database;
// nothing acknowledged is lost.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startServer } from './server-process';

describe('SIGTERM', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-shutdown-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finishes the requests in flight, exits 0, and every acknowledged write is on disk', async () => {
    const databasePath = join(dir, 'petstore.db');
    const server = await startServer({ DATABASE_PATH: databasePath, SEED_DEMO_DATA: 'false', RATE_LIMIT_PER_MINUTE: '100000' });

    // Sign-ups hash with scrypt, so a burst of them is still in flight when SIGTERM lands.
    const emails = Array.from({ length: 16 }, (_, i) => `drain-${i}@example.com`);
    const attempts = emails.map((email) =>
      fetch(`${server.url}/accounts`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email, password: 'correct horse battery staple' }),
      }).then(
        (res) => ({ email, status: res.status }),
        () => ({ email, status: 0 }),
      ),
    );
    await new Promise((r) => setTimeout(r, 30));
    const exitCode = server.stop();
    const results = await Promise.all(attempts);

    expect(await exitCode).toBe(0);
    expect(server.log()).toContain('draining in-flight requests');
    const acknowledged = results.filter((r) => r.status === 201).map((r) => r.email);
    // Anything answered was answered properly: created, or refused before it started.
    expect(results.filter((r) => r.status !== 201 && r.status !== 0)).toEqual([]);
    expect(acknowledged.length).toBeGreaterThan(0);

    const db = new Database(databasePath, { readonly: true });
    const stored = (db.prepare('select email from accounts').all() as Array<{ email: string }>).map((r) => r.email);
    db.close();
    expect(stored.sort()).toEqual(expect.arrayContaining(acknowledged.sort()));
  }, 60_000);
});
