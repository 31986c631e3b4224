// Inside storage.transaction(work), a call on the outer storage instead of work's `tx`
// fails at once and names the operation (db/transaction-guard.ts), on either engine:
// otherwise SQLite would wait forever for the lock its own transaction holds, and
// PostgreSQL would run it outside the transaction.
import { setupApp } from './helpers';

describe('a storage call on the outer storage inside a transaction', () => {
  const t = setupApp();

  it('fails at once, naming the operation and the way out', async () => {
    const category = await t.repos.categories.create({ name: 'Guarded' });
    await expect(
      t.storage.transaction(async (tx) => {
        await tx.lockCategory(category.id);
        return t.storage.findCategory(category.id);
      }),
    ).rejects.toThrow("storage.findCategory() was called inside a transaction: use the transaction's own tx.findCategory()");
    await expect(t.storage.transaction(async () => t.storage.transaction(async () => 1))).rejects.toThrow(
      'storage.transaction() was called inside a transaction',
    );
  });

  it('lets other requests use the outer storage while a transaction is open', async () => {
    const category = await t.repos.categories.create({ name: 'Concurrent' });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const tx = t.storage.transaction(async (q) => {
      await q.lockCategory(category.id);
      await held;
    });
    // Another request, started outside the transaction, reads and writes meanwhile.
    const other = Promise.all([t.storage.findCategory(category.id), t.repos.categories.create({ name: 'Beside it' })]);
    release();
    await tx;
    const [found, created] = await other;
    expect(found?.id).toBe(category.id);
    expect(created.name).toBe('Beside it');
  });
});
