// A service started before its PostgreSQL: it tries again, one log line per attempt, and
// serves once the database answers within DATABASE_STARTUP_TIMEOUT_S; past that bound it
// exits 1 with a message saying why.
import { call } from '../write-load';
import { runUntilExit, startServer, type ServerProcess } from '../../scripts/server-process';
import { startPostgres, type ThrowawayPostgres } from './postgres';
import { describeOnDebian } from '../platform';

let pg: ThrowawayPostgres | undefined;
let server: ServerProcess | undefined;
let url: string;

describeOnDebian("Debian's PostgreSQL server binaries (/usr/lib/postgresql)", 'PostgreSQL at start-up', () => {
  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.createDatabase('petstore_startup');
    await pg.stop();
  }, 60_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await pg?.remove();
  }, 30_000);

  it('waits for a PostgreSQL that comes up within DATABASE_STARTUP_TIMEOUT_S, then serves', async () => {
    const starting = startServer({ DATABASE_URL: url, DATABASE_STARTUP_TIMEOUT_S: '30', SEED_DEMO_DATA: 'false' }, 60_000);
    // Long enough for two attempts even when the process itself is slow to start (a loaded machine).
    await new Promise((r) => setTimeout(r, 6_000));
    await pg!.start();
    server = await starting;
    expect(server.log().match(/PostgreSQL does not answer \(ECONNREFUSED\); trying again in \d+ ms/g)?.length).toBeGreaterThanOrEqual(2);
    expect(server.log()).toContain('PostgreSQL answers; starting');
    expect((await call(server.url, 'GET', '/readyz')).status).toBe(200);
    expect(await server.stop()).toBe(0);
  }, 60_000);

  it('exits 1 with a message once DATABASE_STARTUP_TIMEOUT_S has passed without an answer', async () => {
    await pg!.stop();
    const began = Date.now();
    const failure = await startServer({ DATABASE_URL: url, DATABASE_STARTUP_TIMEOUT_S: '2', SEED_DEMO_DATA: 'false' }, 30_000).then(
      (s) => {
        server = s;
        throw new Error('the server started without its database');
      },
      (error: Error) => error,
    );
    const took = Date.now() - began;
    expect(failure.message).toMatch(/exited with 1 before listening/);
    expect(failure.message).toMatch(
      /PostgreSQL \(DATABASE_URL\) did not answer within DATABASE_STARTUP_TIMEOUT_S=2 s \(\d+ attempts, last: ECONNREFUSED\); exiting/,
    );
    // The bound, give or take a process start.
    expect(took).toBeGreaterThanOrEqual(2_000);
    expect(took).toBeLessThan(15_000);
  }, 60_000);

  describe('a PostgreSQL that refuses what DATABASE_URL gives: exit 1 at once, one line naming DATABASE_URL, no stack, no password', () => {
    let guarded: ThrowawayPostgres | undefined;
    afterAll(async () => {
      await guarded?.remove();
    }, 30_000);

    const expectOneLine = async (databaseUrl: string, reason: RegExp) => {
      // DATABASE_STARTUP_TIMEOUT_S at its default (60 s): a refusal is not waited out.
      const { code, stderr, ms } = await runUntilExit({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' }, 30_000);
      const lines = stderr.trim().split('\n');
      expect({ code, lines: lines.length }).toEqual({ code: 1, lines: 1 });
      expect(lines[0]).toMatch(/^DATABASE_URL=postgres:\/\/petstore:\*\*\*@127\.0\.0\.1:\d+\/\w+: PostgreSQL refuses it: /);
      expect(lines[0]).toMatch(reason);
      expect(stderr).not.toMatch(/^\s+at /m);
      expect(ms).toBeLessThan(10_000);
    };

    it('a wrong password', async () => {
      guarded = await startPostgres({ password: 'the right one' });
      const right = await guarded.createDatabase('petstore_password');
      const wrong = right.replace('the%20right%20one', 'a%20wrong%20one');
      expect(wrong).not.toBe(right);
      await expectOneLine(wrong, /password authentication failed for user "petstore" \(SQLSTATE 28P01\); exiting$/);
      // The right one starts.
      const started = await startServer({ DATABASE_URL: right, SEED_DEMO_DATA: 'false' }, 60_000);
      expect(await started.stop()).toBe(0);
    }, 60_000);

    it('a database that does not exist', async () => {
      const missing = new URL(guarded!.url);
      missing.pathname = '/no_such_database';
      await expectOneLine(missing.toString(), /database "no_such_database" does not exist \(SQLSTATE 3D000\); exiting$/);
    }, 60_000);
  });
});
