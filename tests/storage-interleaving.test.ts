// The SQLite storage writes for every request of a process on one connection while domain/
// awaits between a rule's statements (domain/storage.ts explains why). These tests hold a
// transaction open at an await, or start several in one turn, then check what other
// requests' operations see and do: a read connection that sees committed rows only, and
// transactions sharing a COMMIT.
// SQLite always, whichever engine the suite runs on: PostgreSQL gives each transaction its
// own pooled connection, so there is nothing to interleave.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createDatabase } from '../db/client';
import { maxBatch } from '../db/sqlite-storage';
import type { Queries, Storage } from '../domain/storage';
import { setupApp, type TestApp } from './helpers';

/** A promise the test resolves when it chooses: the transaction waits on it mid-way. */
function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Starts a transaction that runs `first`, then holds it open until `release()` (and runs
 * `last` if given, whose throw rolls it back); resolves once it is holding.
 */
async function holdOpen(storage: Storage, first: (q: Queries) => unknown, last?: () => void) {
  const g = gate();
  const entered = gate();
  const tx = storage.transaction(async (q) => {
    await first(q);
    entered.open();
    await g.promise;
    last?.();
  });
  await entered.promise;
  return { tx, release: g.open };
}

/** A pet with 5 in stock and a customer account, named after the test group. */
async function seedPetAndCustomer(t: TestApp, name: string) {
  const category = await t.repos.categories.create({ name });
  const petId = (await t.repos.pets.create({ name: `${name} pet`, categoryId: category.id, status: 'available' })).id;
  await t.repos.inventory.setQuantity(petId, 5);
  const accountId = (await t.repos.accounts.create({
    email: `${name.toLowerCase()}@example.com`,
    passwordHash: 'unused',
    role: 'customer',
  }))!.id;
  return { petId, accountId };
}

describe('a transaction held open at an await', () => {
  const t = setupApp({ databasePath: join(mkdtempSync(join(tmpdir(), 'petstore-held-')), 'store.db') });
  let petId: number;
  let accountId: number;

  beforeAll(async () => {
    ({ petId, accountId } = await seedPetAndCustomer(t, 'Interleaving'));
  });

  it('hides its uncommitted write from a read outside it, which sees the committed value at once', async () => {
    const before = (await t.storage.findInventory(petId))?.quantity;
    const { tx, release } = await holdOpen(t.storage, async (q) => {
      await q.lockStock(petId);
      await q.setStock(petId, 1);
    });
    expect((await t.storage.findInventory(petId))?.quantity).toBe(before);
    release();
    await tx;
    expect((await t.storage.findInventory(petId))?.quantity).toBe(1);
  });

  it('keeps a write made outside it when it rolls back', async () => {
    const { tx, release } = await holdOpen(
      t.storage,
      (q) => q.setStock(petId, 3),
      () => {
        throw new Error('roll back');
      },
    );
    const outside = Promise.resolve(
      t.storage.insertMessage({ id: `msg_${'a'.repeat(24)}`, accountId, message: 'kept', createdAt: new Date().toISOString() }),
    );
    release();
    await expect(tx).rejects.toThrow('roll back');
    await outside;
    expect((await t.storage.findMessage(accountId, `msg_${'a'.repeat(24)}`))?.message).toBe('kept');
    // The rolled-back stock change is gone.
    expect((await t.storage.findInventory(petId))?.quantity).toBe(1);
  });

  it('runs two transactions one after the other, never interleaved', async () => {
    const steps: string[] = [];
    const g = gate();
    const entered = gate();
    const first = t.storage.transaction(async (q) => {
      steps.push('first:begin');
      await q.lockStock(petId);
      entered.open();
      await g.promise;
      steps.push('first:end');
    });
    const second = t.storage.transaction(async (q) => {
      steps.push('second:begin');
      await q.lockStock(petId);
      steps.push('second:end');
    });
    await entered.promise;
    // No timing margin: the second waits for the lock the first holds, not for I/O, so once
    // the event loop has turned, every step it could take without the first has been taken.
    await new Promise((r) => setImmediate(r));
    expect(steps).toEqual(['first:begin']);
    g.open();
    await Promise.all([first, second]);
    expect(steps).toEqual(['first:begin', 'first:end', 'second:begin', 'second:end']);
  });
});

