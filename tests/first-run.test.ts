// docs/decisions.md, Running it: `npm start` on a brand-new database migrates it, loads a small
// demo catalogue (never into an existing database), and logs where /docs is.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { parse } from 'yaml';
import { password, uniqueEmail } from './helpers';
import { repoRoot, startServer, type ServerProcess } from '../scripts/server-process';

const json = { 'Content-Type': 'application/json' };

/** Signs up through the API, as a new user does, and returns a Bearer header. */
async function signUp(server: ServerProcess): Promise<{ Authorization: string }> {
  const email = uniqueEmail('first-run');
  const created = await fetch(`${server.url}/accounts`, { method: 'POST', headers: json, body: JSON.stringify({ email, password }) });
  expect(created.status).toBe(201);
  const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
  const { key } = (await (await fetch(`${server.url}/api-keys`, { method: 'POST', headers: { Authorization: basic } })).json()) as {
    key: string;
  };
  return { Authorization: `Bearer ${key}` };
}

async function getJson<T>(server: ServerProcess, path: string, auth: { Authorization: string }): Promise<T> {
  const res = await fetch(`${server.url}${path}`, { headers: auth });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

function counts(databasePath: string): { categories: number; pets: number; inventory: number } {
  const file = new Database(databasePath, { readonly: true });
  try {
    const count = (table: string) => (file.prepare(`select count(*) as n from ${table}`).get() as { n: number }).n;
    return { categories: count('categories'), pets: count('pets'), inventory: count('inventory') };
  } finally {
    file.close();
  }
}

describe('the first run', () => {
  let dir: string;
  let server: ServerProcess | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-first-run-'));
  });
  afterEach(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    server = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('migrates a brand-new database, loads the demo catalogue with stock, and logs the /docs URL', async () => {
    const databasePath = join(dir, 'new', 'petstore.db');
    // SEED_DEMO_DATA is left at its default.
    server = await startServer({ DATABASE_PATH: databasePath });

    const docsUrl = `${server.url}/docs`;
    expect(server.log()).toContain(docsUrl);
    // Where the new database is, in one line; loudly, as its folder had to be made.
    const made = server
      .log()
      .split('\n')
      .filter((line) => line.includes('New database'));
    expect(made).toEqual([expect.stringContaining('"level":40')]);
    expect(JSON.parse(made[0]!)).toMatchObject({
      database: databasePath,
      msg: expect.stringMatching(
        new RegExp(
          `^New database ${databasePath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, with the demo catalogue \\(\\d+ categories, \\d+ pets\\), in a folder that did not exist and was made now`,
        ),
      ),
    });
    const docs = await fetch(docsUrl);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toMatch(/^text\/html/);
    // The contract as written, comments and all, and as JSON parsed from the same text.
    const yamlText = await (await fetch(`${server.url}/openapi.yaml`)).text();
    expect(yamlText).toBe(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8'));
    expect(await (await fetch(`${server.url}/openapi.json`)).json()).toEqual(parse(yamlText));

    const auth = await signUp(server);
    const categories = await getJson<Array<{ name: string }>>(server, '/categories', auth);
    const pets = await getJson<Array<{ id: number; name: string; categoryId: number; status: string }>>(server, '/pets', auth);
    const stock = await getJson<Array<{ petId: number; quantity: number }>>(server, '/store/inventory', auth);
    expect(categories.length).toBeGreaterThanOrEqual(2);
    expect(pets.length).toBeGreaterThanOrEqual(3);
    // Every pet belongs to a demo category and has an inventory entry; some are in stock.
    expect(stock.map((s) => s.petId).sort()).toEqual(pets.map((p) => p.id).sort());
    expect(stock.filter((s) => s.quantity > 0).length).toBeGreaterThanOrEqual(2);
    expect(pets.some((p) => p.status === 'available' && (stock.find((s) => s.petId === p.id)?.quantity ?? 0) > 0)).toBe(true);

    // Orderable as it is: a customer can buy one of the demo pets right away.
    const pet = pets.find((p) => p.status === 'available' && (stock.find((s) => s.petId === p.id)?.quantity ?? 0) > 0);
    const order = await fetch(`${server.url}/store/orders`, {
      method: 'POST',
      headers: { ...auth, ...json },
      body: JSON.stringify({ petId: pet?.id, quantity: 1 }),
    });
    expect(order.status).toBe(201);
    expect(await server.stop()).toBe(0);
  });

  // Three starts of the real server: can take more than the default 30 s on a loaded machine.
  it('never seeds an existing database, even one whose catalogue was emptied', async () => {
    const databasePath = join(dir, 'existing', 'petstore.db');
    server = await startServer({ DATABASE_PATH: databasePath });
    expect(await server.stop()).toBe(0);
    const seeded = counts(databasePath);
    expect(seeded.pets).toBeGreaterThan(0);

    server = await startServer({ DATABASE_PATH: databasePath });
    expect(await server.stop()).toBe(0);
    expect(counts(databasePath)).toEqual(seeded);
    // An existing database is no news.
    expect(server.log()).not.toContain('New database');

    const file = new Database(databasePath);
    file.exec('delete from inventory; delete from pets; delete from categories;');
    file.close();
    server = await startServer({ DATABASE_PATH: databasePath });
    expect(await server.stop()).toBe(0);
    expect(counts(databasePath)).toEqual({ categories: 0, pets: 0, inventory: 0 });
  }, 90_000);

  it('loads nothing when SEED_DEMO_DATA=false', async () => {
    const databasePath = join(dir, 'no-seed', 'petstore.db');
    mkdirSync(dirname(databasePath));
    server = await startServer({ DATABASE_PATH: databasePath, SEED_DEMO_DATA: 'false' });
    expect(await server.stop()).toBe(0);
    // Said at info where the folder was there already.
    const made = server
      .log()
      .split('\n')
      .filter((line) => line.includes('New database'));
    expect(made.map((line) => JSON.parse(line) as { level: number; msg: string })).toEqual([
      expect.objectContaining({ level: 30, msg: `New database ${databasePath}` }),
    ]);
    expect(counts(databasePath)).toEqual({ categories: 0, pets: 0, inventory: 0 });
  });
});
