// The rolling restart drill (npm run drill:rolling-restart; CI runs it): two instances of
// the built service on one PostgreSQL (PG_URL, from scripts/with-postgres.sh) behind a
// real HAProxy (Debian's package, scripts/ensure-haproxy.sh) that checks GET /readyz as
// docs/deployment.md says, restarted one after the other with SIGTERM while 16 keep-alive
// clients place orders through the proxy. It exits 1 unless no request failed and every
// order acknowledged is read back afterwards. Bounded: the clients stop with the last
// restart, and the whole drill gives up after DRILL_TIMEOUT_MS.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createPgStorage, migratePg, openPgDatabase } from '../../db/pg/storage';
import { createStore } from '../../domain/store';
import { registerAccount } from '../../handlers/accounts';
import { loadConfig } from '../../server/config';
import { createPasswordHashing } from '../../server/security/passwords';
import { freePort, num } from '../bench/common';
import { eventually, startServer, type ServerProcess } from '../server-process';

const clients = 16;
const timeoutMs = num('DRILL_TIMEOUT_MS', 150_000);
const adminEmail = 'drill-admin@example.com';
const customerEmail = 'drill-customer@example.com';
const password = 'correct horse battery staple';
// What ships: the default delay, and the check timing of docs/deployment.md's lines.
const { shutdownDelayMs } = loadConfig({});

const pgUrl = process.env.PG_URL;
if (!pgUrl) {
  console.error('PG_URL is not set: run under scripts/with-postgres.sh (npm run drill:rolling-restart does)');
  process.exit(2);
}

interface Answer {
  status: number | undefined;
  error?: string;
  body: string;
}

function call(agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: { ...headers, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode, body: text }));
        res.on('error', (err: NodeJS.ErrnoException) => resolve({ status: undefined, error: err.code ?? err.message, body: text }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ status: undefined, error: err.code ?? err.message, body: '' }));
    req.end(payload);
  });
}

/** A field of a JSON answer's body. */
const field = (answer: Answer, name: string): unknown => (JSON.parse(answer.body) as Record<string, unknown>)[name];

