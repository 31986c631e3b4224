// kill -9 in the middle of a load of orders: nothing the service acknowledged is lost, and
// the stock still adds up. Each round kills a real server on a SQLite file while 16
// connections place orders, starts it again on the same file, and counts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startServer, type ServerProcess } from '../../scripts/server-process';
import { call, databaseWithAdmin, loadEnv, setUp } from '../write-load';

const dir = mkdtempSync(join(tmpdir(), 'petstore-kill-'));
const path = join(dir, 'petstore.db');
let server: ServerProcess | undefined;

afterAll(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const initialStock = 1_000_000;

/** Places orders on `connections` loops until the process dies; returns the ids acknowledged. */
async function ordersUntilKilled(base: string, key: string, petId: number, connections: number): Promise<number[]> {
  const acknowledged: number[] = [];
  const loop = async () => {
    // Bounded: the process is killed long before this many orders.
    for (let i = 0; i < 20_000; i++) {
      try {
        const res = await call(base, 'POST', '/store/orders', { key, body: { petId, quantity: 1 } });
        if (res.status !== 201) throw new Error(`POST /store/orders: ${res.status} ${JSON.stringify(res.body)}`);
        acknowledged.push(res.body.id as number);
      } catch (error) {
        // The connection died with the process: the answer never came, so nothing was acknowledged.
        if ((error as Error).name === 'TypeError') return;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  return acknowledged;
}

it('loses no acknowledged order across three kill -9 rounds, and the stock adds up', async () => {
  await databaseWithAdmin(path);
  server = await startServer({ ...loadEnv, DATABASE_PATH: path });
  const { customerKey, petId } = await setUp(server.url, initialStock);
  const acknowledged = new Set<number>();

  for (let round = 0; round < 3; round++) {
    const running = server;
    const load = ordersUntilKilled(running.url, customerKey, petId, 16);
    await new Promise((r) => setTimeout(r, 1_500));
    running.child.kill('SIGKILL');
    for (const id of await load) acknowledged.add(id);
    await new Promise<void>((resolve) =>
      running.child.exitCode !== null || running.child.signalCode !== null ? resolve() : running.child.once('exit', () => resolve()),
    );
    server = await startServer({ ...loadEnv, DATABASE_PATH: path });
    // Served again on the same file.
    expect((await call(server.url, 'GET', `/store/inventory/${petId}`, { key: customerKey })).status).toBe(200);
  }
  server.child.kill('SIGKILL');

  const db = new Database(path, { readonly: true });
  const ids = new Set((db.prepare('select id from orders').all() as Array<{ id: number }>).map((r) => r.id));
  const sold = (db.prepare('select coalesce(sum(quantity), 0) as n from orders').get() as { n: number }).n;
  const stock = (db.prepare('select quantity from inventory where pet_id = ?').get(petId) as { quantity: number }).quantity;
  db.close();
  const lost = [...acknowledged].filter((id) => !ids.has(id));
  console.log(`kill -9: ${acknowledged.size} orders acknowledged in 3 rounds, ${ids.size} stored, ${lost.length} lost`);
  expect(acknowledged.size).toBeGreaterThan(100);
  expect(lost).toEqual([]);
  expect(stock + sold).toBe(initialStock);
});
