// docs/decisions.md, Store rules: categories, unique names ignoring case, in-use deletes.
import request from 'supertest';
import { admin, customer, expectError, nextPage, setupApp, type Caller } from './helpers';

describe('categories', () => {
  const t = setupApp();
  let boss: Caller;
  let buyer: Caller;
  let seq = 0;

  beforeAll(async () => {
    boss = await admin(t);
    buyer = await customer(t.app);
  });

  const createCategory = async (overrides: object = {}) => {
    const res = await request(t.app)
      .post('/categories')
      .set(boss.auth)
      .send({ name: `Category ${++seq}`, ...overrides });
    expect(res.status).toBe(201);
    return res.body as { id: number; name: string; description?: string };
  };

  describe('POST /categories', () => {
    it('creates a category with a Location header', async () => {
      const res = await request(t.app).post('/categories').set(boss.auth).send({ name: 'Dogs', description: 'Loyal companions' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(Number), name: 'Dogs', description: 'Loyal companions' });
      expect(res.headers.location).toBe(`/categories/${res.body.id}`);
      expect((await request(t.app).get(`/categories/${res.body.id}`).set(buyer.auth)).body).toEqual(res.body);
    });

    it('refuses a name already taken, ignoring case, with 409 conflict', async () => {
      const { name } = await createCategory();
      expectError(await request(t.app).post('/categories').set(boss.auth).send({ name: name.toUpperCase() }), 409, 'conflict');
    });

    it('refuses an id in the body with 400 validation_failed', async () => {
      expectError(await request(t.app).post('/categories').set(boss.auth).send({ id: 5, name: 'Ids' }), 400, 'validation_failed');
    });

    it('is for admins only: 403 forbidden for a customer', async () => {
      expectError(await request(t.app).post('/categories').set(buyer.auth).send({ name: 'Nope' }), 403, 'forbidden');
    });
  });

  describe('GET /categories/{categoryId}', () => {
    it('answers 404 not_found for an unknown category', async () => {
      expectError(await request(t.app).get('/categories/999999').set(buyer.auth), 404, 'not_found');
    });
  });

  describe('PUT /categories/{categoryId}', () => {
    it('replaces name and description; an omitted description is removed', async () => {
      const category = await createCategory({ description: 'to be removed' });
      const res = await request(t.app).put(`/categories/${category.id}`).set(boss.auth).send({ name: 'Renamed' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ id: category.id, name: 'Renamed' });
      expect((await request(t.app).get(`/categories/${category.id}`).set(buyer.auth)).body).toEqual(res.body);
    });

    it('lets a category change the case of its own name', async () => {
      const category = await createCategory({ name: 'rabbits' });
      const res = await request(t.app).put(`/categories/${category.id}`).set(boss.auth).send({ name: 'Rabbits' });
      expect(res.status).toBe(200);
      expect(res.body.name).toBe('Rabbits');
    });

    it("refuses another category's name, ignoring case, with 409 conflict and changes nothing", async () => {
      const taken = await createCategory();
      const category = await createCategory();
      const res = await request(t.app).put(`/categories/${category.id}`).set(boss.auth).send({ name: taken.name.toLowerCase() });
      expectError(res, 409, 'conflict');
      expect((await request(t.app).get(`/categories/${category.id}`).set(buyer.auth)).body).toEqual(category);
    });

    it('answers 404 for an unknown category and 403 for a customer', async () => {
      expectError(await request(t.app).put('/categories/999999').set(boss.auth).send({ name: 'Ghost' }), 404, 'not_found');
      const category = await createCategory();
      expectError(await request(t.app).put(`/categories/${category.id}`).set(buyer.auth).send({ name: 'Mine' }), 403, 'forbidden');
    });
  });

  describe('DELETE /categories/{categoryId}', () => {
    it('deletes an unused category; it is 404 afterwards', async () => {
      const category = await createCategory();
      expect((await request(t.app).delete(`/categories/${category.id}`).set(boss.auth)).status).toBe(204);
      expectError(await request(t.app).get(`/categories/${category.id}`).set(buyer.auth), 404, 'not_found');
      expectError(await request(t.app).delete(`/categories/${category.id}`).set(boss.auth), 404, 'not_found');
    });

    it('refuses a category that pets use with 409 category_in_use, until the pets are gone', async () => {
      const category = await createCategory();
      const pet = await request(t.app).post('/pets').set(boss.auth).send({ name: 'Tenant', categoryId: category.id });
      expectError(await request(t.app).delete(`/categories/${category.id}`).set(boss.auth), 409, 'category_in_use');
      expect((await request(t.app).get(`/categories/${category.id}`).set(buyer.auth)).status).toBe(200);
      await request(t.app).delete(`/pets/${pet.body.id}`).set(boss.auth).expect(204);
      expect((await request(t.app).delete(`/categories/${category.id}`).set(boss.auth)).status).toBe(204);
    });

    it('is for admins only', async () => {
      const category = await createCategory();
      expectError(await request(t.app).delete(`/categories/${category.id}`).set(buyer.auth), 403, 'forbidden');
    });
  });

  describe('GET /categories', () => {
    it('lists by id in pages announced with Link rel="next"', async () => {
      for (let i = 0; i < 3; i++) await createCategory();
      const first = await request(t.app).get('/categories?limit=2').set(buyer.auth);
      expect(first.status).toBe(200);
      expect(first.body).toHaveLength(2);
      const next = nextPage(first);
      expect(next).toBeDefined();
      const second = await request(t.app)
        .get(next ?? '')
        .set(buyer.auth);
      expect(second.body[0].id).toBeGreaterThan(first.body[1].id);
    });
  });
});
