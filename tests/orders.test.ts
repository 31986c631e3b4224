// The store rules (docs/decisions.md, Store rules), one by one, as a customer and an admin
// live them; plus who may see which order (Who may do what) and Idempotency-Key.
import request from 'supertest';
import { admin, createPet, customer, expectError, setupApp, type Caller } from './helpers';

describe('orders', () => {
  const t = setupApp();
  let boss: Caller;
  let ada: Caller;
  let bob: Caller;

  beforeAll(async () => {
    boss = await admin(t);
    ada = await customer(t.app);
    bob = await customer(t.app);
  });

  const order = (who: Caller, body: object, key?: string) => {
    const req = request(t.app).post('/store/orders').set(who.auth);
    return (key === undefined ? req : req.set('Idempotency-Key', key)).send(body);
  };
  const stockOf = async (petId: number) => (await request(t.app).get(`/store/inventory/${petId}`).set(boss.auth)).body;
  const statusOf = async (petId: number) => (await stockOf(petId)).status as string;
  const fulfil = (orderId: number, body: object = { complete: true }, who: Caller = boss) =>
    request(t.app).patch(`/store/orders/${orderId}`).set(who.auth).send(body);
  const cancel = (orderId: number, who: Caller) => request(t.app).delete(`/store/orders/${orderId}`).set(who.auth);
  const ordersOf = async (who: Caller, query = '') =>
    (await request(t.app).get(`/store/orders?limit=100${query}`).set(who.auth)).body as Array<{ id: number }>;

  describe('placing an order', () => {
    it('takes the quantity from stock and answers 201 with the order and its Location', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const res = await order(ada, { petId: pet.id, quantity: 2 });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(Number), petId: pet.id, quantity: 2, complete: false });
      expect(res.headers.location).toBe(`/store/orders/${res.body.id}`);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 3, status: 'available' });
      expect((await request(t.app).get(`/store/orders/${res.body.id}`).set(ada.auth)).body).toEqual(res.body);
    });

    it('orders one unit when no quantity is given', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      expect((await order(ada, { petId: pet.id })).body.quantity).toBe(1);
      expect((await stockOf(pet.id)).quantity).toBe(4);
    });

    it('refuses a pet that does not exist with 422 pet_not_found', async () => {
      expectError(await order(ada, { petId: 999999 }), 422, 'pet_not_found');
    });

    it.each(['pending', 'sold'])('refuses a %s pet with 409 pet_not_available', async (status) => {
      const pet = await createPet(t.app, boss, { stock: 3 });
      await request(t.app).put(`/pets/${pet.id}`).set(boss.auth).send({ name: pet.name, categoryId: pet.categoryId, status });
      expectError(await order(ada, { petId: pet.id }), 409, 'pet_not_available');
      expect((await stockOf(pet.id)).quantity).toBe(3);
    });

    it('refuses more than the stock with 409 insufficient_stock, taking nothing and recording nothing', async () => {
      const pet = await createPet(t.app, boss, { stock: 2 });
      const before = await ordersOf(ada);
      expectError(await order(ada, { petId: pet.id, quantity: 3 }), 409, 'insufficient_stock');
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 2, status: 'available' });
      expect(await ordersOf(ada)).toEqual(before);
    });

    it('refuses an available pet with no stock with 409 insufficient_stock', async () => {
      const pet = await createPet(t.app, boss);
      expectError(await order(ada, { petId: pet.id }), 409, 'insufficient_stock');
    });

    it('makes the pet pending when the stock reaches 0; the next order is 409 pet_not_available', async () => {
      const pet = await createPet(t.app, boss, { stock: 2 });
      await order(ada, { petId: pet.id }).expect(201);
      expect(await statusOf(pet.id)).toBe('available');
      await order(bob, { petId: pet.id }).expect(201);
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 0, status: 'pending' });
      expectError(await order(ada, { petId: pet.id }), 409, 'pet_not_available');
    });

    it('refuses a quantity outside 1..1000 and unknown fields with 400 validation_failed', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      expectError(await order(ada, { petId: pet.id, quantity: 0 }), 400, 'validation_failed');
      expectError(await order(ada, { petId: pet.id, quantity: 1001 }), 400, 'validation_failed');
      expectError(await order(ada, { petId: pet.id, complete: true }), 400, 'validation_failed');
      expect((await stockOf(pet.id)).quantity).toBe(5);
    });
  });

  describe('completing an order (admin)', () => {
    it('goes from false to true and sets shipDate to now when none is given', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id });
      const before = Date.now();
      const res = await fulfil(placed.body.id);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...placed.body, complete: true, shipDate: expect.any(String) });
      expect(Date.parse(res.body.shipDate)).toBeGreaterThanOrEqual(before - 1000);
      expect(Date.parse(res.body.shipDate)).toBeLessThanOrEqual(Date.now() + 1000);
    });

    it('keeps a shipDate that is given', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id });
      const res = await fulfil(placed.body.id, { complete: true, shipDate: '2030-01-02T03:04:05.000Z' });
      expect(res.body.shipDate).toBe('2030-01-02T03:04:05.000Z');
    });

    it('refuses a leap second, which it cannot store, with 400 validation_failed', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id });
      expectError(await fulfil(placed.body.id, { complete: true, shipDate: '2030-06-30T23:59:60Z' }), 400, 'validation_failed');
      expect((await request(t.app).get(`/store/orders/${placed.body.id}`).set(ada.auth)).body.complete).toBe(false);
    });

    it('is idempotent: completing again answers 200 and changes nothing, not even the shipDate', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id });
      const first = await fulfil(placed.body.id);
      const again = await fulfil(placed.body.id, { complete: true, shipDate: '2031-01-01T00:00:00.000Z' });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect((await stockOf(pet.id)).quantity).toBe(4);
    });

    it('cannot reopen an order: complete false is 400 validation_failed', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id });
      await fulfil(placed.body.id);
      expectError(await fulfil(placed.body.id, { complete: false }), 400, 'validation_failed');
      expect((await request(t.app).get(`/store/orders/${placed.body.id}`).set(ada.auth)).body.complete).toBe(true);
    });

    it('makes the pet sold when its last open order is completed with stock 0, not before', async () => {
      const pet = await createPet(t.app, boss, { stock: 3 });
      const first = await order(ada, { petId: pet.id, quantity: 2 });
      const second = await order(bob, { petId: pet.id, quantity: 1 });
      expect(await statusOf(pet.id)).toBe('pending');

      await fulfil(first.body.id).expect(200);
      expect(await statusOf(pet.id)).toBe('pending');
      await fulfil(second.body.id).expect(200);
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 0, status: 'sold' });
    });

    it('leaves the pet available when stock remains after the last open order is completed', async () => {
      const pet = await createPet(t.app, boss, { stock: 3 });
      const placed = await order(ada, { petId: pet.id });
      await fulfil(placed.body.id).expect(200);
      expect(await statusOf(pet.id)).toBe('available');
    });

    it('answers 404 for an unknown order', async () => {
      expectError(await fulfil(999999), 404, 'not_found');
    });
  });

  describe('cancelling an order', () => {
    it('returns the quantity to stock, makes a pending pet available, and removes the order', async () => {
      const pet = await createPet(t.app, boss, { stock: 2 });
      const placed = await order(ada, { petId: pet.id, quantity: 2 });
      expect(await statusOf(pet.id)).toBe('pending');

      expect((await cancel(placed.body.id, ada)).status).toBe(204);
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 2, status: 'available' });
      expectError(await request(t.app).get(`/store/orders/${placed.body.id}`).set(ada.auth), 404, 'not_found');
      expectError(await cancel(placed.body.id, ada), 404, 'not_found');
      await order(bob, { petId: pet.id, quantity: 2 }).expect(201);
    });

    it('refuses a completed order with 409 order_completed, changing nothing', async () => {
      const pet = await createPet(t.app, boss, { stock: 1 });
      const placed = await order(ada, { petId: pet.id });
      await fulfil(placed.body.id).expect(200);
      expectError(await cancel(placed.body.id, ada), 409, 'order_completed');
      expectError(await cancel(placed.body.id, boss), 409, 'order_completed');
      expect(await stockOf(pet.id)).toEqual({ petId: pet.id, quantity: 0, status: 'sold' });
    });

    it('never takes the stock past its 1,000,000 bound when returning a cancelled quantity', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const placed = await order(ada, { petId: pet.id, quantity: 2 });
      await request(t.app).put(`/store/inventory/${pet.id}`).set(boss.auth).send({ quantity: 1_000_000 }).expect(200);
      expect((await cancel(placed.body.id, ada)).status).toBe(204);
      expect((await stockOf(pet.id)).quantity).toBe(1_000_000);
    });

    it("lets an admin cancel any customer's order", async () => {
      const pet = await createPet(t.app, boss, { stock: 4 });
      const placed = await order(ada, { petId: pet.id, quantity: 3 });
      expect((await cancel(placed.body.id, boss)).status).toBe(204);
      expect((await stockOf(pet.id)).quantity).toBe(4);
    });
  });

  describe("another account's order (BOLA)", () => {
    it('is 404 to read or cancel, 403 to complete like every order, and stays unchanged', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const adas = await order(ada, { petId: pet.id, quantity: 2 });
      const path = `/store/orders/${adas.body.id}`;

      expectError(await request(t.app).get(path).set(bob.auth), 404, 'not_found');
      expectError(await cancel(adas.body.id, bob), 404, 'not_found');
      // Completing is admin-only: a customer gets the same 403 for any order id, so
      // nothing tells Bob whether Ada's order exists.
      expectError(await fulfil(adas.body.id, { complete: true }, bob), 403, 'forbidden');
      expectError(await fulfil(999999, { complete: true }, bob), 403, 'forbidden');
      expect(await ordersOf(bob)).not.toContainEqual(expect.objectContaining({ id: adas.body.id }));

      expect((await request(t.app).get(path).set(ada.auth)).body).toEqual(adas.body);
      expect((await stockOf(pet.id)).quantity).toBe(3);
    });

    it('answers an unknown order and a foreign one with the same 404 body', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const adas = await order(ada, { petId: pet.id });
      const foreign = await request(t.app).get(`/store/orders/${adas.body.id}`).set(bob.auth);
      const missing = await request(t.app).get('/store/orders/999999').set(bob.auth);
      expect(foreign.body.message.replace(String(adas.body.id), 'N')).toBe(missing.body.message.replace('999999', 'N'));
    });
  });

  describe('GET /store/orders', () => {
    it("shows a customer its own orders only, and an admin everyone's; complete filters both", async () => {
      const carol = await customer(t.app);
      const dave = await customer(t.app);
      const pet = await createPet(t.app, boss, { stock: 10 });
      const c1 = (await order(carol, { petId: pet.id })).body;
      const d1 = (await order(dave, { petId: pet.id })).body;
      const c2 = (await order(carol, { petId: pet.id })).body;
      const c1done = (await fulfil(c1.id)).body;

      expect(await ordersOf(carol)).toEqual([c1done, c2]);
      expect(await ordersOf(carol, '&complete=true')).toEqual([c1done]);
      expect(await ordersOf(carol, '&complete=false')).toEqual([c2]);
      expect(await ordersOf(dave)).toEqual([d1]);

      const all = await ordersOf(boss);
      expect(all).toEqual(expect.arrayContaining([c1done, d1, c2]));
      const open = await ordersOf(boss, '&complete=false');
      expect(open).toEqual(expect.arrayContaining([d1, c2]));
      expect(open).not.toContainEqual(c1done);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the first response to a retry with the same key and body, placing nothing new', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const first = await order(ada, { petId: pet.id, quantity: 2 }, 'retry-1');
      const retry = await order(ada, { quantity: 2, petId: pet.id }, 'retry-1');

      expect(first.status).toBe(201);
      expect(retry.status).toBe(201);
      expect(retry.body).toEqual(first.body);
      expect(retry.headers.location).toBe(first.headers.location);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect((await stockOf(pet.id)).quantity).toBe(3);
      expect((await ordersOf(ada)).filter((o) => o.id === first.body.id)).toHaveLength(1);
      expect((await ordersOf(boss)).filter((o) => (o as { petId?: number }).petId === pet.id)).toHaveLength(1);
    });

    it('treats an omitted quantity and quantity 1 as the same body', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const first = await order(ada, { petId: pet.id }, 'retry-default');
      const retry = await order(ada, { petId: pet.id, quantity: 1 }, 'retry-default');
      expect(retry.body).toEqual(first.body);
      expect((await stockOf(pet.id)).quantity).toBe(4);
    });

    it('refuses the same key with a different body with 409 idempotency_key_reused, placing nothing', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      await order(ada, { petId: pet.id, quantity: 1 }, 'reused-1').expect(201);
      expectError(await order(ada, { petId: pet.id, quantity: 2 }, 'reused-1'), 409, 'idempotency_key_reused');
      expect((await stockOf(pet.id)).quantity).toBe(4);
    });

    it('keeps keys per account: the same key from another account is a new order', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const adas = await order(ada, { petId: pet.id }, 'shared-key');
      const bobs = await order(bob, { petId: pet.id }, 'shared-key');
      expect(bobs.status).toBe(201);
      expect(bobs.headers['idempotent-replayed']).toBeUndefined();
      expect(bobs.body.id).not.toBe(adas.body.id);
      expect((await stockOf(pet.id)).quantity).toBe(3);
    });

    it('replays a refusal too: the key keeps its first answer even after a restock', async () => {
      const pet = await createPet(t.app, boss, { stock: 1 });
      const first = await order(ada, { petId: pet.id, quantity: 2 }, 'refused-1');
      expectError(first, 409, 'insufficient_stock');

      await request(t.app).put(`/store/inventory/${pet.id}`).set(boss.auth).send({ quantity: 10 }).expect(200);
      const retry = await order(ada, { petId: pet.id, quantity: 2 }, 'refused-1');
      expectError(retry, 409, 'insufficient_stock');
      expect(retry.body).toEqual(first.body);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect((await stockOf(pet.id)).quantity).toBe(10);

      await order(ada, { petId: pet.id, quantity: 2 }, 'refused-2').expect(201);
      expect((await stockOf(pet.id)).quantity).toBe(8);
    });

    it('forgets a key after 24 hours', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      const first = await order(ada, { petId: pet.id }, 'old-key');
      const dayAgo = new Date(Date.now() - 24 * 60 * 60 * 1000 - 1000).toISOString();
      t.db.$client.prepare("update idempotency_keys set created_at = ? where key = 'old-key'").run(dayAgo);

      const later = await order(ada, { petId: pet.id }, 'old-key');
      expect(later.status).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.body.id).not.toBe(first.body.id);
      expect((await stockOf(pet.id)).quantity).toBe(3);
    });

    it('refuses a key that is too long or not printable ASCII with 400 validation_failed', async () => {
      const pet = await createPet(t.app, boss, { stock: 5 });
      expectError(await order(ada, { petId: pet.id }, 'x'.repeat(256)), 400, 'validation_failed');
      expectError(await order(ada, { petId: pet.id }, 'two words'), 400, 'validation_failed');
      expect((await stockOf(pet.id)).quantity).toBe(5);
    });
  });
});
