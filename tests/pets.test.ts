// The pets of the catalogue and their inventory entries (docs/decisions.md, Store rules).
import request from 'supertest';
import { createCategory, createPet, expectError, setupWithCallers } from './helpers';

describe('pets', () => {
  const t = setupWithCallers();

  describe('POST /pets', () => {
    it('creates an available pet with a Location header and an inventory entry of 0', async () => {
      const category = await createCategory(t.app, t.boss);
      const res = await request(t.app).post('/pets').set(t.boss.auth).send({ name: 'Rex', categoryId: category.id });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(Number), name: 'Rex', categoryId: category.id, status: 'available' });
      expect(res.headers.location).toBe(`/pets/${res.body.id}`);
      const stock = await request(t.app).get(`/store/inventory/${res.body.id}`).set(t.buyer.auth);
      expect(stock.body).toEqual({ petId: res.body.id, quantity: 0, status: 'available' });
    });

    it('keeps a status that is given', async () => {
      const category = await createCategory(t.app, t.boss);
      const res = await request(t.app).post('/pets').set(t.boss.auth).send({ name: 'Old', categoryId: category.id, status: 'sold' });
      expect(res.body.status).toBe('sold');
    });

    it('refuses a category that does not exist with 422 category_not_found, creating nothing', async () => {
      const res = await request(t.app).post('/pets').set(t.boss.auth).send({ name: 'Lost', categoryId: 999999 });
      expectError(res, 422, 'category_not_found');
      const all = await request(t.app).get('/pets?limit=100').set(t.buyer.auth);
      expect(all.body.map((p: { name: string }) => p.name)).not.toContain('Lost');
    });

    it('refuses an id in the body and an unknown status with 400 validation_failed', async () => {
      const category = await createCategory(t.app, t.boss);
      expectError(
        await request(t.app).post('/pets').set(t.boss.auth).send({ id: 1, name: 'Id', categoryId: category.id }),
        400,
        'validation_failed',
      );
      expectError(
        await request(t.app).post('/pets').set(t.boss.auth).send({ name: 'Odd', categoryId: category.id, status: 'lost' }),
        400,
        'validation_failed',
      );
    });

    it('is for admins only: 403 forbidden for a customer', async () => {
      const category = await createCategory(t.app, t.boss);
      expectError(await request(t.app).post('/pets').set(t.buyer.auth).send({ name: 'Mine', categoryId: category.id }), 403, 'forbidden');
    });
  });

  describe('GET /pets/{petId} (deprecated)', () => {
    it('still finds a pet, and answers 404 not_found for an unknown one', async () => {
      const pet = await createPet(t.app, t.boss);
      const res = await request(t.app).get(`/pets/${pet.id}`).set(t.buyer.auth);
      expect(res.status).toBe(200);
      expect(res.body).toEqual(pet);
      expectError(await request(t.app).get('/pets/999999').set(t.buyer.auth), 404, 'not_found');
    });
  });

  describe('GET /pets', () => {
    it('filters by status, by category, and by a comma list of ids', async () => {
      const category = await createCategory(t.app, t.boss);
      const a = await createPet(t.app, t.boss, { categoryId: category.id });
      const b = await createPet(t.app, t.boss, { categoryId: category.id, status: 'pending' });
      const c = await createPet(t.app, t.boss, { status: 'pending' });

      const inCategory = await request(t.app).get(`/pets?categoryId=${category.id}`).set(t.buyer.auth);
      expect(inCategory.body).toEqual([a, b]);

      const pendingInCategory = await request(t.app).get(`/pets?categoryId=${category.id}&status=pending`).set(t.buyer.auth);
      expect(pendingInCategory.body).toEqual([b]);

      const pending = await request(t.app).get('/pets?status=pending&limit=100').set(t.buyer.auth);
      expect(pending.body).toEqual(expect.arrayContaining([b, c]));
      expect(pending.body.every((p: { status: string }) => p.status === 'pending')).toBe(true);

      const byIds = await request(t.app).get(`/pets?ids=${c.id},${a.id},999999`).set(t.buyer.auth);
      expect(byIds.body).toEqual([a, c]);
    });

    it('refuses more than 100 ids, or an id that is not one, with 400 validation_failed', async () => {
      const ids = Array.from({ length: 101 }, (_, i) => i + 1).join(',');
      expectError(await request(t.app).get(`/pets?ids=${ids}`).set(t.buyer.auth), 400, 'validation_failed');
      expectError(await request(t.app).get('/pets?ids=1,x').set(t.buyer.auth), 400, 'validation_failed');
      expectError(await request(t.app).get('/pets?ids=0').set(t.buyer.auth), 400, 'validation_failed');
    });

    it('refuses a limit over 100, and answers a cursor it did not issue with an empty page', async () => {
      expectError(await request(t.app).get('/pets?limit=101').set(t.buyer.auth), 400, 'validation_failed');
      const res = await request(t.app).get('/pets?cursor=bm9wZQ').set(t.buyer.auth);
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: [] });
    });

    it('needs a key', async () => {
      expectError(await request(t.app).get('/pets'), 401, 'unauthorized');
    });
  });

  describe('PUT /pets/{petId}', () => {
    it('replaces name, category and status; an omitted status means available', async () => {
      const pet = await createPet(t.app, t.boss, { status: 'sold' });
      const other = await createCategory(t.app, t.boss);
      const res = await request(t.app).put(`/pets/${pet.id}`).set(t.boss.auth).send({ name: 'Renamed', categoryId: other.id });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ id: pet.id, name: 'Renamed', categoryId: other.id, status: 'available' });
      expect((await request(t.app).get(`/pets?ids=${pet.id}`).set(t.buyer.auth)).body).toEqual([res.body]);
    });

    it('refuses a category that does not exist with 422 category_not_found and changes nothing', async () => {
      const pet = await createPet(t.app, t.boss);
      const res = await request(t.app).put(`/pets/${pet.id}`).set(t.boss.auth).send({ name: 'Moved', categoryId: 999999 });
      expectError(res, 422, 'category_not_found');
      expect((await request(t.app).get(`/pets?ids=${pet.id}`).set(t.buyer.auth)).body).toEqual([pet]);
    });

    it('answers 404 for an unknown pet and 403 for a customer', async () => {
      const category = await createCategory(t.app, t.boss);
      expectError(
        await request(t.app).put('/pets/999999').set(t.boss.auth).send({ name: 'Ghost', categoryId: category.id }),
        404,
        'not_found',
      );
      const pet = await createPet(t.app, t.boss);
      expectError(
        await request(t.app).put(`/pets/${pet.id}`).set(t.buyer.auth).send({ name: 'Mine', categoryId: category.id }),
        403,
        'forbidden',
      );
    });
  });

  describe('DELETE /pets/{petId}', () => {
    it('deletes the pet and its inventory entry', async () => {
      const pet = await createPet(t.app, t.boss, { stock: 3 });
      expect((await request(t.app).delete(`/pets/${pet.id}`).set(t.boss.auth)).status).toBe(204);
      expectError(await request(t.app).get(`/pets/${pet.id}`).set(t.buyer.auth), 404, 'not_found');
      expectError(await request(t.app).get(`/store/inventory/${pet.id}`).set(t.buyer.auth), 404, 'not_found');
      expectError(await request(t.app).delete(`/pets/${pet.id}`).set(t.boss.auth), 404, 'not_found');
    });

    it('refuses a pet with an open order with 409 pet_has_open_orders; once completed, the order keeps the petId as history', async () => {
      const pet = await createPet(t.app, t.boss, { stock: 2 });
      const order = await request(t.app).post('/store/orders').set(t.buyer.auth).send({ petId: pet.id });
      expect(order.status).toBe(201);

      expectError(await request(t.app).delete(`/pets/${pet.id}`).set(t.boss.auth), 409, 'pet_has_open_orders');
      expect((await request(t.app).get(`/store/inventory/${pet.id}`).set(t.buyer.auth)).body.quantity).toBe(1);

      await request(t.app).patch(`/store/orders/${order.body.id}`).set(t.boss.auth).send({ complete: true }).expect(200);
      expect((await request(t.app).delete(`/pets/${pet.id}`).set(t.boss.auth)).status).toBe(204);
      const history = await request(t.app).get(`/store/orders/${order.body.id}`).set(t.buyer.auth);
      expect(history.body).toMatchObject({ id: order.body.id, petId: pet.id, complete: true });
    });

    it('is for admins only', async () => {
      const pet = await createPet(t.app, t.boss);
      expectError(await request(t.app).delete(`/pets/${pet.id}`).set(t.buyer.auth), 403, 'forbidden');
    });
  });
});
