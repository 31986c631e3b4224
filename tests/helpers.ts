// Builders shared by the test files. Every app gets its own migrated database: a SQLite
// file in a temp folder, or, when TEST_DATABASE_URL names a PostgreSQL server (CI runs the
// suite a second time under scripts/with-postgres.sh), a fresh database on it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import type { Express } from 'express';
import { Client } from 'pg';
import { createApp, type AppOptions } from '../server/app';
import { loadConfig, type Config } from '../server/config';
import { createDatabase, type Db } from '../db/client';
import { createPgStorage, migratePg, openPgDatabase } from '../db/pg/storage';
import { createSqliteStorage } from '../db/sqlite-storage';
import type { Storage } from '../domain/storage';
import { createStore, type Store } from '../domain/store';
import { registerAccount } from '../handlers/accounts';
import type { Logger } from 'pino';
import { createLogger } from '../server/observability/log';
import { createPasswordHashing, type PasswordHashing } from '../server/security/passwords';

/** A logger whose JSON lines the test can read back. */
export function captureLog(level: Config['logLevel'] = 'debug'): {
  log: Logger;
  lines: () => Array<Record<string, unknown>>;
  text: () => string;
} {
  const written: string[] = [];
  const log = createLogger(level, { write: (line: string) => void written.push(line) });
  return {
    log,
    lines: () => written.map((line) => JSON.parse(line) as Record<string, unknown>),
    text: () => written.join(''),
  };
}

/** The PostgreSQL server the suite runs on, or undefined for SQLite. */
export const testDatabaseUrl = process.env.TEST_DATABASE_URL || undefined;

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '100000',
    // Tests log in with wrong passwords on purpose; the lockout has its own tests.
    LOGIN_FAILURES_PER_ACCOUNT: '100000',
    LOGIN_FAILURES_PER_ADDRESS: '100000',
    // Tests make many keys with one password; the bound on password checks has its own tests.
    PASSWORD_CHECKS_PER_MINUTE: '100000',
    // Every test signs up from one address; the sign-up limit has its own tests.
    SIGNUPS_PER_ADDRESS_PER_HOUR: '100000',
    // Tests sign up and log in many at once; the bound on waiting hashes has its own tests.
    PASSWORD_HASH_QUEUE: '100000',
    SEED_DEMO_DATA: 'false',
    MESSAGE_DELIVERY_DELAY_MS: '0',
    ...env,
  });
}

export interface TestApp {
  app: Express;
  storage: Storage;
  repos: Store;
  /** The app's password hashing (and its bound on hashes at once). */
  passwords: PasswordHashing;
  config: Config;
  /** Raw SQL on the app's database, `?` placeholders on both engines; the rows of a query. */
  query(text: string, ...params: unknown[]): Promise<Array<Record<string, unknown>>>;
}

const opened: Storage[] = [];
// Under jest, each test file closes its PostgreSQL pools at the end; tests/browser/ runs
// this module without jest.
if (typeof afterAll === 'function') {
  afterAll(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });
}

/** A fresh, migrated database on the test PostgreSQL server, as a connection URL. */
export async function createPgDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`create database ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// SQLite files of this test file, as in production (WAL, a read connection, group commit),
// removed when it ends.
let filesDir: string | undefined;
let files = 0;
const newDatabaseFile = () => join((filesDir ??= mkdtempSync(join(tmpdir(), 'petstore-test-'))), `db-${++files}.sqlite`);
if (typeof afterAll === 'function') {
  afterAll(() => {
    if (filesDir) rmSync(filesDir, { recursive: true, force: true });
  });
}

/** A fresh storage: SQLite (a new temp file unless a path is given), or a new PostgreSQL database. */
export function testStorage(databasePath?: string, given?: Db): { storage: Storage; query: TestApp['query'] } {
  if (testDatabaseUrl && databasePath === undefined && given === undefined) {
    // Jest reuses worker processes across files, so the pid alone does not make a name unique.
    const name = `petstore_t${randomBytes(6).toString('hex')}`;
    const url = createPgDatabase(testDatabaseUrl, name);
    // Created and migrated in the background; every operation waits for it.
    const ready = url.then(async (u) => {
      const db = openPgDatabase(u, 5);
      await migratePg(db);
      return { db, storage: createPgStorage(db) };
    });
    let closed: Promise<void> | undefined;
    const storage = new Proxy({} as Storage, {
      get(_target, name) {
        if (name === 'engine') return 'postgres';
        // Once, as on SQLite: a test may close it (as the service does when it stops) before the file's end does.
        if (name === 'close') return () => (closed ??= ready.then(({ storage }) => storage.close()));
        return async (...args: unknown[]) => {
          const real = (await ready).storage as unknown as Record<string | symbol, (...a: unknown[]) => unknown>;
          return real[name]!(...args);
        };
      },
    });
    opened.push(storage);
    const query: TestApp['query'] = async (text, ...params) => {
      const { db } = await ready;
      let n = 0;
      const result = await db.$client.query(
        text.replace(/\?/g, () => `$${++n}`),
        params,
      );
      return result.rows;
    };
    return { storage, query };
  }
  const db = given ?? createDatabase(databasePath ?? newDatabaseFile());
  const storage = createSqliteStorage(db);
  opened.push(storage);
  const query: TestApp['query'] = async (text, ...params) => {
    const statement = db.$client.prepare(text);
    if (statement.reader) return statement.all(...params) as Array<Record<string, unknown>>;
    statement.run(...params);
    return [];
  };
  return { storage, query };
}

/** A fresh app on a fresh database (see testStorage), or on the SQLite `db` given. */
export function setupApp(options: Partial<AppOptions> & { databasePath?: string; env?: Record<string, string> } = {}): TestApp {
  const config = options.config ?? testConfig(options.env);
  const { storage, query } = options.storage
    ? { storage: options.storage, query: undefined }
    : testStorage(options.databasePath, options.db);
  const { db: _sqlite, ...rest } = options;
  const passwords = options.passwords ?? createPasswordHashing(config.passwordHashing);
  const app = createApp({ ...rest, storage, config, passwords });
  return {
    app,
    storage,
    repos: createStore(storage, config.bounds),
    passwords,
    config,
    query: query ?? (() => Promise.reject(new Error('no raw SQL on a given storage'))),
  };
}

/** A fresh app with an admin (`boss`) and a customer (`buyer`), made before the file's tests run. */
export function setupWithCallers(): TestApp & { boss: Caller; buyer: Caller } {
  const t = setupApp() as TestApp & { boss: Caller; buyer: Caller };
  beforeAll(async () => {
    t.boss = await admin(t);
    t.buyer = await customer(t.app);
  });
  return t;
}

let counter = 0;
export const uniqueEmail = (label = 'user') => `${label}-${process.pid}-${++counter}@example.com`;
export const password = 'correct horse battery staple';

export interface Caller {
  key: string;
  email: string;
  accountId: number;
  auth: { Authorization: string };
}

/** Gets a key the way a client does: HTTP Basic on POST /api-keys. */
export async function keyFor(app: Express, email: string, pw = password, body?: object): Promise<string> {
  const req = request(app).post('/api-keys').auth(email, pw);
  const res = body ? await req.send(body) : await req;
  if (res.status !== 201) throw new Error(`POST /api-keys answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.key as string;
}

