// docs/decisions.md, Store rules: one inventory entry per pet, its status the pet's, and what
// setting the stock does to that status.
import request from 'supertest';
import { createPet, expectError, nextPage, setupWithCallers, type Caller } from './helpers';

describe('inventory', () => {
  const t = setupWithCallers();

  const putStock = (petId: number, quantity: number, who: Caller = t.boss) =>
    request(t.app).put(`/store/inventory/${petId}`).set(who.auth).send({ quantity });

  describe('PUT /store/inventory/{petId}', () => {
    it('sets the stock of an available pet and leaves it available', async () => {
      const pet = await createPet(t.app, t.boss);
      const res = await putStock(pet.id, 12);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ petId: pet.id, quantity: 12, status: 'available' });
      expect((await request(t.app).get(`/store/inventory/${pet.id}`).set(t.buyer.auth)).body).toEqual(res.body);
    });

    it.each(['pending', 'sold'])('makes a %s pet available again when the stock goes above 0', async (status) => {
      const pet = await createPet(t.app, t.boss, { status });
      expect((await putStock(pet.id, 1)).body).toEqual({ petId: pet.id, quantity: 1, status: 'available' });
      expect((await request(t.app).get(`/pets?ids=${pet.id}`).set(t.buyer.auth)).body[0].status).toBe('available');
    });

    it.each(['pending', 'sold', 'available'])('leaves the status %s alone when the stock is set to 0', async (status) => {
      const pet = await createPet(t.app, t.boss, { status });
      expect((await putStock(pet.id, 0)).body).toEqual({ petId: pet.id, quantity: 0, status });
    });

    it('refuses a negative stock or one over 1,000,000 with 400 validation_failed', async () => {
      const pet = await createPet(t.app, t.boss);
      expectError(await putStock(pet.id, -1), 400, 'validation_failed');
      expectError(await putStock(pet.id, 1_000_001), 400, 'validation_failed');
      expect((await putStock(pet.id, 1_000_000)).status).toBe(200);
    });

    it('answers 404 for an unknown pet and 403 for a customer', async () => {
      expectError(await putStock(999999, 1), 404, 'not_found');
      const pet = await createPet(t.app, t.boss);
      expectError(await putStock(pet.id, 5, t.buyer), 403, 'forbidden');
      expect((await request(t.app).get(`/store/inventory/${pet.id}`).set(t.buyer.auth)).body.quantity).toBe(0);
    });
  });

  describe('GET /store/inventory', () => {
    it("shows every pet's entry by pet id, filtered by the pet's status", async () => {
      const available = await createPet(t.app, t.boss, { stock: 4 });
      const sold = await createPet(t.app, t.boss, { status: 'sold' });

      const all = await request(t.app).get('/store/inventory?limit=100').set(t.buyer.auth);
      expect(all.status).toBe(200);
      expect(all.body).toEqual(
        expect.arrayContaining([
          { petId: available.id, quantity: 4, status: 'available' },
          { petId: sold.id, quantity: 0, status: 'sold' },
        ]),
      );
      const ids = all.body.map((item: { petId: number }) => item.petId);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));

      const onlySold = await request(t.app).get('/store/inventory?status=sold&limit=100').set(t.buyer.auth);
      expect(onlySold.body).toContainEqual({ petId: sold.id, quantity: 0, status: 'sold' });
      expect(onlySold.body.every((item: { status: string }) => item.status === 'sold')).toBe(true);
    });

    it('pages by pet id with Link rel="next"', async () => {
      for (let i = 0; i < 3; i++) await createPet(t.app, t.boss);
      const first = await request(t.app).get('/store/inventory?limit=2').set(t.buyer.auth);
      const next = nextPage(first);
      expect(next).toBeDefined();
      const second = await request(t.app)
        .get(next ?? '')
        .set(t.buyer.auth);
      expect(second.body[0].petId).toBeGreaterThan(first.body[1].petId);
    });
  });

  describe('GET /store/inventory/{petId}', () => {
    it('answers 404 not_found for an unknown pet', async () => {
      expectError(await request(t.app).get('/store/inventory/999999').set(t.buyer.auth), 404, 'not_found');
    });
  });
});
