// A bounded load of writes against a real server, counting what was acknowledged and
// what was refused, and the rows a database file holds afterwards: the durability and
// fault tests compare the two (nothing acknowledged may be missing).
import Database from 'better-sqlite3';
import { createDatabase } from '../db/client';
import { createSqliteStorage } from '../db/sqlite-storage';
import { createStore } from '../domain/store';
import { createPasswordHashing } from '../server/security/passwords';
import { registerAccount } from '../handlers/accounts';

export const adminEmail = 'admin@example.com';

/** The server's settings for a load from one address and one customer: the per-client bounds out of the way. */
export const loadEnv = {
  SEED_DEMO_DATA: 'false',
  RATE_LIMIT_PER_MINUTE: '1000000',
  SIGNUPS_PER_ADDRESS_PER_HOUR: '1000000',
  QUEUED_MESSAGES_PER_ACCOUNT: '1000000',
  // Delivery would write too; here only the requests do.
  MESSAGE_DELIVERY_DELAY_MS: '60000',
};
export const password = 'correct horse battery staple';

export interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

export async function call(
  base: string,
  method: string,
  path: string,
  { key, basic, body }: { key?: string; basic?: string; body?: unknown } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (basic) headers.authorization = `Basic ${Buffer.from(`${basic}:${password}`).toString('base64')}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

/** A migrated database file with one admin account, made before the server starts on it. */
export async function databaseWithAdmin(path: string): Promise<void> {
  const storage = createSqliteStorage(createDatabase(path));
  await registerAccount(
    { repos: createStore(storage), passwords: createPasswordHashing({ concurrency: 1, queue: 0 }) },
    { email: adminEmail, password, role: 'admin' },
  );
  await storage.close();
}

export async function keyFor(base: string, email: string): Promise<string> {
  const res = await call(base, 'POST', '/api-keys', { basic: email, body: {} });
  if (res.status !== 201) throw new Error(`POST /api-keys for ${email}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.key as string;
}

/** A customer's key, and a pet in stock that the customer can order. */
export async function setUp(base: string, stock: number): Promise<{ adminKey: string; customerKey: string; petId: number }> {
  const adminKey = await keyFor(base, adminEmail);
  const category = await call(base, 'POST', '/categories', { key: adminKey, body: { name: 'Dogs' } });
  const pet = await call(base, 'POST', '/pets', { key: adminKey, body: { name: 'Rex', categoryId: category.body.id } });
  const petId = pet.body.id as number;
  const stocked = await call(base, 'PUT', `/store/inventory/${petId}`, { key: adminKey, body: { quantity: stock } });
  if (stocked.status !== 200) throw new Error(`stocking pet ${petId}: ${stocked.status}`);
  await call(base, 'POST', '/accounts', { body: { email: 'buyer@example.com', password } });
  return { adminKey, customerKey: await keyFor(base, 'buyer@example.com'), petId };
}

export type Kind = 'accounts' | 'keys' | 'orders' | 'messages';
const kinds: Kind[] = ['accounts', 'keys', 'orders', 'messages'];
const count = () => ({ accounts: 0, keys: 0, orders: 0, messages: 0 });

export interface Tally {
  acknowledged: Record<Kind, number>;
  refused: Record<Kind, number>;
  /** Any answer other than an acknowledgement or a 503 storage_unavailable with Retry-After. */
  unexpected: string[];
}

export const emptyTally = (): Tally => ({ acknowledged: count(), refused: count(), unexpected: [] });

/** A ~2 KB message: a few hundred fill a small disk. */
export const bigMessage = 'x'.repeat(1990);

let signUps = 0;

/**
 * `concurrency` loops, each signing up an account, making it a key, placing an order and
 * queueing a message, for at most `rounds` rounds in all or until `enough` says so.
 */
export async function writeLoad(
  base: string,
  {
    customerKey,
    petId,
    rounds,
    concurrency = 8,
    enough = () => false,
  }: {
    customerKey: string;
    petId: number;
    rounds: number;
    concurrency?: number;
    enough?: (tally: Tally) => boolean;
  },
  tally: Tally = emptyTally(),
): Promise<Tally> {
  const record = (kind: Kind, res: Reply, ok: number) => {
    if (res.status === ok) tally.acknowledged[kind]++;
    else if (res.status === 503 && res.body.code === 'storage_unavailable' && res.headers.get('retry-after') !== null)
      tally.refused[kind]++;
    else tally.unexpected.push(`${kind}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.status === ok;
  };
  let started = 0;
  const loop = async () => {
    while (started < rounds && !enough(tally)) {
      started++;
      const email = `load-${process.pid}-${++signUps}@example.com`;
      if (record('accounts', await call(base, 'POST', '/accounts', { body: { email, password } }), 201)) {
        record('keys', await call(base, 'POST', '/api-keys', { basic: email, body: {} }), 201);
      }
      record('orders', await call(base, 'POST', '/store/orders', { key: customerKey, body: { petId, quantity: 1 } }), 201);
      record('messages', await call(base, 'POST', '/messages', { key: customerKey, body: { message: bigMessage } }), 202);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return tally;
}

/** The rows the load made, read from the file once the server has stopped. */
export function storedRows(path: string): Record<Kind, number> {
  const db = new Database(path, { readonly: true });
  try {
    const n = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    return {
      accounts: n("select count(*) as n from accounts where email like 'load-%'"),
      keys: n("select count(*) as n from api_keys join accounts on accounts.id = api_keys.account_id where accounts.email like 'load-%'"),
      orders: n('select count(*) as n from orders'),
      messages: n('select count(*) as n from messages'),
    };
  } finally {
    db.close();
  }
}

export const allKinds = kinds;
