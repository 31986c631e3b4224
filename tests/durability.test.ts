// A write that cannot be made durable is refused, never acknowledged: a real server on a
// SQLite file capped by DATABASE_MAX_SIZE_MB (SQLite's max_page_count) takes writes until
// the file is full, then refuses them with 503 storage_unavailable, keeps answering reads,
// and holds exactly what it acknowledged. tests/faults/disk-full.test.ts does the same on
// a really full disk.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';
import { allKinds, call, databaseWithAdmin, loadEnv, setUp, storedRows, writeLoad } from './write-load';

const dir = mkdtempSync(join(tmpdir(), 'petstore-durability-'));
const path = join(dir, 'petstore.db');
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const env = { ...loadEnv, DATABASE_PATH: path, DATABASE_MAX_SIZE_MB: '1' };

it('refuses writes past the size cap with 503, serves reads, and stores exactly what it acknowledged', async () => {
  await databaseWithAdmin(path);
  server = await startServer(env);
  const { customerKey, petId } = await setUp(server.url, 1_000_000);

  const tally = await writeLoad(server.url, {
    customerKey,
    petId,
    rounds: 2_000,
    enough: (t) => t.refused.messages >= 20 && t.refused.orders >= 20,
  });
  expect(tally.unexpected).toEqual([]);
  expect(tally.acknowledged.messages).toBeGreaterThan(0);
  expect(tally.refused.messages).toBeGreaterThanOrEqual(20);
  expect(tally.refused.orders).toBeGreaterThanOrEqual(20);

  // Reads keep working; readiness says writes do not.
  expect((await call(server.url, 'GET', `/store/inventory/${petId}`, { key: customerKey })).status).toBe(200);
  const ready = await call(server.url, 'GET', '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body.code).toBe('storage_unavailable');
  expect(ready.headers.get('retry-after')).toBe('5');
  // Still full after the Retry-After: the readiness probe's own write is refused too.
  await new Promise((r) => setTimeout(r, 5_200));
  expect((await call(server.url, 'GET', '/readyz')).status).toBe(503);

  expect(await server.stop()).toBe(0);
  server = undefined;
  const stored = storedRows(path);
  for (const kind of allKinds) expect({ kind, stored: stored[kind] }).toEqual({ kind, stored: tally.acknowledged[kind] });

  // Given room (a larger cap), the same file takes writes again.
  server = await startServer({ ...env, DATABASE_MAX_SIZE_MB: '64' });
  expect((await call(server.url, 'POST', '/messages', { key: customerKey, body: { message: 'after' } })).status).toBe(202);
  expect(await eventually(async () => ((await call(server!.url, 'GET', '/readyz')).status === 200 ? true : undefined))).toBe(true);
}, 120_000);