/** Signs up through the API and returns a customer with a fresh key. */
export async function customer(app: Express, email = uniqueEmail('customer')): Promise<Caller> {
  const res = await request(app).post('/accounts').send({ email, password });
  if (res.status !== 201) throw new Error(`POST /accounts answered ${res.status}: ${JSON.stringify(res.body)}`);
  const key = await keyFor(app, email);
  return { key, email, accountId: res.body.id, auth: { Authorization: `Bearer ${key}` } };
}

/** Admins exist only from the command line; this does what `npm run account:create -- --admin` does. */
export async function admin(t: TestApp, email = uniqueEmail('admin')): Promise<Caller> {
  const account = await registerAccount(t, { email, password, role: 'admin' });
  if (!account) throw new Error(`could not create admin ${email}`);
  const key = await keyFor(t.app, email);
  return { key, email, accountId: account.id, auth: { Authorization: `Bearer ${key}` } };
}

/** Asserts the contract's Error shape, with status equal to the HTTP status. */
export function expectError(res: request.Response, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.code }).toEqual({ status, code });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.body).toEqual({ code, message: expect.any(String), status });
  expect(res.body.message).not.toMatch(/\n\s+at /);
}

let catalogueCounter = 0;

/** An admin-made category with a unique name. */
export async function createCategory(app: Express, boss: Caller, overrides: object = {}): Promise<{ id: number; name: string }> {
  const res = await request(app)
    .post('/categories')
    .set(boss.auth)
    .send({ name: `Category ${process.pid}-${++catalogueCounter}`, ...overrides });
  if (res.status !== 201) throw new Error(`POST /categories answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** An admin-made pet (in a new category unless one is given), with `stock` units when given. */
export async function createPet(
  app: Express,
  boss: Caller,
  overrides: { name?: string; categoryId?: number; status?: string; stock?: number } = {},
): Promise<{ id: number; name: string; categoryId: number; status: string }> {
  const { stock, ...pet } = overrides;
  const categoryId = pet.categoryId ?? (await createCategory(app, boss)).id;
  const res = await request(app)
    .post('/pets')
    .set(boss.auth)
    .send({ name: `Pet ${++catalogueCounter}`, ...pet, categoryId });
  if (res.status !== 201) throw new Error(`POST /pets answered ${res.status}: ${JSON.stringify(res.body)}`);
  if (stock !== undefined) {
    const put = await request(app).put(`/store/inventory/${res.body.id}`).set(boss.auth).send({ quantity: stock });
    if (put.status !== 200) throw new Error(`PUT /store/inventory answered ${put.status}: ${JSON.stringify(put.body)}`);
  }
  return res.body;
}

/** The next page's path from a list response's `Link: <...>; rel="next"`; undefined on the last page. */
export const nextPage = (res: request.Response): string | undefined => /<([^>]+)>;\s*rel="next"/.exec(res.headers.link ?? '')?.[1];

/**
 * POSTs a byte body with no Content-Type header at all, over a real loopback server:
 * fetch can send that, supertest cannot.
 */
export async function postWithoutContentType(
  app: Express,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; body: unknown }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as { port: number };
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers, body: new TextEncoder().encode(body) });
    return { status: res.status, body: await res.json() };
  } finally {
    server.close();
  }
}
