// The SQLite storage serves every request of a process on one connection while domain/
// awaits between a rule's statements (domain/storage.ts explains why). These tests hold a
// transaction open at an await, then check what other requests' operations see and do.
// SQLite always, whichever engine the suite runs on: PostgreSQL gives each transaction its
// own pooled connection, so there is nothing to interleave.
import { setupApp } from './helpers';

/** A promise the test resolves when it chooses: the transaction waits on it mid-way. */
function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('a transaction held open at an await', () => {
  const t = setupApp({ databasePath: ':memory:' });
  let petId: number;
  let accountId: number;

  beforeAll(async () => {
    const category = await t.repos.categories.create({ name: 'Interleaving' });
    petId = (await t.repos.pets.create({ name: 'Held', categoryId: category.id, status: 'available' })).id;
    await t.repos.inventory.setQuantity(petId, 5);
    accountId = (await t.repos.accounts.create({ email: 'interleave@example.com', passwordHash: 'unused', role: 'customer' }))!.id;
  });

  it('hides its uncommitted write from a read outside it, which sees the committed value', async () => {
    const g = gate();
    const entered = gate();
    const tx = t.storage.transaction(async (q) => {
      await q.lockStock(petId);
      await q.setStock(petId, 1);
      entered.open();
      await g.promise;
    });
    await entered.promise;
    const read = Promise.resolve(t.storage.findInventory(petId));
    // Let the read run if it could: it must still be waiting for the commit.
    let settled = false;
    void read.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    g.open();
    await tx;
    expect((await read)?.quantity).toBe(1);
  });

  it('keeps a write made outside it when it rolls back', async () => {
    const g = gate();
    const entered = gate();
    const tx = t.storage.transaction(async (q) => {
      await q.setStock(petId, 3);
      entered.open();
      await g.promise;
      throw new Error('roll back');
    });
    await entered.promise;
    const outside = Promise.resolve(t.storage.insertMessage({ id: `msg_${'a'.repeat(24)}`, accountId, message: 'kept', createdAt: new Date().toISOString() }));
    g.open();
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
    // No timing margin: this storage does no I/O, so once the event loop has turned, every
    // step the second transaction could take without waiting for the first has been taken.
    await new Promise((r) => setImmediate(r));
    expect(steps).toEqual(['first:begin']);
    g.open();
    await Promise.all([first, second]);
    expect(steps).toEqual(['first:begin', 'first:end', 'second:begin', 'second:end']);
  });
});