// On a file the storage has a second, read-only connection, and the transactions that
// start in one turn of the event loop run at its end and share one COMMIT
// (db/sqlite-storage.ts): reads never wait, and no transaction answers before its COMMIT.
describe('on a file: group commit and the read connection', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-group-commit-'));
  const path = join(dir, 'store.db');
  const db = createDatabase(path);
  const t = setupApp({ db });
  // Another connection to the file, as another process would have.
  const other = new Database(path, { readonly: true });
  const stockSeenElsewhere = (id: number) =>
    (other.prepare('select quantity from inventory where pet_id = ?').get(id) as { quantity: number }).quantity;
  let petId: number;
  let accountId: number;

  beforeAll(async () => {
    ({ petId, accountId } = await seedPetAndCustomer(t, 'Grouped'));
  });
  afterAll(async () => {
    other.close();
    await t.storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a read at once with the committed value while a transaction is open', async () => {
    const { tx, release } = await holdOpen(t.storage, (q) => q.setStock(petId, 1));
    // Not a promise: the read connection does not wait for the writer.
    const read = t.storage.findInventory(petId);
    expect(read).not.toBeInstanceOf(Promise);
    expect((read as Awaited<typeof read>)?.quantity).toBe(5);
    release();
    await tx;
    expect((await t.storage.findInventory(petId))?.quantity).toBe(1);
  });

  it('answers a transaction only once its write is committed, seen by another connection', async () => {
    const seen: number[] = [];
    await Promise.all(
      [2, 3, 4].map((n) =>
        t.storage
          .transaction(async (q) => {
            await q.setStock(petId, n);
            return n;
          })
          .then((m) => seen.push(m, stockSeenElsewhere(petId))),
      ),
    );
    // Started in one turn, the three share one COMMIT: each learns of it with the last one's write on the file.
    expect(seen).toEqual([2, 4, 3, 4, 4, 4]);
  });

  it('runs the transactions started in a turn of the event loop at its end, in the order they started', async () => {
    const steps: string[] = [];
    const started = ['a', 'b'].map((name) =>
      t.storage.transaction(async (q) => {
        steps.push(`${name}:begin`);
        await q.lockStock(petId);
        steps.push(`${name}:end`);
      }),
    );
    // Twenty turns of the microtask queue, far more than either needs to run whole when
    // started at once, and still within this turn of the event loop: neither has begun.
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(steps).toEqual([]);
    await Promise.all(started);
    expect(steps).toEqual(['a:begin', 'a:end', 'b:begin', 'b:end']);
  });

  it(`commits at most ${maxBatch} transactions together: one more waits for the next COMMIT`, async () => {
    const ids = Array.from({ length: maxBatch + 1 }, (_, n) => `msg_${String(n).padStart(24, 'c')}`);
    const seenAtAnswer: number[] = [];
    const count = () =>
      (other.prepare(`select count(*) as n from messages where id in (${ids.map(() => '?').join(', ')})`).get(...ids) as { n: number }).n;
    await Promise.all(
      ids.map((id) =>
        t.storage
          .transaction(async (q) => q.insertMessage({ id, accountId, message: 'grouped', createdAt: new Date().toISOString() }))
          .then(() => seenAtAnswer.push(count())),
      ),
    );
    expect(seenAtAnswer).toEqual([...Array<number>(maxBatch).fill(maxBatch), maxBatch + 1]);
  });

  it('rolls back only the transaction that throws; the others in its commit keep their writes', async () => {
    const id = `msg_${'g'.repeat(24)}`;
    const results = await Promise.allSettled([
      t.storage.transaction(async (q) => q.setStock(petId, 7)),
      t.storage.transaction(async (q) => {
        await q.setPetStatus(petId, 'sold');
        throw new Error('refused');
      }),
      t.storage.transaction(async (q) => q.insertMessage({ id, accountId, message: 'kept', createdAt: new Date().toISOString() })),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(stockSeenElsewhere(petId)).toBe(7);
    expect((await t.storage.findPet(petId))?.status).toBe('available');
    expect((await t.storage.findMessage(accountId, id))?.message).toBe('kept');
  });

  it('fails every transaction of a COMMIT that fails, keeping none of their writes, and goes on', async () => {
    const results = await Promise.allSettled([
      t.storage.transaction(async (q) => q.setStock(petId, 8)),
      t.storage.transaction(async (q) => {
        // A foreign key checked only at COMMIT (until then, for this transaction only): the shared COMMIT fails.
        db.$client.pragma('defer_foreign_keys = ON');
        await q.insertMessage({ id: `msg_${'h'.repeat(24)}`, accountId: 999_999, message: 'orphan', createdAt: new Date().toISOString() });
      }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(stockSeenElsewhere(petId)).toBe(7);
    expect(await t.storage.findMessage(999_999, `msg_${'h'.repeat(24)}`)).toBeNull();
    await t.storage.transaction(async (q) => q.setStock(petId, 9));
    expect(stockSeenElsewhere(petId)).toBe(9);
  });

  it('lets a write outside a transaction wait for the open one, then commits it', async () => {
    const { tx, release } = await holdOpen(t.storage, (q) => q.setStock(petId, 6));
    const id = `msg_${'i'.repeat(24)}`;
    let settled = false;
    const outside = Promise.resolve(t.storage.insertMessage({ id, accountId, message: 'after', createdAt: new Date().toISOString() })).then(
      () => (settled = true),
    );
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    release();
    await Promise.all([tx, outside]);
    expect(other.prepare('select message from messages where id = ?').get(id)).toEqual({ message: 'after' });
    expect(stockSeenElsewhere(petId)).toBe(6);
  });
});

// The reads outside a transaction made before the microtask queue drains share one read
// transaction on the read connection (db/sqlite-storage.ts, readSnapshot; docs/storage.md,
// "Reads"): what another process commits meanwhile is seen from the next macrotask on, and
// a write of this process from its COMMIT on.
describe('on a file: the reads of a macrotask share one snapshot', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-read-snapshot-'));
  const path = join(dir, 'store.db');
  const t = setupApp({ db: createDatabase(path) });
  // Another connection that writes to the file, as another process would.
  const other = new Database(path);
  const setElsewhere = (id: number, quantity: number) =>
    other.prepare('update inventory set quantity = ? where pet_id = ?').run(quantity, id);
  let petId: number;

  beforeAll(async () => {
    ({ petId } = await seedPetAndCustomer(t, 'Snapshot'));
  });
  afterAll(async () => {
    other.close();
    await t.storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sees another connection's COMMIT from the next macrotask, not within the one its snapshot began in", async () => {
    await t.storage.transaction(async (q) => q.setStock(petId, 5));
    const first = t.storage.findInventory(petId);
    setElsewhere(petId, 3);
    const same = t.storage.findInventory(petId);
    expect((await first)?.quantity).toBe(5);
    expect((await same)?.quantity).toBe(5);
    await new Promise((r) => setImmediate(r));
    expect((await t.storage.findInventory(petId))?.quantity).toBe(3);
  });

  it('ends the snapshot when the microtask queue drains: a read after an await sees the newer COMMIT', async () => {
    const first = t.storage.findInventory(petId);
    setElsewhere(petId, 2);
    // Queued after the one the snapshot's BEGIN queued, which ends it first.
    await new Promise<void>((r) => queueMicrotask(r));
    expect((await first)?.quantity).toBe(3);
    expect((await t.storage.findInventory(petId))?.quantity).toBe(2);
  });

  it('sees its own acknowledged write at once', async () => {
    expect((await t.storage.findInventory(petId))?.quantity).toBe(2);
    await t.storage.transaction(async (q) => q.setStock(petId, 9));
    expect((await t.storage.findInventory(petId))?.quantity).toBe(9);
  });
});
