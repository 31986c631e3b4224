// GET /metrics (server/observability/metrics.ts) on the built service as `npm start` runs it, with
// METRICS_PORT: the names and labels an operator's queries rely on, and with
// WEB_CONCURRENCY=2 the counts of both workers added up by the primary. A real
// Prometheus scrapes it in tests/prometheus/ (npm run test:prometheus).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, parseExposition, value, type Sample } from './exposition';
import { randomBytes } from 'node:crypto';
import { createPgDatabase, password, testDatabaseUrl } from './helpers';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';

async function scrape(port: number): Promise<Sample[]> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

const json = (body: object) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

describe('GET /metrics', () => {
  let dir: string;
  let server: ServerProcess;
  let metricsPort: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-metrics-'));
    metricsPort = await freePort();
    // On PostgreSQL when the suite runs there (TEST_DATABASE_URL): its pool is measured too.
    const database: Record<string, string> = testDatabaseUrl
      ? { DATABASE_URL: await createPgDatabase(testDatabaseUrl, `petstore_metrics_${randomBytes(6).toString('hex')}`) }
      : { DATABASE_PATH: join(dir, 'petstore.db') };
    server = await startServer({
      ...database,
      METRICS_PORT: String(metricsPort),
      MESSAGE_DELIVERY_DELAY_MS: '0',
      SIGNUPS_PER_ADDRESS_PER_HOUR: '1',
      // A second key is refused inside its transaction: a rolled-back one to count.
      API_KEYS_PER_ACCOUNT: '1',
    });
  });

  afterAll(async () => {
    expect(await server.stop()).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('names each request by its operation, route template and status, and counts what the store did', async () => {
    const base = server.url;
    const email = 'metrics@example.com';
    expect((await fetch(`${base}/accounts`, json({ email, password }))).status).toBe(201);
    // The second sign-up from this address is the signup limiter's.
    expect((await fetch(`${base}/accounts`, json({ email: 'other@example.com', password }))).status).toBe(429);
    const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
    const made = await fetch(`${base}/api-keys`, { method: 'POST', headers: { Authorization: basic } });
    const { key } = (await made.json()) as { key: string };
    expect((await fetch(`${base}/api-keys`, { method: 'POST', headers: { Authorization: basic } })).status).toBe(409);
    const auth = { Authorization: `Bearer ${key}` };
    const send = (method: string, path: string, body?: object, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, {
        method,
        headers: { ...auth, ...(body && { 'Content-Type': 'application/json' }), ...headers },
        ...(body && { body: JSON.stringify(body) }),
      });

    expect((await send('GET', '/pets/1')).status).toBe(200);
    expect((await send('GET', '/pets/1')).status).toBe(200);
    expect((await send('GET', '/pets/999999')).status).toBe(404);
    expect((await fetch(`${base}/pets/1`)).status).toBe(401);
    // With a key the order is a transaction (its record and the order); without, one statement.
    expect((await send('POST', '/store/orders', { petId: 1, quantity: 1 }, { 'Idempotency-Key': 'metrics-order' })).status).toBe(201);
    expect((await send('POST', '/store/orders', { petId: 1, quantity: 1000 })).status).toBe(409);
    expect((await send('POST', '/messages', { message: 'hello' })).status).toBe(202);
    expect((await fetch(`${base}/no/such/path`)).status).toBe(404);
    expect((await send('PATCH', '/pets', {})).status).toBe(405);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/openapi.json`)).status).toBe(200);
    expect((await fetch(`${base}/docs`)).status).toBe(200);
    // Not on the API's port.
    expect((await fetch(`${base}/metrics`)).status).toBe(404);

    // The message is delivered by the worker's next pass.
    const samples = await eventually(async () => {
      const s = await scrape(metricsPort);
      return value(s, 'petstore_message_delivery_lag_seconds_count') === 1 ? s : undefined;
    });
    const count = (labels: Record<string, string>) => value(samples, 'http_server_request_duration_seconds_count', labels);
    expect(count({ operation: 'getPetById', method: 'GET', route: '/pets/{petId}', status: '200' })).toBe(2);
    expect(count({ operation: 'getPetById', route: '/pets/{petId}', status: '404' })).toBe(1);
    // Refused before the validator matched it, still named by its operation.
    expect(count({ operation: 'getPetById', status: '401' })).toBe(1);
    expect(count({ operation: 'createAccount', route: '/accounts', status: '429' })).toBe(1);
    expect(count({ operation: 'placeOrder', method: 'POST', route: '/store/orders', status: '201' })).toBe(1);
    expect(count({ operation: 'sendMessage', status: '202' })).toBe(1);
    expect(count({ operation: 'getHealth', route: '/healthz', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(count({ operation: 'openapiJson', route: '/openapi.json', status: '200' })).toBe(1);
    expect(count({ operation: 'docs', route: '/docs', status: '200' })).toBe(1);
    // A path the spec does not have is never a label value; a method it does not declare keeps the template.
    // /no/such/path, and /metrics on the API's port.
    expect(count({ operation: 'unmatched', method: 'GET', route: '', status: '404' })).toBe(2);
    expect(count({ operation: 'unmatched', method: 'PATCH', route: '/pets', status: '405' })).toBe(1);
    const routes = new Set(samples.filter((s) => s.name === 'http_server_request_duration_seconds_count').map((s) => s.labels.route));
    expect([...routes].filter((r) => r !== '' && !r!.startsWith('/'))).toEqual([]);
    expect(routes.has('/no/such/path')).toBe(false);
    expect(routes.has('/pets/1')).toBe(false);

    expect(value(samples, 'petstore_deprecated_calls_total', { operation: 'getPetById' })).toBe(4);
    expect(value(samples, 'petstore_rate_limit_refusals_total', { limiter: 'signup' })).toBe(1);
    expect(value(samples, 'petstore_rate_limit_refusals_total', { limiter: 'address' })).toBe(0);
    expect(value(samples, 'petstore_store_refusals_total', { code: 'insufficient_stock' })).toBe(1);
    // A 404 of a read is an answer, not a refusal of the store.
    expect(value(samples, 'petstore_store_refusals_total', { code: 'not_found' })).toBe(0);
    expect(value(samples, 'petstore_orders_placed_total')).toBe(1);
    expect(value(samples, 'petstore_messages_queued_total')).toBe(1);
    expect(value(samples, 'petstore_storage_transaction_duration_seconds_count', { outcome: 'committed' })).toBeGreaterThanOrEqual(3);
    expect(value(samples, 'petstore_storage_transaction_duration_seconds_count', { outcome: 'rolled_back' })).toBe(1);
    // The scrape itself is in flight on another port: none on the API's.
    expect(value(samples, 'http_server_active_requests')).toBe(0);
    // Node's default metrics.
    expect(value(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(samples.some((s) => s.name === 'nodejs_eventloop_lag_p99_seconds')).toBe(true);
    if (testDatabaseUrl) {
      // Read at the scrape: the connections the requests above opened (the delivery
      // worker's pass may hold one at that moment).
      const held = value(samples, 'petstore_pg_pool_connections');
      expect(held).toBeGreaterThan(0);
      expect(value(samples, 'petstore_pg_pool_idle_connections')).toBeGreaterThanOrEqual(held - 1);
      expect(value(samples, 'petstore_pg_pool_waiting_requests')).toBe(0);
    } else {
      // SQLite has no pool.
      expect(samples.some((s) => s.name.startsWith('petstore_pg_pool'))).toBe(false);
    }
  });

  it('serves /metrics alone on its port', async () => {
    expect((await fetch(`http://127.0.0.1:${metricsPort}/`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});

describe('GET /metrics: connections', () => {
  /** A server with `env`, and what a test needs to open connections to it and scrape it. */
  async function withServer(env: Record<string, string>, test: (t: Connections) => Promise<void>) {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-metrics-connections-'));
    const metricsPort = await freePort();
    const server = await startServer({ DATABASE_PATH: join(dir, 'petstore.db'), METRICS_PORT: String(metricsPort), ...env });
    const { hostname, port } = new URL(server.url);
    const open = () => connect({ port: Number(port), host: hostname }).on('error', () => {});
    try {
      await test({
        open,
        // A connection that sends a request, resolving to its status line once the server closes it.
        refusedOne: () =>
          new Promise<string>((resolve) => {
            let out = '';
            const socket = open();
            socket.on('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
            socket.on('data', (chunk: Buffer) => (out += chunk.toString('latin1')));
            socket.on('close', () => resolve(out.split('\r\n')[0] ?? ''));
          }),
        scrape: () => scrape(metricsPort),
        openNow: (count) =>
          eventually(async () => {
            const samples = await scrape(metricsPort);
            return value(samples, 'petstore_open_connections') === count ? samples : undefined;
          }),
      });
    } finally {
      expect(await server.stop()).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }
  interface Connections {
    open: () => ReturnType<typeof connect>;
    refusedOne: () => Promise<string>;
    scrape: () => Promise<Sample[]>;
    /** The samples once the server holds `count` connections. */
    openNow: (count: number) => Promise<Sample[]>;
  }

  it('counts the open connections and those refused past the per-address cap, answered', () =>
    withServer({ MAX_CONNECTIONS_PER_ADDRESS: '2' }, async ({ open, refusedOne, scrape, openNow }) => {
      const held = [open(), open()];
      await openNow(2);
      expect(await Promise.all([1, 2, 3].map(refusedOne))).toEqual(Array(3).fill('HTTP/1.1 429 Too Many Requests'));
      const samples = await openNow(2);
      expect(value(samples, 'petstore_refused_connections_total', { reason: 'address_cap' })).toBe(3);
      expect(value(samples, 'petstore_refused_connections_total', { reason: 'global_cap' })).toBe(0);
      for (const s of held) s.destroy();
      // Counters keep counting across scrapes; the gauge follows the connections.
      await openNow(0);
      expect(value(await scrape(), 'petstore_refused_connections_total', { reason: 'address_cap' })).toBe(3);
    }));

  it('counts a refusal past the global cap under its own reason', () =>
    withServer({ MAX_CONNECTIONS: '2' }, async ({ open, refusedOne, openNow }) => {
      const held = [open(), open()];
      await openNow(2);
      expect(await refusedOne()).toBe('HTTP/1.1 503 Service Unavailable');
      const samples = await openNow(2);
      expect(value(samples, 'petstore_refused_connections_total', { reason: 'global_cap' })).toBe(1);
      expect(value(samples, 'petstore_refused_connections_total', { reason: 'address_cap' })).toBe(0);
      for (const s of held) s.destroy();
    }));
});
