// PostgreSQL behind a network that stops answering (a firewall dropping packets, a host
// gone): new connections hang instead of being refused. Requests must not each wait for
// their own connection to time out: once the service's probe finds the server unreachable,
// it refuses at once until the probe reaches it again. A TCP proxy in this process stands
// for the network: forwarding, or accepting connections and never answering.
import { createConnection, createServer, type Socket } from 'node:net';
import { eventually, startServer, type ServerProcess } from '../../scripts/server-process';
import { call, loadEnv, setUp } from '../write-load';
import { createAdminDatabase, startPostgres, type ThrowawayPostgres } from './postgres';
import { describeOnDebian } from '../platform';

let pg: ThrowawayPostgres | undefined;
let server: ServerProcess | undefined;
const sockets = new Set<Socket>();
let silent = false;
const proxy = createServer((client) => {
  sockets.add(client);
  client.on('error', () => {}).on('close', () => sockets.delete(client));
  // Accepted, never answered: what a client sees of a server behind a black hole.
  if (silent) return;
  const upstream = createConnection(Number(new URL(pg!.url).port), '127.0.0.1');
  sockets.add(upstream);
  upstream.on('error', () => client.destroy()).on('close', () => sockets.delete(upstream));
  client.on('close', () => upstream.destroy());
  client.pipe(upstream).pipe(client);
});

describeOnDebian("Debian's PostgreSQL server binaries (/usr/lib/postgresql)", 'PostgreSQL unreachable', () => {
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    for (const s of sockets) s.destroy();
    proxy.close();
    await pg?.remove();
  }, 30_000);

  it('refuses at once, not after a connection timeout each, while PostgreSQL cannot be reached, and serves again after', async () => {
    pg = await startPostgres();
    const direct = await createAdminDatabase(pg, 'petstore_unreachable');
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const address = proxy.address();
    const viaProxy = new URL(direct);
    viaProxy.port = String(typeof address === 'object' && address ? address.port : 0);
    server = await startServer({ ...loadEnv, DATABASE_URL: viaProxy.toString() }, 60_000);
    const { customerKey, petId } = await setUp(server.url, 100);
    const order = () => call(server!.url, 'POST', '/store/orders', { key: customerKey, body: { petId, quantity: 1 } });
    expect((await order()).status).toBe(201);

    // The network goes: the pool's connections are cut, new ones hang.
    silent = true;
    for (const s of sockets) s.destroy();
    const cutAt = Date.now();
    const answers: Array<{ at: number; ms: number; status: number; code: unknown }> = [];
    // Four connections for 5 s (bounded by time and count).
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < 1_000 && Date.now() - cutAt < 5_000; i++) {
          const at = Date.now();
          const res = await order();
          answers.push({ at: at - cutAt, ms: Date.now() - at, status: res.status, code: res.body.code });
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    expect(server.child.exitCode).toBeNull();
    expect(answers.filter((a) => a.status !== 503 || a.code !== 'unavailable')).toEqual([]);
    // The first requests wait for the pool's connection timeout (DATABASE_TIMEOUT_MS, 3 s), as does the probe;
    // from then on the answer is immediate.
    const later = answers.filter((a) => a.at >= 3_000);
    expect(later.length).toBeGreaterThan(20);
    const slowest = Math.max(...later.map((a) => a.ms));
    expect(slowest).toBeLessThan(300);
    const probeStart = Date.now();
    const ready = await call(server.url, 'GET', '/readyz');
    expect({ status: ready.status, fast: Date.now() - probeStart < 300 }).toEqual({ status: 503, fast: true });

    silent = false;
    for (const s of sockets) s.destroy();
    const back = Date.now();
    await eventually(async () => ((await order()).status === 201 ? true : undefined), 10_000);
    const recoveredMs = Date.now() - back;
    expect(recoveredMs).toBeLessThan(5_000);
    expect(await server.stop()).toBe(0);
    console.log(
      `PostgreSQL unreachable: ${answers.length} orders refused in 5 s, the first in ${answers[0]?.ms} ms, ` +
        `slowest after 3 s ${slowest} ms (${later.length} answers); served again ${recoveredMs} ms after the network returned`,
    );
  }, 90_000);
});