/** `show stat` on HAProxy's stats socket: each server's status (UP, DOWN, ...). */
function serverStates(socketPath: string): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    let text = '';
    socket.on('data', (chunk) => (text += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('end', () => {
      const states: Record<string, string> = {};
      for (const line of text.split('\n')) {
        const [proxy, server, ...rest] = line.split(',');
        if (proxy === 'petstore' && server && server !== 'BACKEND') states[server] = rest[15] ?? '';
      }
      resolve(states);
    });
    socket.end('show stat\n');
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-drill-'));
  const children: ServerProcess[] = [];
  let proxy: ReturnType<typeof spawn> | undefined;
  const giveUp = setTimeout(() => {
    console.error(`rolling restart drill: not done within ${timeoutMs} ms`);
    process.exit(1);
  }, timeoutMs);
  giveUp.unref();
  try {
    // A database of its own, migrated, with an admin in it.
    const name = `petstore_drill_${process.pid}`;
    const admin = new Client({ connectionString: pgUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
    await admin.end();
    const url = new URL(pgUrl!);
    url.pathname = `/${name}`;
    const databaseUrl = url.toString();
    const db = openPgDatabase(databaseUrl, 2);
    await migratePg(db);
    const storage = createPgStorage(db);
    await registerAccount(
      { repos: createStore(storage), passwords: createPasswordHashing({ concurrency: 1, queue: 0 }) },
      { email: adminEmail, password, role: 'admin' },
    );
    await storage.close();

    const ports = [await freePort(), await freePort()];
    const proxyPort = await freePort();
    const env = (port: number) => ({
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      SHUTDOWN_DELAY_MS: String(shutdownDelayMs),
      TRUST_PROXY: 'loopback',
      RATE_LIMIT_PER_MINUTE: '1000000',
      SEED_DEMO_DATA: 'false',
      LOG_LEVEL: 'warn',
    });
    // startServer waits for the line naming the address, which LOG_LEVEL=warn would hide.
    const start = (i: number) => startServer({ ...env(ports[i]!), LOG_LEVEL: 'info' }, 60_000);
    for (let i = 0; i < 2; i++) children[i] = await start(i);

    // docs/deployment.md's backend lines, on loopback.
    const stats = join(dir, 'haproxy.sock');
    const config = join(dir, 'haproxy.cfg');
    writeFileSync(
      config,
      `global
    maxconn 2000
    stats socket ${stats} mode 600 level admin

defaults
    mode http
    option forwardfor
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 5s

frontend petstore_in
    bind 127.0.0.1:${proxyPort}
    default_backend petstore

backend petstore
    option httpchk GET /readyz
    default-server inter 2s fall 2 rise 2
    http-reuse safe
    server app1 127.0.0.1:${ports[0]} check maxconn 2000
    server app2 127.0.0.1:${ports[1]} check maxconn 2000
`,
    );
    proxy = spawn('haproxy', ['-db', '-f', config], { stdio: ['ignore', 'inherit', 'inherit'] });
    const bothUp = () =>
      eventually(async () => {
        const states = await serverStates(stats).catch((): Record<string, string> => ({}));
        return states.app1 === 'UP' && states.app2 === 'UP' ? true : undefined;
      }, 30_000);
    await bothUp();

    // A customer, a key, and a pet with the stock for every order the drill can place.
    const agent = new Agent({ keepAlive: true, maxSockets: clients });
    const basic = (email: string) => ({ authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` });
    const adminKey = field(await call(agent, proxyPort, 'POST', '/api-keys', basic(adminEmail), {}), 'key') as string;
    const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
    const categoryId = field(await call(agent, proxyPort, 'POST', '/categories', bearer(adminKey), { name: 'Drill' }), 'id');
    const petId = field(await call(agent, proxyPort, 'POST', '/pets', bearer(adminKey), { name: 'Rex', categoryId }), 'id') as number;
    await call(agent, proxyPort, 'PUT', `/store/inventory/${petId}`, bearer(adminKey), { quantity: 1_000_000 });
    await call(agent, proxyPort, 'POST', '/accounts', {}, { email: customerEmail, password });
    const customerKey = field(await call(agent, proxyPort, 'POST', '/api-keys', basic(customerEmail), {}), 'key') as string;

    const acknowledged: number[] = [];
    const failed: string[] = [];
    let sent = 0;
    let running = true;
    const loop = async () => {
      while (running) {
        sent++;
        const answer = await call(
          agent,
          proxyPort,
          'POST',
          '/store/orders',
          { ...bearer(customerKey), 'idempotency-key': randomUUID() },
          { petId, quantity: 1 },
        );
        if (answer.status === 201) acknowledged.push(field(answer, 'id') as number);
        else failed.push(answer.error ?? `${answer.status} ${answer.body}`);
      }
    };
    const load = Promise.all(Array.from({ length: clients }, loop));

    const started = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    for (let i = 0; i < 2; i++) {
      const signalled = Date.now();
      const code = await children[i]!.stop();
      if (code !== 0) throw new Error(`app${i + 1} exited with ${code} on SIGTERM:\n${children[i]!.log()}`);
      const stopped = Date.now();
      children[i] = await start(i);
      await bothUp();
      console.log(`app${i + 1}: stopped ${stopped - signalled} ms after SIGTERM, back in the balancer ${Date.now() - stopped} ms later`);
    }
    await new Promise((r) => setTimeout(r, 2_000));
    running = false;
    await load;
    agent.destroy();
    const loadMs = Date.now() - started;

    // Every order acknowledged, read back: through the proxy, and in the database.
    const check = new Client({ connectionString: databaseUrl });
    await check.connect();
    const { rows } = await check.query<{ id: string }>('select id from orders');
    await check.end();
    const stored = new Set(rows.map((r) => Number(r.id)));
    const missing = acknowledged.filter((id) => !stored.has(id));
    const readBack = new Agent({ keepAlive: true, maxSockets: 8 });
    const unread: number[] = [];
    for (let i = 0; i < acknowledged.length; i += 8) {
      await Promise.all(
        acknowledged.slice(i, i + 8).map(async (id) => {
          const answer = await call(readBack, proxyPort, 'GET', `/store/orders/${id}`, bearer(customerKey));
          if (answer.status !== 200) unread.push(id);
        }),
      );
    }
    readBack.destroy();

    console.log(
      `rolling restart drill: ${sent} orders sent in ${(loadMs / 1000).toFixed(1)} s through HAProxy, ${acknowledged.length} acknowledged, ` +
        `${failed.length} failed, ${missing.length} acknowledged but not stored, ${unread.length} not read back`,
    );
    if (failed.length > 0) console.log(`failed: ${JSON.stringify(failed.slice(0, 10))}`);
    if (failed.length > 0 || missing.length > 0 || unread.length > 0 || acknowledged.length === 0) process.exitCode = 1;
  } finally {
    proxy?.kill('SIGTERM');
    await Promise.all(children.filter((c) => c.child.exitCode === null).map((c) => c.stop().catch(() => null)));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
