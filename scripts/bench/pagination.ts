// npm run bench, part 1: keyset pagination costs the same on page 1 and page 10,000.
// Both are measured in the same run, over real HTTP on 127.0.0.1, interleaved so
// machine noise hits them alike; the ratios of the medians are what count. An OFFSET
// query over the same rows is timed alongside as the contrast keyset avoids.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { createDatabase } from '../../db/client';
import { createSqliteStorage } from '../../db/sqlite-storage';
import { createStore } from '../../domain/store';
import { createApp } from '../../server/app';
import { loadConfig } from '../../server/config';
import { encodeCursor } from '../../handlers/pagination';
import { generateApiKey } from '../../domain/api-keys';
import { median } from './common';

const pageSize = 20;
const deepPage = 10_000;
const petCount = pageSize * deepPage + pageSize;
const rounds = Number(process.env.BENCH_ROUNDS ?? 300);

export async function benchPagination(): Promise<void> {
  const db = createDatabase(join(mkdtempSync(join(tmpdir(), 'petstore-bench-pages-')), 'petstore.db'));
  const sqlite = db.$client;
  sqlite.exec(
    "insert into accounts (email, password_hash, role, created_at) values ('bench@example.com', 'x', 'admin', '2026-01-01T00:00:00Z')",
  );
  const { key, ...stored } = generateApiKey();
  await createStore(createSqliteStorage(db)).apiKeys.create({ accountId: 1, ...stored });
  sqlite.exec("insert into categories (name, name_key) values ('Dogs', 'dogs'), ('Cats', 'cats')");
  const insertPet = sqlite.prepare('insert into pets (name, category_id, status) values (?, ?, ?)');
  const insertStock = sqlite.prepare('insert into inventory (pet_id, quantity) values (?, 0)');
  sqlite.transaction(() => {
    for (let i = 1; i <= petCount; i++) {
      insertPet.run(`pet ${i}`, (i % 2) + 1, i % 3 === 0 ? 'sold' : 'available');
      insertStock.run(i);
    }
  })();

  const config = loadConfig({ LOG_LEVEL: 'error', RATE_LIMIT_PER_MINUTE: '1000000', SEED_DEMO_DATA: 'false' });
  const server = createApp({ db, config }).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const headers = { Authorization: `Bearer ${key}` };

  const timeGet = async (path: string) => {
    const start = process.hrtime.bigint();
    const res = await fetch(base + path, { headers });
    const body = (await res.json()) as unknown[];
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (res.status !== 200 || body.length !== pageSize) throw new Error(`${path} answered ${res.status} with ${body.length} items`);
    return ms;
  };
  const timeSql = (sql: string, ...args: number[]) => {
    const stmt = sqlite.prepare(sql);
    const start = process.hrtime.bigint();
    stmt.all(...args);
    return Number(process.hrtime.bigint() - start) / 1e6;
  };

  // The deep cursor is the one a client reaches after 9,999 pages of /pets.
  const deepAfter = pageSize * (deepPage - 1);
  // Two pets in three are available, so the filtered deep page starts 9/10 of the way in
  // (about page 6,000 of that filter).
  const deepAvailableAfter = Math.floor(petCount * 0.9);
  const cases = {
    'GET /pets page 1': `/pets?limit=${pageSize}`,
    'GET /pets page 10,000': `/pets?limit=${pageSize}&cursor=${encodeCursor(deepAfter)}`,
    'GET /pets?status=available page 1': `/pets?status=available&limit=${pageSize}`,
    'GET /pets?status=available deep page': `/pets?status=available&limit=${pageSize}&cursor=${encodeCursor(deepAvailableAfter)}`,
    'GET /store/inventory page 1': `/store/inventory?limit=${pageSize}`,
    'GET /store/inventory page 10,000': `/store/inventory?limit=${pageSize}&cursor=${encodeCursor(deepAfter)}`,
  };
  const samples: Record<string, number[]> = {};
  const offsetSql = 'select * from pets order by id limit ? offset ?';
  samples['OFFSET page 1 (SQL only)'] = [];
  samples['OFFSET page 10,000 (SQL only)'] = [];
  for (const name of Object.keys(cases)) samples[name] = [];

  for (const path of Object.values(cases)) await timeGet(path); // warm-up
  const order = Object.entries(cases);
  for (let round = 0; round < rounds; round++) {
    // Each round starts one case further on, as the throughput part's do: the request
    // straight after the OFFSET scan below reads slower, whichever it is (docs/performance.md,
    // "Lists").
    for (let i = 0; i < order.length; i++) {
      const [name, path] = order[(i + round) % order.length]!;
      samples[name]!.push(await timeGet(path));
    }
    samples['OFFSET page 1 (SQL only)'].push(timeSql(offsetSql, pageSize, 0));
    samples['OFFSET page 10,000 (SQL only)'].push(timeSql(offsetSql, pageSize, deepAfter));
  }
  await new Promise((r) => server.close(r));
  sqlite.close();

  const m = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
  console.log(`${petCount.toLocaleString('en')} pets, ${rounds} interleaved rounds, medians:`);
  for (const [name, value] of Object.entries(m)) console.log(`  ${name.padEnd(40)} ${value.toFixed(3)} ms`);
  const ratio = (deep: string, first: string) => (m[deep]! / m[first]!).toFixed(2);
  console.log('Ratios (deep page / page 1; keyset target: about 1):');
  console.log(`  GET /pets                     ${ratio('GET /pets page 10,000', 'GET /pets page 1')}`);
  console.log(`  GET /pets?status=available    ${ratio('GET /pets?status=available deep page', 'GET /pets?status=available page 1')}`);
  console.log(`  GET /store/inventory          ${ratio('GET /store/inventory page 10,000', 'GET /store/inventory page 1')}`);
  console.log(`  OFFSET, for contrast          ${ratio('OFFSET page 10,000 (SQL only)', 'OFFSET page 1 (SQL only)')}`);
}
