// A really full disk: the service's SQLite file on a 4 MiB tmpfs, filled by a file beside
// it, under a load of sign-ups, keys, orders and messages. Every write is acknowledged
// or refused with 503 storage_unavailable; reads answer; readiness says not ready; and
// once the filler is removed the service takes writes and is ready again by itself. The
// file then holds exactly what was acknowledged. Mounting needs root (CI runs as root).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startServer, type ServerProcess } from '../../scripts/server-process';
import { describeOnLinux } from '../platform';
import { allKinds, call, databaseWithAdmin, emptyTally, loadEnv, setUp, storedRows, writeLoad } from '../write-load';

let mountPoint: string;
let path: string;
let filler: string;
let server: ServerProcess | undefined;

describeOnLinux('a tmpfs, mounted as root', 'a full disk', () => {
  beforeAll(() => {
    mountPoint = mkdtempSync(join(tmpdir(), 'petstore-full-disk-'));
    path = join(mountPoint, 'petstore.db');
    filler = join(mountPoint, 'filler');
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mountPoint]);
    } catch (error) {
      throw new Error(`The fault suite mounts a small tmpfs and must run as root: ${String(error)}`);
    }
  });

  afterAll(async () => {
    await server?.stop();
    execFileSync('umount', [mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  });

  it('refuses what it cannot store, keeps reading, recovers by itself, and loses nothing it acknowledged', async () => {
    await databaseWithAdmin(path);
    server = await startServer({ ...loadEnv, DATABASE_PATH: path });
    const base = server.url;
    const { customerKey, petId } = await setUp(base, 1_000_000);

    // Leave about 768 KiB: a few hundred writes fill it.
    const { bavail, bsize } = statfsSync(mountPoint);
    writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - 768 * 1024)));

    const tally = await writeLoad(base, {
      customerKey,
      petId,
      rounds: 3_000,
      enough: (t) => t.refused.messages >= 30 && t.refused.orders >= 30 && t.refused.accounts >= 5,
    });
    expect(tally.unexpected).toEqual([]);
    expect(tally.acknowledged.messages).toBeGreaterThan(0);
    expect(tally.refused.messages).toBeGreaterThanOrEqual(30);
    expect(tally.refused.orders).toBeGreaterThanOrEqual(30);

    // Reads answer while writes are refused; readiness does not.
    expect((await call(base, 'GET', `/store/inventory/${petId}`, { key: customerKey })).status).toBe(200);
    expect((await call(base, 'GET', '/store/orders?limit=5', { key: customerKey })).status).toBe(200);
    const ready = await call(base, 'GET', '/readyz');
    expect([ready.status, ready.body.code]).toEqual([503, 'storage_unavailable']);
    expect(ready.headers.get('retry-after')).toBe('5');

    // Space comes back: readiness and writes return without a restart.
    rmSync(filler);
    const recoveredIn = Date.now();
    await eventually(async () => ((await call(base, 'GET', '/readyz')).status === 200 ? true : undefined), 20_000);
    const afterwards = await writeLoad(base, { customerKey, petId, rounds: 20, concurrency: 2 }, emptyTally());
    expect(afterwards.unexpected).toEqual([]);
    expect(afterwards.refused).toEqual({ accounts: 0, keys: 0, orders: 0, messages: 0 });
    console.log(
      `disk full: acknowledged ${JSON.stringify(tally.acknowledged)}, refused ${JSON.stringify(tally.refused)}; ` +
        `ready again ${Date.now() - recoveredIn} ms after space returned`,
    );

    expect(await server.stop()).toBe(0);
    server = undefined;
    const stored = storedRows(path);
    for (const kind of allKinds) {
      expect({ kind, stored: stored[kind] }).toEqual({ kind, stored: tally.acknowledged[kind] + afterwards.acknowledged[kind] });
    }
  });
});
