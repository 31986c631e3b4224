// A page of a list costs the same at a million rows as at ten: every list operation of
// openapi.yaml (a GET that takes a cursor), with every combination of its query filters and
// a cursor inside the data, as a customer and as an admin, is answered by a query whose
// index constrains each equality the query compares (the spec's filters and the caller's
// own account), and the cursor. Without such an index the engine reads the rows of one
// filter and checks the others row by row: a page that matches nothing reads everything
// (docs/performance.md, "Data scale"). The combinations come from the spec, the SQL from
// what the service sends while answering, the plans from the engine the suite runs on
// (SQLite's EXPLAIN QUERY PLAN; PostgreSQL's EXPLAIN, with sequential scans off, since on
// a few rows it would rightly prefer them); a filter added without its index fails here.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { Client } from 'pg';
import { createDatabase } from '../db/client';
import { createPgStorage, migratePg, openPgDatabase } from '../db/pg/storage';
import { createSqliteStorage } from '../db/sqlite-storage';
import type { Storage } from '../domain/storage';
import { encodeCursor } from '../handlers/pagination';
import { loadSpec } from '../server/spec';
import { admin, createPgDatabase, customer, setupApp, testDatabaseUrl, type Caller } from './helpers';

type Schema = Record<string, unknown>;
type Parameter = { name: string; in: string; schema?: Schema; $ref?: string };

const spec = loadSpec() as unknown as Schema;
const resolve = <T>(node: T): T => {
  let n = node as Schema;
  while (typeof n.$ref === 'string') {
    n = n.$ref
      .slice(2)
      .split('/')
      .reduce<Schema>((at, key) => at[key] as Schema, spec);
  }
  return n as T;
};

const paging = new Set(['#/components/parameters/Limit', '#/components/parameters/Cursor']);

/** Every GET that takes the cursor, with its query parameters other than the page's own. */
const listOperations = Object.entries((spec.paths ?? {}) as Record<string, Record<string, Schema>>).flatMap(([path, item]) => {
  const get = item.get;
  const params = [...((item.parameters as Parameter[] | undefined) ?? []), ...((get?.parameters as Parameter[] | undefined) ?? [])];
  if (!get || !params.some((p) => p.$ref === '#/components/parameters/Cursor')) return [];
  const filters = params.filter((p) => !(p.$ref && paging.has(p.$ref))).map((p) => resolve(p));
  if (filters.some((p) => p.in !== 'query'))
    throw new Error(`${path}: a list with a ${filters.find((p) => p.in !== 'query')?.in} parameter`);
  return [{ path, operationId: get.operationId as string, filters }];
});

/** A value the filter accepts, as a query string writes it; a schema this does not know fails the test. */
function valueFor(param: Parameter, ids: number[]): string {
  const schema = resolve(param.schema ?? {});
  if (Array.isArray(schema.enum)) return String(schema.enum[0]);
  switch (schema.type) {
    case 'boolean':
      return 'true';
    case 'integer':
      return '1';
    case 'array': {
      const item = resolve((schema.items ?? {}) as Schema);
      if (item.type !== 'integer') break;
      return ids.slice(0, 3).join(',');
    }
  }
  throw new Error(`no value for the filter ${param.name} (${JSON.stringify(schema)}): teach valueFor its type`);
}

/** Every subset of the filters, the empty one first. */
const combinations = <T>(items: T[]): T[][] =>
  items.reduce<T[][]>((subsets, item) => [...subsets, ...subsets.map((s) => [...s, item])], [[]]);

/**
 * The columns a WHERE clause compares to a bound value (`= ?`, `= $1`, `in (...)`, `= any($1)`), as
 * table.column; on PostgreSQL also the leading columns of a range of row values, which
 * hold one value each (db/pg/storage.ts, keysetPage).
 */
