// WAL checkpoints run in their own thread, not inside the commits of requests
// (db/checkpointer.ts; docs/storage.md, "Checkpoints").
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCheckpointer } from '../db/checkpointer';
import { createDatabase } from '../db/client';
import { createSqliteStorage } from '../db/sqlite-storage';

const dir = mkdtempSync(join(tmpdir(), 'petstore-checkpoints-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
const newFile = () => join(dir, `db-${++files}.sqlite`);
const autoCheckpointPages = (db: ReturnType<typeof createDatabase>) => db.$client.pragma('wal_autocheckpoint', { simple: true });

/** Commits about 1.5 MB, 500 rows of 3,000 characters, one commit each. */
async function writeMuch(storage: ReturnType<typeof createSqliteStorage>) {
  for (let i = 0; i < 500; i++) {
    await storage.insertCategory({ name: `Category ${i}`, nameKey: `category ${i}`, description: 'x'.repeat(3000) });
  }
}

/** Waits (at most 5 s) until `test` holds; returns whether it did. */
async function eventually(test: () => boolean): Promise<boolean> {
  for (let i = 0; i < 100 && !test(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return test();
}

describe('WAL checkpoints', () => {
  it('leave the commits: the thread copies the log into the database file', async () => {
    const path = newFile();
    const db = createDatabase(path);
    const storage = createSqliteStorage(db, { checkpointer: startCheckpointer(db.$client, { intervalMs: 20, startAfterMs: 0 }) });
    const before = statSync(path).size;
    // The first change starts the thread; once it is up, the commits themselves checkpoint
    // only past 10000 pages.
    expect(autoCheckpointPages(db)).toBe(1000);
    await storage.insertCategory({ name: 'First', nameKey: 'first', description: null });
    expect(await eventually(() => autoCheckpointPages(db) === 10_000)).toBe(true);
    await writeMuch(storage);
    expect(await eventually(() => statSync(path).size > before + 1_000_000)).toBe(true);
    await storage.close();
  });

  it('without the thread, the same commits leave the database file as it was until a checkpoint', async () => {
    const path = newFile();
    const db = createDatabase(path);
    db.$client.pragma('wal_autocheckpoint = 10000');
    const storage = createSqliteStorage(db);
    const before = statSync(path).size;
    await writeMuch(storage);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(statSync(path).size).toBe(before);
    await storage.close();
  });

  it('run in a thread only while rows change: none before the first change, none once they stop', async () => {
    const path = newFile();
    const db = createDatabase(path);
    const idleAfterMs = 1000;
    const storage = createSqliteStorage(db, {
      checkpointer: startCheckpointer(db.$client, { intervalMs: 20, startAfterMs: 0, idleAfterMs }),
    });
    // No row changed, no thread: the commits keep SQLite's own checkpoints. The message
    // delivery's transaction, every 100 ms in a service, mostly changes none.
    for (let i = 0; i < 15; i++) {
      expect(await storage.deliverDue(new Date().toISOString(), new Date().toISOString(), 100)).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, idleAfterMs / 10));
    }
    expect(autoCheckpointPages(db)).toBe(1000);
    await storage.insertCategory({ name: 'First', nameKey: 'first', description: null });
    expect(await eventually(() => autoCheckpointPages(db) === 10_000)).toBe(true);
    // Changes keep it: one every tenth of idleAfterMs, for two and a half times idleAfterMs.
    for (let i = 0; i < 25; i++) {
      await storage.insertCategory({ name: `Busy ${i}`, nameKey: `busy ${i}`, description: null });
      await new Promise((resolve) => setTimeout(resolve, idleAfterMs / 10));
      expect(autoCheckpointPages(db)).toBe(10_000);
    }
    // No change for idleAfterMs: the thread copies the log and ends.
    expect(await eventually(() => autoCheckpointPages(db) === 1000)).toBe(true);
    const before = statSync(path).size;
    await writeMuch(storage);
    // A change after it ended starts it again, and the log reaches the database file.
    expect(await eventually(() => autoCheckpointPages(db) === 10_000)).toBe(true);
    expect(await eventually(() => statSync(path).size > before + 1_000_000)).toBe(true);
    await storage.close();
  });

  it('stop when the storage closes, which leaves no log behind', async () => {
    const path = newFile();
    const db = createDatabase(path);
    const storage = createSqliteStorage(db, { checkpointer: startCheckpointer(db.$client, { intervalMs: 20, startAfterMs: 0 }) });
    await writeMuch(storage);
    expect(existsSync(`${path}-wal`)).toBe(true);
    await storage.close();
    // The last connection to close checkpoints and removes the log: the thread's was closed first.
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it('keep a closing process alive until the thread has stopped and the database is closed', () => {
    const path = newFile();
    // Nothing else is left on this process's event loop while the storage closes.
    const script = `
      const { createDatabase } = require('./db/client');
      const { createSqliteStorage } = require('./db/sqlite-storage');
      const { startCheckpointer } = require('./db/checkpointer');
      const db = createDatabase(${JSON.stringify(path)});
      const storage = createSqliteStorage(db, { checkpointer: startCheckpointer(db.$client, { startAfterMs: 0 }) });
      // A change starts the thread; closed once the thread is up.
      storage
        .insertCategory({ name: 'First', nameKey: 'first', description: null })
        .then(() => setTimeout(() => storage.close().then(() => console.log('closed')), 200));`;
    // The sources, through tsx (as the scripts run), in a process of its own.
    const out = execFileSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: join(__dirname, '..'), encoding: 'utf8' });
    expect(out).toContain('closed');
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it('hand checkpoints back to the commits when the thread fails, and say why', async () => {
    const path = newFile();
    const db = createDatabase(path);
    // The thread opens the file by name, and it is gone.
    unlinkSync(path);
    const errors: Error[] = [];
    const checkpointer = startCheckpointer(db.$client, { startAfterMs: 0, onError: (error) => errors.push(error) });
    expect(checkpointer).not.toBeNull();
    // A changed row starts the thread.
    db.$client.prepare("INSERT INTO categories (name, name_key) VALUES ('First', 'first')").run();
    expect(await eventually(() => errors.length > 0)).toBe(true);
    expect(String(errors[0])).toMatch(/SQLITE_CANTOPEN: unable to open database file/);
    expect(autoCheckpointPages(db)).toBe(1000);
    await checkpointer!.stop();
    db.$client.close();
  });

  it('are left to SQLite for a database in memory', () => {
    const db = createDatabase(':memory:');
    expect(startCheckpointer(db.$client)).toBeNull();
    db.$client.close();
  });
});
