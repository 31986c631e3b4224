// What placing an order asks of the storage, on the engine the suite runs on, and on
// PostgreSQL what reaches the server: the hot paths run named prepared statements (parsed
// and planned once per connection), and an order is checked and written in one statement
// (db/pg/storage.ts); and the pool holds DATABASE_POOL_SIZE connections.
import { randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { Socket } from 'node:net';
import { Query } from 'pg';
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
      // Each query sent on a connection, with the round trip it went in: a query written
      // while every earlier one on that connection is answered (its ReadyForQuery read)
      // starts a new one; one written before that shares the trip (the connections are
      // pipelined, db/pg/connection.ts: without it, a query waits in the client's queue
      // and is written only after the answer before it).
      const sentQueries: Array<{ name: string; values?: unknown[]; trip: number; connection: EventEmitter }> = [];
      const unanswered = new WeakMap<EventEmitter, number>();
      let trips = 0;
      type Sendable = { name?: string; text: string; values?: unknown[]; submit(connection: EventEmitter): unknown };
      const prototype = Query.prototype as unknown as Sendable;
      const original = Object.getOwnPropertyDescriptor(prototype, 'submit')!.value as Sendable['submit'];
      const spy = jest.spyOn(prototype, 'submit').mockImplementation(function (this: Sendable, connection: EventEmitter) {
        if (!unanswered.has(connection)) {
          unanswered.set(connection, 0);
          // Ahead of the client's own listener, which writes the next query of its queue.
          connection.prependListener('readyForQuery', () => unanswered.set(connection, (unanswered.get(connection) ?? 1) - 1));
        }
        const waiting = unanswered.get(connection)!;
        if (waiting === 0) trips++;
        unanswered.set(connection, waiting + 1);
        sentQueries.push({
          name: this.name ?? (this.text.length < 20 ? this.text : 'unnamed'),
          values: this.values,
          trip: trips,
          connection,
        });
        return original.call(this, connection);
      });
      afterAll(() => spy.mockRestore());
      /** What was sent since `from` (an index into sentQueries), each round trip's queries together. */
      const roundTrips = (from: number) => {
        const grouped = new Map<number, string[]>();
        for (const { name, trip } of sentQueries.slice(from)) grouped.set(trip, [...(grouped.get(trip) ?? []), name]);
        return [...grouped.values()];
      };

      it('places an order in one round trip: one statement that checks, takes the stock and inserts, with no transaction around it', async () => {
        const petId = await stockedPet(5);
        const from = sentQueries.length;
        await store.orders.place({ accountId, petId, quantity: 5 });
        expect(roundTrips(from)).toEqual([['place_order']]);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 0, status: 'pending' });
      });

      it('refuses an order in the same one round trip, writing nothing', async () => {
        const petId = await stockedPet(2);
        const from = sentQueries.length;
        await expect(store.orders.place({ accountId, petId, quantity: 3 })).rejects.toMatchObject({ code: 'insufficient_stock' });
        expect(roundTrips(from)).toEqual([['place_order']]);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 2, status: 'available' });
        expect(await query('select id from orders where pet_id = ?', petId)).toEqual([]);
      });

      it("places an order with an Idempotency-Key in three round trips with the key's owner: the key locked and read with the order, then the outcome saved with the COMMIT", async () => {
        const petId = await stockedPet(5);
        const from = sentQueries.length;
        // What POST /store/orders asks: the API key's owner, then the order.
        await storage.findKeyOwner('no such hash');
        await store.orders.place({ accountId, petId, quantity: 1 }, `statements-${petId}`);
        expect(roundTrips(from)).toEqual([
          ['find_key_owner'],
          ['begin', 'lock_idempotency_key', 'find_idempotency', 'place_order_once'],
          ['save_idempotency', 'commit'],
        ]);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 4, status: 'available' });
      });

      it('replays an order with its Idempotency-Key in two round trips, placing nothing', async () => {
        const petId = await stockedPet(5);
        const key = `replayed-${petId}`;
        const first = await store.orders.place({ accountId, petId, quantity: 2 }, key);
        const from = sentQueries.length;
        const again = await store.orders.place({ accountId, petId, quantity: 2 }, key);
        expect(again).toEqual({ outcome: first.outcome, replayed: true });
        expect(roundTrips(from)).toEqual([['begin', 'lock_idempotency_key', 'find_idempotency', 'place_order_once'], ['commit']]);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 3, status: 'available' });
      });

      it('refuses the key with another body, placing nothing', async () => {
        const petId = await stockedPet(5);
        const key = `reused-${petId}`;
        await store.orders.place({ accountId, petId, quantity: 1 }, key);
        await expect(store.orders.place({ accountId, petId, quantity: 2 }, key)).rejects.toMatchObject({ code: 'idempotency_key_reused' });
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 4, status: 'available' });
      });

      it("reads a key's owner and a pet with one named statement each", async () => {
        const petId = await stockedPet(1);
        const from = sentQueries.length;
        await storage.findKeyOwner('no such hash');
        await storage.findPet(petId);
        expect(roundTrips(from)).toEqual([['find_key_owner'], ['find_pet']]);
      });

      it('sends the point reads asked for in one turn as one statement each, each key once, in one write and one round trip', async () => {
        const petId = await stockedPet(1);
        const other = await stockedPet(1);
        const missing = other + 1_000_000;
        const pgPort = Number(new URL(adminUrl).port);
        // The writes to the server's sockets (a stream calls _writev for what a cork held).
        let writes = 0;
        type Write = (this: Socket, ...args: unknown[]) => unknown;
        const counted = (method: '_write' | '_writev') => {
          const original = Object.getOwnPropertyDescriptor(Socket.prototype, method)!.value as Write;
          return jest.spyOn(Socket.prototype, method).mockImplementation(function (this: Socket, ...args: unknown[]) {
            if (this.remotePort === pgPort) writes++;
            return original.apply(this, args);
          } as Write as never);
        };
        const spies = [counted('_write'), counted('_writev')];
        const from = sentQueries.length;
        const asked = [petId, other, missing, petId, petId, other, petId];
        try {
          const [owner, ...found] = await Promise.all([storage.findKeyOwner('no such hash'), ...asked.map((id) => storage.findPet(id))]);
          expect(owner).toBeNull();
          // Each caller gets the row of the pet it asked for, or null.
          expect(found.map((pet) => pet?.id ?? null)).toEqual(asked.map((id) => (id === missing ? null : id)));
        } finally {
          for (const spy of spies) spy.mockRestore();
        }
        expect(roundTrips(from)).toEqual([['find_key_owner', 'find_pet']]);
        expect(sentQueries.slice(from).map((q) => q.values)).toEqual([[['no such hash']], [[petId, other, missing].map(String)]]);
        expect(new Set(sentQueries.slice(from).map((q) => q.connection)).size).toBe(1);
        expect(writes).toBe(1);
      });

      it('sends the orders placed in one turn as a statement each, in one round trip on one connection, each answered on its own', async () => {
        const petId = await stockedPet(3);
        const other = await stockedPet(1);
        const from = sentQueries.length;
        const placed = await Promise.allSettled(
          [petId, petId, other, petId, other].map((id) => store.orders.place({ accountId, petId: id, quantity: 1 })),
        );
        // In the order asked: the third of `petId` takes its last unit, the second of `other` finds none.
        expect(placed.map((p) => (p.status === 'fulfilled' ? 'placed' : (p.reason as { code: string }).code))).toEqual([
          'placed',
          'placed',
          'placed',
          'placed',
          'pet_not_available',
        ]);
        expect(roundTrips(from)).toEqual([Array(5).fill('place_order')]);
        expect(new Set(sentQueries.slice(from).map((q) => q.connection)).size).toBe(1);
        expect(await storage.findInventory(petId)).toEqual({ petId, quantity: 0, status: 'pending' });
        expect(await storage.findInventory(other)).toEqual({ petId: other, quantity: 0, status: 'pending' });
      });

      it("reads a key's owner and a pet in a transaction with the same statements, one key each", async () => {
        const petId = await stockedPet(1);
        const from = sentQueries.length;
        const found = await storage.transaction(async (tx) => [await tx.findKeyOwner('no such hash'), await tx.findPet(petId)]);
        expect(found).toEqual([null, expect.objectContaining({ id: petId })]);
        const reads = sentQueries.slice(from).filter((q) => q.name.startsWith('find_'));
        expect(reads.map((q) => [q.name, q.values])).toEqual([
          ['find_key_owner', [['no such hash']]],
          ['find_pet', [[String(petId)]]],
        ]);
      });

      it('opens at most DATABASE_POOL_SIZE connections, however many calls wait', async () => {
        const name = `petstore_pool_${randomBytes(6).toString('hex')}`;
        const config = loadConfig({ DATABASE_URL: await createPgDatabase(adminUrl, name), DATABASE_POOL_SIZE: '2' });
        const pooled = (await prepareStorage({ ...config, seedDemoData: false })).storage;
        try {
          // Point reads share connections, the others take one each: both stay within the bound.
          await Promise.all(Array.from({ length: 12 }, async (_, i) => (i % 2 ? pooled.findPet(1) : pooled.findInventory(1))));
          const [row] = await query('select count(*)::int as n from pg_stat_activity where datname = ?', name);
          expect(row?.n).toBe(2);
        } finally {
          await pooled.close();
        }
      });
    });
  }
});
