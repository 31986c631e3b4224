// The SQL the SQLite storage prepares: each statement is planned once (db/client.ts,
// rowLimit). A bare `LIMIT ?` would be replanned on every run, because SQLite reads the
// value bound there while planning; that cost most of a list request's time under load.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createDatabase } from '../db/client';
import { createSqliteStorage } from '../db/sqlite-storage';
import { createStore } from '../domain/store';

describe('SQLite statements', () => {
  const db = createDatabase(join(mkdtempSync(join(tmpdir(), 'petstore-statements-')), 'petstore.db'));
  // Every connection's statements: the lists are read on the storage's read connection.
  const spy = jest.spyOn(Database.prototype, 'prepare');
  const prepared = () => spy.mock.calls.map(([source]) => source);
  afterAll(() => spy.mockRestore());
  const storage = createSqliteStorage(db);
  const store = createStore(storage);
  const page = { after: 0, limit: 2 };
  const customer = { accountId: 1, role: 'customer' as const };
  const admin = { accountId: 1, role: 'admin' as const };

  beforeAll(async () => {
    const account = await storage.insertAccount({
      email: 'rows@example.com',
      passwordHash: 'x',
      role: 'customer',
      createdAt: '2026-01-01T00:00:00Z',
    });
    customer.accountId = admin.accountId = account!.id;
    const category = await store.categories.create({ name: 'Limited' });
    for (let i = 0; i < 3; i++) await store.pets.create({ name: `Pet ${i}`, categoryId: category.id, status: 'available' });
    for (let i = 0; i < 3; i++) {
      await storage.insertApiKey({
        accountId: account!.id,
        keyHash: `hash-${i}`,
        prefix: 'p',
        lastFour: 'abcd',
        createdAt: '2026-01-01T00:00:00Z',
      });
    }
  });

  /** Every statement with a LIMIT, run once in each of its shapes; the first two rows where a limit of 2 applies. */
  async function everyLimitedStatement() {
    const pets = await storage.listPets({}, page);
    await storage.listPets({ status: 'available', categoryId: 1, ids: [1, 2, 3] }, page);
    await storage.listPets({ ids: [3, 1] }, page);
    await storage.listCategories(page);
    await storage.petInCategory(1);
    await storage.listApiKeys(customer.accountId, page);
    await storage.listInventory({}, page);
    await storage.listInventory({ status: 'sold' }, page);
    await storage.listOrders(customer, {}, page);
    await storage.listOrders(admin, { complete: false }, page);
    await storage.openOrderOfPet(1);
    await storage.deliverDue('2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', 2);
    return pets;
  }

  it('binds no LIMIT bare, and the limits still hold', async () => {
    const pets = await everyLimitedStatement();
    expect(pets.map((pet) => pet.id)).toEqual([1, 2]);
    expect(await storage.listPets({ ids: [3, 2, 1] }, { after: 1, limit: 1 })).toEqual([expect.objectContaining({ id: 2 })]);
    expect(await storage.listApiKeys(customer.accountId, page)).toHaveLength(2);

    const limited = prepared().filter((source) => /\blimit\b/i.test(source));
    // Each list statement above, at least: the check below looks at real SQL.
    expect(limited.length).toBeGreaterThanOrEqual(10);
    expect(limited.filter((source) => /\blimit\s+\?/i.test(source))).toEqual([]);
  });

  it('prepares each statement once, however often and with whatever limit it runs', async () => {
    await everyLimitedStatement();
    const before = prepared().length;
    for (const limit of [1, 5, 100]) {
      await storage.listPets({ ids: [1, 2] }, { after: 0, limit });
      await storage.listCategories({ after: 0, limit });
    }
    await everyLimitedStatement();
    expect(prepared().slice(before)).toEqual([]);
  });

  it('writes every parameter a WHERE clause compares as +?, which the planner does not read', async () => {
    await everyLimitedStatement();
    await storage.findKeyOwner('hash-1');
    await storage.findPet(1);
    await storage.findInventory(1);
    await storage.findOrder(customer, 1);
    await storage.findAccountByEmail('rows@example.com');
    await storage.countActiveApiKeys(customer.accountId, '2026-01-01T00:00:00Z');
    // A bare `?` in a WHERE clause is recompiled on every run (db/client.ts, param).
    const bare = (source: string) =>
      source
        .split(/\bwhere\b/i)
        .slice(1)
        .some((clause) => /(?<![+(]|cast\()\?/.test(clause.replace(/cast\(\? as integer\)/gi, '')));
    const filtered = prepared().filter((source) => /\bwhere\b.*\?/is.test(source));
    expect(filtered.length).toBeGreaterThanOrEqual(15);
    expect(filtered.filter(bare)).toEqual([]);
  });

  afterAll(() => storage.close());
});
