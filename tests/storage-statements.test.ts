// What placing an order asks of the storage, on the engine the suite runs on, and on
// PostgreSQL what reaches the server: the hot paths run named prepared statements (parsed
// and planned once per connection), and an order is checked and written in one statement
// (db/pg/storage.ts); and the pool holds DATABASE_POOL_SIZE connections.
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { prepareStorage } from '../db/open';
import { createStore } from '../domain/store';
import { loadConfig } from '../server/config';
import { createPgDatabase, testDatabaseUrl, testStorage } from './helpers';

describe('placing an order through the storage port', () => {
  const { storage, query } = testStorage();
  const store = createStore(storage);
  let accountId = 0;

  beforeAll(async () => {
    const account = await storage.insertAccount({
      email: 'statements@example.com',
      passwordHash: 'x',
      role: 'customer',
      createdAt: '2026-01-01T00:00:00Z',
    });
    accountId = account!.id;
  });

  async function stockedPet(quantity: number) {
    const category = await store.categories.create({ name: `Statements ${Math.random()}` });
    const pet = await store.pets.create({ name: 'Counted', categoryId: category.id, status: 'available' });
    await store.inventory.setQuantity(pet.id, quantity);
    return pet.id;
  }

  it('writes the stock left and the order, keeping the status while stock remains', async () => {
    const petId = await stockedPet(3);
    const { outcome } = await store.orders.place({ accountId, petId, quantity: 2 });
    expect(outcome).toEqual({ ok: true, value: expect.objectContaining({ petId, quantity: 2, complete: false }) });
    expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 1, status: 'available' });
    const orders = await query('select quantity from orders where pet_id = ?', petId);
    expect(orders.map((o) => Number(o.quantity))).toEqual([2]);
  });

  it('makes the pet pending with the order that takes its last unit', async () => {
    const petId = await stockedPet(2);
    await store.orders.place({ accountId, petId, quantity: 2 });
    expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 0, status: 'pending' });
    expect(await storage.findPet(petId)).toMatchObject({ status: 'pending' });
  });

  if (testDatabaseUrl) {
    const adminUrl = testDatabaseUrl;
    describe('on PostgreSQL', () => {
      const spy = jest.spyOn(Client.prototype, 'query');
      afterAll(() => spy.mockRestore());
      /** What each query sent since `from` was: a prepared statement's name, or the text of an unnamed one. */
      const sent = (from: number) =>
        spy.mock.calls
          .slice(from)
          .map(([config]) => (typeof config === 'string' ? config : ((config as { name?: string }).name ?? 'unnamed')));

      it('places an order in one round trip: one statement that checks, takes the stock and inserts, with no transaction around it', async () => {
        const petId = await stockedPet(5);
        const from = spy.mock.calls.length;
        await store.orders.place({ accountId, petId, quantity: 5 });
        expect(sent(from)).toEqual(['place_order']);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 0, status: 'pending' });
      });

      it('refuses an order in the same one round trip, writing nothing', async () => {
        const petId = await stockedPet(2);
        const from = spy.mock.calls.length;
        await expect(store.orders.place({ accountId, petId, quantity: 3 })).rejects.toMatchObject({ code: 'insufficient_stock' });
        expect(sent(from)).toEqual(['place_order']);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 2, status: 'available' });
        expect(await query('select id from orders where pet_id = ?', petId)).toEqual([]);
      });

      it('places an order with an Idempotency-Key in one transaction: the key locked and read, the order, the outcome saved', async () => {
        const petId = await stockedPet(5);
        const from = spy.mock.calls.length;
        await store.orders.place({ accountId, petId, quantity: 1 }, `statements-${petId}`);
        expect(sent(from)).toEqual(['begin', 'unnamed', 'find_idempotency', 'place_order', 'unnamed', 'commit']);
      });

      it("reads a key's owner and a pet with one named statement each", async () => {
        const petId = await stockedPet(1);
        const from = spy.mock.calls.length;
        await storage.findKeyOwner('no such hash');
        await storage.findPet(petId);
        expect(sent(from)).toEqual(['find_key_owner', 'find_pet']);
      });

      it('opens at most DATABASE_POOL_SIZE connections, however many calls wait', async () => {
        const name = `petstore_pool_${randomBytes(6).toString('hex')}`;
        const config = loadConfig({ DATABASE_URL: await createPgDatabase(adminUrl, name), DATABASE_POOL_SIZE: '2' });
        const pooled = (await prepareStorage({ ...config, seedDemoData: false })).storage;
        try {
          await Promise.all(Array.from({ length: 12 }, async () => pooled.findPet(1)));
          const [row] = await query('select count(*)::int as n from pg_stat_activity where datname = ?', name);
          expect(row?.n).toBe(2);
        } finally {
          await pooled.close();
        }
      });
    });
  }
});
