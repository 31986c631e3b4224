// Builders shared by the test files. Every app gets its own migrated SQLite database.
import request from 'supertest';
import type { Express } from 'express';
import { createApp, type AppOptions } from '../server/app';
import { loadConfig, type Config } from '../server/config';
import { createDatabase, type Db } from '../db/client';
import { createRepositories } from '../db/repositories';
import { registerAccount } from '../handlers/accounts';
import { createLogger, type Logger } from '../server/log';

/** A logger whose JSON lines the test can read back. */
export function captureLog(level: Config['logLevel'] = 'debug'): { log: Logger; lines: () => Array<Record<string, unknown>>; text: () => string } {
  const written: string[] = [];
  const log = createLogger(level, { write: (line: string) => void written.push(line) });
  return {
    log,
    lines: () => written.map((line) => JSON.parse(line) as Record<string, unknown>),
    text: () => written.join(''),
  };
}

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '100000',
    // Tests log in with wrong passwords on purpose; the lockout has its own tests.
    LOGIN_FAILURES_PER_ACCOUNT: '100000',
    LOGIN_FAILURES_PER_ADDRESS: '100000',
    SEED_DEMO_DATA: 'false',
    MESSAGE_DELIVERY_DELAY_MS: '0',
    ...env,
  });
}

export interface TestApp {
  app: Express;
  db: Db;
  config: Config;
}

/** A fresh app on a fresh database (":memory:" unless a path is given). */
export function setupApp(options: Partial<AppOptions> & { databasePath?: string; env?: Record<string, string> } = {}): TestApp {
  const config = options.config ?? testConfig(options.env);
  const db = options.db ?? createDatabase(options.databasePath ?? ':memory:');
  const app = createApp({ ...options, db, config });
  return { app, db, config };
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
  const account = await registerAccount(createRepositories(t.db), { email, password, role: 'admin' });
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
export const nextPage = (res: request.Response): string | undefined =>
  /<([^>]+)>;\s*rel="next"/.exec(res.headers.link ?? '')?.[1];

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