function equalities(sql: string): string[] {
  const where = /\bwhere\b(.*?)(\border by\b|\blimit\b|$)/is.exec(sql)?.[1] ?? '';
  const found = [...where.matchAll(/"(\w+)"\."(\w+)" (?:= (?:\+?\?|\$\d+|any\()|in \()/gi)].map((m) => `${m[1]}.${m[2]}`);
  for (const [, row] of where.matchAll(/\(((?:"\w+"\."\w+"(?:, )?)+)\) <= \(/g)) {
    found.push(...[...(row as string).matchAll(/"(\w+)"\."(\w+)"/g)].slice(0, -1).map((m) => `${m[1]}.${m[2]}`));
  }
  return [...new Set(found)];
}

/** What an Index Cond constrains: `col=` and `id>` terms, a range of row values read as equalities on all but its last column. */
function indexConstraints(cond: string): string[] {
  const terms = [...cond.matchAll(/\((\w+) (=|>)/g)].map((m) => `${m[1]}${m[2]}`);
  const lower = [...cond.matchAll(/ROW\(([\w, ]+)\) >/g)].map((m) => m[1] as string);
  const upper = new Set([...cond.matchAll(/ROW\(([\w, ]+)\) <=/g)].map((m) => m[1] as string));
  for (const row of lower.filter((r) => upper.has(r))) {
    const columns = row.split(', ');
    terms.push(...columns.slice(0, -1).map((c) => `${c}=`), `${columns[columns.length - 1]}>`);
  }
  return terms;
}

interface Engine {
  storage: Storage;
  /** The list statements (a SELECT with a LIMIT) run since the last call, with their values. */
  take(): Array<{ sql: string; values: unknown[] }>;
  /**
   * What keeps each table's rows in check: for each table the plan reads, its index and
   * constrained columns. `generic`: the plan made without the values, which PostgreSQL
   * may settle on for a named prepared statement after a few runs.
   */
  plan(
    sql: string,
    values: unknown[],
    generic: boolean,
  ): Promise<Array<{ table: string; index: string; constrained: string[]; sorts: boolean }>>;
  /** Whether the engine has generic plans to check as well. */
  generic: boolean;
  /** Rows enough for the engine's statistics to count (PostgreSQL's planner reads them; SQLite's, without ANALYZE, does not). */
  fill(): Promise<void>;
  close(): Promise<void>;
}

const isList = (sql: string) => /^\s*select\b/i.test(sql) && /\blimit\b/i.test(sql);

function sqliteEngine(): Engine {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-plans-'));
  const db = createDatabase(join(dir, 'petstore.db'));
  // The read connection's statements too: every better-sqlite3 statement shares this prototype.
  const statementProto = Object.getPrototypeOf(db.$client.prepare('select 1')) as { all: (...a: unknown[]) => unknown };
  const spy = jest.spyOn(statementProto, 'all');
  let seen = 0;
  return {
    storage: createSqliteStorage(db),
    generic: false,
    take() {
      const runs = spy.mock.calls.slice(seen).map((args, i) => ({
        sql: (spy.mock.contexts[seen + i] as { source: string }).source,
        values: args,
      }));
      seen = spy.mock.calls.length;
      return runs.filter((r) => isList(r.sql));
    },
    async plan(sql, values) {
      const rows = db.$client.prepare(`explain query plan ${sql}`).all(...values) as Array<{ detail: string }>;
      const sorts = rows.some((r) => /TEMP B-TREE FOR ORDER BY/.test(r.detail));
      return rows.flatMap(({ detail }) => {
        const m = /^(SEARCH|SCAN) (\w+)(?: USING (?:COVERING )?(INDEX (\w+)|INTEGER PRIMARY KEY))?(?: \((.*)\))?/.exec(detail);
        if (!m) return [];
        const table = m[2] as string;
        const constrained = (m[5] ?? '')
          .split(' AND ')
          .map((term) => /^(\w+)[=<>]/.exec(term)?.[0] ?? '')
          .filter(Boolean)
          .map((term) => term.replace(/^rowid/, 'id'));
        return [{ table, index: m[1] === 'SCAN' ? 'none (scan)' : (m[4] ?? 'primary key'), constrained, sorts }];
      });
    },
    async fill() {},
    async close() {
      spy.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A bound value as PostgreSQL reads it in text: an array as `{1,2,3}`. */
const literalOf = (value: unknown) => (Array.isArray(value) ? `{${value.join(',')}}` : String(value));

async function postgresEngine(adminUrl: string): Promise<Engine> {
  const url = await createPgDatabase(adminUrl, `petstore_plans_${randomBytes(6).toString('hex')}`);
  const db = openPgDatabase(url, 5);
  await migratePg(db);
  const explain = new Client({ connectionString: url });
  await explain.connect();
  // PostgreSQL plans by its statistics: on a few rows every index costs the same and
  // reading the table is cheapest. Tens of thousands of rows spread over the filters'
  // values, analysed, and no sequential scans, ask which index a large table is read by.
  await explain.query('set enable_seqscan = off');
  const spy = jest.spyOn(Client.prototype, 'query');
  let seen = 0;
  return {
    storage: createPgStorage(db),
    // The service's lists are named prepared statements (db/pg/storage.ts): after five runs
    // PostgreSQL may keep a plan made without the values, which must read an index too.
    generic: true,
    take() {
      const runs = spy.mock.calls.slice(seen).map(([config, values]) => {
        const c = config as unknown as string | { text: string; values?: unknown[] };
        return typeof c === 'string'
          ? { sql: c, values: (values as unknown[]) ?? [] }
          : { sql: c.text, values: c.values ?? (values as unknown[]) ?? [] };
      });
      seen = spy.mock.calls.length;
      return runs.filter((r) => typeof r.sql === 'string' && isList(r.sql));
    },
    async plan(sql, values, generic) {
      type Explained = { 'QUERY PLAN': Array<{ Plan: Schema }> };
      let rows: Explained[];
      if (generic) {
        await explain.query(`prepare plan_check as ${sql}`);
        try {
          await explain.query('set plan_cache_mode = force_generic_plan');
          const args = values.map((v) => explain.escapeLiteral(literalOf(v))).join(', ');
          rows = (await explain.query<Explained>(`explain (format json) execute plan_check(${args})`)).rows;
        } finally {
          await explain.query('reset plan_cache_mode');
          await explain.query('deallocate plan_check');
        }
      } else {
        // EXPLAIN takes no bound parameters: the values go in as literals, planned for them.
        const literal = sql.replace(/\$(\d+)/g, (_, n: string) => explain.escapeLiteral(literalOf(values[Number(n) - 1])));
        rows = (await explain.query<Explained>(`explain (format json) ${literal}`)).rows;
      }
      const found: Array<{ table: string; index: string; constrained: string[]; sorts: boolean }> = [];
      let sorts = false;
      const visit = (node: Schema, heap?: string) => {
        const type = node['Node Type'] as string;
        // An incremental sort (PostgreSQL 13+) sorts too: every row of each group the index yields.
        if (type === 'Sort' || type === 'Incremental Sort') sorts = true;
        const table = (node['Relation Name'] as string | undefined) ?? heap;
        if (type === 'Seq Scan') found.push({ table: table as string, index: 'none (scan)', constrained: [], sorts: false });
        if (/Index/.test(type) && node['Index Name']) {
          const cond = (node['Index Cond'] as string | undefined) ?? '';
          const constrained = indexConstraints(cond);
          found.push({ table: table as string, index: node['Index Name'] as string, constrained, sorts: false });
        }
        const heapName = type === 'Bitmap Heap Scan' ? (node['Relation Name'] as string) : undefined;
        for (const child of (node.Plans as Schema[] | undefined) ?? []) visit(child, heapName);
      };
      visit(rows[0]!['QUERY PLAN'][0]!.Plan);
      return found.map((f) => ({ ...f, sorts }));
    },
    async fill() {
      await explain.query(`
        insert into categories (name, name_key) select 'Bulk ' || g, 'bulk ' || g from generate_series(1, 50) g;
        insert into accounts (email, password_hash, role, created_at)
          select 'bulk' || g || '@example.com', 'x', 'customer', '2026-01-01T00:00:00Z' from generate_series(1, 500) g;
        insert into pets (name, category_id, status)
          select 'Bulk ' || g, (select min(id) from categories) + g % 50, (array['available', 'pending', 'sold'])[1 + g % 3]
          from generate_series(1, 30000) g;
        insert into inventory (pet_id, quantity) select id, 0 from pets on conflict do nothing;
        insert into orders (account_id, pet_id, quantity, complete, created_at)
          select (select min(id) from accounts) + g % 500, 1, 1, g % 2 = 0, '2026-01-01T00:00:00Z' from generate_series(1, 30000) g;
        analyze;`);
    },
    async close() {
      spy.mockRestore();
      await explain.end();
      await db.$client.end();
    },
  };
}

describe('every list operation, every combination of its filters, read through an index', () => {
  let engine: Engine;
  let t: ReturnType<typeof setupApp>;
  let boss: Caller;
  let buyer: Caller;
  const petIds: number[] = [];

  beforeAll(async () => {
    engine = testDatabaseUrl ? await postgresEngine(testDatabaseUrl) : sqliteEngine();
    t = setupApp({ storage: engine.storage });
    boss = await admin(t);
    buyer = await customer(t.app);
    const categories = [
      await t.repos.categories.create({ name: 'Planned dogs' }),
      await t.repos.categories.create({ name: 'Planned cats' }),
    ];
    const statuses = ['available', 'pending', 'sold'] as const;
    for (let i = 0; i < 12; i++) {
      const pet = await t.repos.pets.create({ name: `Planned ${i}`, categoryId: categories[i % 2]!.id, status: statuses[i % 3]! });
      petIds.push(pet.id);
    }
    for (const petId of petIds.slice(0, 4)) {
      await t.repos.inventory.setQuantity(petId, 10);
      for (const who of [buyer, boss]) await t.repos.orders.place({ accountId: who.accountId, petId, quantity: 1 });
    }
    await engine.fill();
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('finds the list operations in openapi.yaml, with their filters', () => {
    // What the derivation below walks: if these disappear, it would check nothing.
    const byId = Object.fromEntries(listOperations.map((op) => [op.operationId, op.filters.map((f) => f.name)]));
    expect(byId).toMatchObject({ listPets: expect.arrayContaining(['status', 'categoryId', 'ids']), listOrders: ['complete'] });
    expect(Object.keys(byId)).toEqual(expect.arrayContaining(['listPets', 'listCategories', 'listInventory', 'listOrders', 'listApiKeys']));
  });

  const cases = listOperations.flatMap((op) =>
    combinations(op.filters).flatMap((filters) =>
      (['customer', 'admin'] as const).map((role) => ({
        op,
        filters,
        role,
        name: `${op.operationId}${filters.length ? ` by ${filters.map((f) => f.name).join(' and ')}` : ''} as ${role}`,
      })),
    ),
  );

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, { op, filters, role }) => {
    const query = new URLSearchParams();
    for (const filter of filters) query.set(filter.name, valueFor(filter, petIds));
    // A cursor inside the data: the page starts after the first pet (and order, and key).
    query.set('cursor', encodeCursor(petIds[0]!));
    const who = role === 'admin' ? boss : buyer;
    engine.take();
    const res = await request(t.app).get(`${op.path}?${query.toString()}`).set(who.auth);
    expect(res.status).toBe(200);

    const runs = engine.take();
    expect(runs).toHaveLength(1);
    const { sql, values } = runs[0]!;
    const compared = equalities(sql);
    // Each filter of the request is compared in the SQL (a customer's orders and keys add its account).
    expect(compared.length).toBeGreaterThanOrEqual(filters.length);

    for (const generic of engine.generic ? [false, true] : [false]) {
      const plan = await engine.plan(sql, values, generic);
      const report = { sql, generic, plan };
      // Ids asked for by a list filter (at most its maxItems) are primary-key lookups: reading
      // only them, the engine may check the other filters on each.
      const byKeys = (table: string) =>
        plan.some((p) => p.table === table && p.constrained.includes('id=')) &&
        filters.some((f) => resolve(f.schema ?? {}).type === 'array' && Number(resolve(f.schema ?? {}).maxItems) <= 100);
      for (const column of compared) {
        const [table, name] = column.split('.') as [string, string];
        const reads = plan.filter((p) => p.table === table);
        const constrained = reads.some((p) => p.constrained.includes(`${name}=`)) || byKeys(table);
        expect({ ...report, column, constrained }).toMatchObject({ constrained: true });
      }
      // The page starts at the cursor inside the index, in id order, or reads only the ids
      // asked for: no scan, and no sort of every match.
      const driving = plan[0]!;
      const lookups = byKeys(driving.table);
      expect({ ...report, cursor: driving.constrained.includes('id>') || lookups }).toMatchObject({ cursor: true });
      expect({ ...report, scans: plan.filter((p) => p.index === 'none (scan)').map((p) => p.table) }).toMatchObject({ scans: [] });
      expect({ ...report, sorts: plan.some((p) => p.sorts) && !lookups }).toMatchObject({ sorts: false });
    }
  });
});
