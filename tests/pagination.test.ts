// Lists are keyset pages: the cursor is the last id seen, so walking a catalogue that
// grows meanwhile never repeats or skips a record, and every page is one index range
// scan, as cheap deep in the list as at its start.
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { createDatabase } from '../db/client';
import { createApp } from '../server/app';
import { loadSpec } from '../server/spec';
import { admin, customer, nextPage, setupApp, testConfig, type Caller } from './helpers';

type Row = { id?: number; petId?: number };
const keyOf = (row: Row) => (row.id ?? row.petId) as number;

describe('pagination', () => {
  const t = setupApp();
  const repos = t.repos;
  let buyer: Caller;
  let dogs: number;
  let cats: number;
  const catalogue: number[] = [];

  beforeAll(async () => {
    buyer = await customer(t.app);
    dogs = (await repos.categories.create({ name: 'Paged dogs' })).id;
    cats = (await repos.categories.create({ name: 'Paged cats' })).id;
    for (let i = 0; i < 250; i++) {
      const pet = await repos.pets.create({
        name: `Pet ${i}`,
        categoryId: i % 2 ? cats : dogs,
        status: i % 5 === 0 ? 'sold' : 'available',
      });
      catalogue.push(pet.id);
    }
  });

  /** Follows Link rel="next" from `first`, calling `between` after each page; at most 100 pages. */
  async function walk(first: string, who: Caller, between: () => Promise<void> = async () => {}): Promise<{ rows: Row[]; pages: number }> {
    const rows: Row[] = [];
    let path: string | undefined = first;
    let pages = 0;
    while (path !== undefined && pages < 100) {
      const res = await request(t.app).get(path).set(who.auth);
      expect(res.status).toBe(200);
      expect(Array.isArray(res.body)).toBe(true);
      rows.push(...(res.body as Row[]));
      pages++;
      path = nextPage(res);
      await between();
    }
    expect(path).toBeUndefined();
    return { rows, pages };
  }

  const expectNoDuplicatesInOrder = (ids: number[]) => {
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  };

  it('walks a 250-pet catalogue with the default page size: 13 pages, every pet once, in id order', async () => {
    const { rows, pages } = await walk('/pets', buyer);
    expect(pages).toBe(13);
    expect(rows.map(keyOf)).toEqual(catalogue);
  });

  it('announces no next page after the last one: 250 pets in pages of 50 take exactly 5 requests', async () => {
    const { rows, pages } = await walk('/pets?limit=50', buyer);
    expect(rows.map(keyOf)).toEqual(catalogue);
    expect(pages).toBe(5);
  });

  it('neither repeats nor skips a pet while pets are added between pages', async () => {
    const before = (await walk('/pets?limit=100', buyer)).rows.map(keyOf);
    let added = 0;
    const { rows } = await walk('/pets?limit=17', buyer, async () => {
      for (let i = 0; i < 3; i++, added++) await repos.pets.create({ name: `Latecomer ${added}`, categoryId: dogs, status: 'available' });
    });
    const seen = rows.map(keyOf);
    expectNoDuplicatesInOrder(seen);
    expect(seen.slice(0, before.length)).toEqual(before);
    // Pets added after the walk passed their place are still reached: they sort last.
    expect(seen.length).toBeGreaterThan(before.length);
    expect(added).toBeGreaterThan(0);
  });

  it('keeps the filters on every page: status and category', async () => {
    const all = (await walk('/pets?limit=100', buyer)).rows as Array<{ id: number; status: string; categoryId: number }>;
    const soldCats = await walk(`/pets?status=sold&categoryId=${cats}&limit=7`, buyer);
    expect(soldCats.rows).toEqual(all.filter((p) => p.status === 'sold' && p.categoryId === cats));
    expect(soldCats.pages).toBeGreaterThan(1);
    const byIds = await walk(`/pets?ids=${catalogue.slice(0, 30).join(',')}&limit=8`, buyer);
    expect(byIds.rows.map(keyOf)).toEqual(catalogue.slice(0, 30));
  });

  it('walks the inventory by pet id, and the orders by id, the same way', async () => {
    const inventory = await walk('/store/inventory?limit=33', buyer);
    expectNoDuplicatesInOrder(inventory.rows.map(keyOf));
    expect(inventory.rows.map(keyOf)).toEqual(expect.arrayContaining(catalogue));

    const pet = catalogue[1] as number;
    await repos.inventory.setQuantity(pet, 50);
    const placed: number[] = [];
    for (let i = 0; i < 25; i++) {
      const { outcome } = await repos.orders.place({ accountId: buyer.accountId, petId: pet, quantity: 1 });
      if (outcome.ok) placed.push(outcome.value.id);
    }
    const orders = await walk('/store/orders?limit=4&complete=false', buyer);
    expect(orders.rows.map(keyOf)).toEqual(placed);
  });

  it('refuses a cursor outside its schema, or a limit outside 1..100, with 400', async () => {
    for (const query of ['cursor=a.b', 'cursor=', `cursor=${'a'.repeat(201)}`, 'limit=0', 'limit=101', 'limit=ten']) {
      const res = await request(t.app).get(`/pets?${query}`).set(buyer.auth);
      expect({ query, status: res.status, code: res.body.code }).toEqual({ query, status: 400, code: 'validation_failed' });
    }
  });

  it('reads a cursor the schema allows but the service did not issue as past the end: an empty page, no Link', async () => {
    const issued = (await request(t.app).get('/pets?limit=1').set(buyer.auth)).headers.link;
    expect(issued).toMatch(/rel="next"/);
    // v1:-1, not base64url of a cursor at all, v1 past 2^53-1, another version, and 0.
    for (const cursor of ['djE6LTE', 'abc', 'djE6OTk5OTk5OTk5OTk5OTk5OQ', 'djI6MQ', '0']) {
      const res = await request(t.app).get(`/pets?cursor=${cursor}`).set(buyer.auth);
      expect({ cursor, status: res.status, body: res.body, link: res.headers.link }).toEqual({
        cursor,
        status: 200,
        body: [],
        link: undefined,
      });
    }
  });

  describe('cost', () => {
    // Every list query is read from an index in id order: a range SEARCH, never a SCAN of
    // the table or a temporary sort, so page 10,000 costs what page 1 does.
    it('every list query is an index range search with no sort step', async () => {
      // SQLite's plans, on a SQLite app of its own whichever engine the suite runs on.
      const db = createDatabase(join(mkdtempSync(join(tmpdir(), 'petstore-plans-')), 'petstore.db'));
      const t = setupApp({ db });
      const boss = await admin(t);
      const buyer = await customer(t.app);
      const dogs = (await t.repos.categories.create({ name: 'Planned dogs' })).id;
      const cats = (await t.repos.categories.create({ name: 'Planned cats' })).id;
      for (let i = 0; i < 5; i++) await t.repos.pets.create({ name: `Planned ${i}`, categoryId: i % 2 ? cats : dogs, status: 'available' });
      const seen = new Set<string>();
      const client = db.$client;
      // Every connection's statements: the lists are read on the storage's read connection.
      const spy = jest.spyOn(Database.prototype, 'prepare');
      // Statements are prepared once per app, on first use: a fresh app over the same
      // database prepares each of them again, where the hook sees it.
      const app = createApp({ db, config: testConfig() });
      try {
        const cursor = nextPage(await request(app).get('/pets?limit=1').set(buyer.auth))?.split('cursor=')[1];
        for (const path of [
          '/pets',
          '/pets?status=sold',
          `/pets?categoryId=${cats}`,
          `/pets?status=available&categoryId=${dogs}`,
          `/pets?ids=1,2,3`,
          '/categories',
          '/store/inventory',
          '/store/inventory?status=pending',
        ]) {
          const sep = path.includes('?') ? '&' : '?';
          expect((await request(app).get(`${path}${sep}cursor=${cursor}`).set(buyer.auth)).status).toBe(200);
        }
        for (const path of ['/store/orders', '/store/orders?complete=true']) {
          for (const who of [buyer, boss]) expect((await request(app).get(path).set(who.auth)).status).toBe(200);
        }
      } finally {
        for (const [sql] of spy.mock.calls) if (/^select/i.test(sql) && /\blimit\b/i.test(sql)) seen.add(sql);
        spy.mockRestore();
      }

      expect(seen.size).toBeGreaterThanOrEqual(12);
      for (const sql of seen) {
        // The plan does not depend on the values; every parameter gets a 1.
        const values = Array.from({ length: sql.split('?').length - 1 }, () => 1);
        const plan = (client.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...values) as Array<{ detail: string }>).map((r) => r.detail);
        const problems = plan.filter((d) => /^SCAN\b|TEMP B-TREE/.test(d));
        expect({ sql, plan, problems }).toEqual({ sql, plan, problems: [] });
      }
    });
  });
});

describe('the default page size', () => {
  it("is the spec's Limit default, applied before the handler", async () => {
    const spec = loadSpec() as unknown as { components: { parameters: { Limit: { schema: { default: number } } } } };
    const t = setupApp();
    const boss = await admin(t);
    const category = (await t.repos.categories.create({ name: 'Default page' })).id;
    const size = spec.components.parameters.Limit.schema.default;
    for (let i = 0; i <= size; i++) await t.repos.pets.create({ name: `Paged ${i}`, categoryId: category, status: 'available' });
    const res = await request(t.app).get('/pets').set(boss.auth);
    expect(res.body).toHaveLength(size);
    expect(nextPage(res)).toBeDefined();
  });
});
