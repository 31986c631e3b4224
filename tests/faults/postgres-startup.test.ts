// A service started before its PostgreSQL: it tries again, one log line per attempt, and
// serves once the database answers within DATABASE_STARTUP_TIMEOUT_S; past that bound it
// exits 1 with a message saying why.
import { call } from '../write-load';
import { startServer, type ServerProcess } from '../../scripts/server-process';
import { startPostgres, type ThrowawayPostgres } from './postgres';

let pg: ThrowawayPostgres | undefined;
let server: ServerProcess | undefined;
let url: string;

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
