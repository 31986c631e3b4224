// Load shedding (server/http/overload.ts): while the event loop is behind, new requests get a
// fast 503 `overloaded` with Retry-After before any work, /readyz says not ready,
// /healthz still answers, and all of it recovers by itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';
import type { OverloadMonitor } from '../server/http/overload';
import { customer, expectError, setupApp, type Caller } from './helpers';

const monitor: OverloadMonitor & { overloaded: boolean } = {
  overloaded: false,
  delayMs: 0,
  shed: () => {},
  start: () => {},
  stop: () => {},
};

describe('while the monitor says overloaded', () => {
  const t = setupApp({ overload: monitor });
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });
  afterEach(() => {
    monitor.overloaded = false;
  });

  it('answers every request 503 overloaded with Retry-After before its key, body or parameters are looked at', async () => {
    monitor.overloaded = true;
    for (const res of [
      await request(t.app).get('/pets').set(me.auth),
      await request(t.app).get('/pets'),
      await request(t.app).post('/pets').set(me.auth).set('Content-Type', 'application/json').send('{not json'),
      await request(t.app).get('/pets/0'),
      await request(t.app).get('/no/such/path'),
      await request(t.app).get('/readyz'),
    ]) {
      expectError(res, 503, 'overloaded');
      expect(res.headers['retry-after']).toBe('1');
    }
    expect((await request(t.app).get('/healthz')).status).toBe(200);
  });

  it('serves again as soon as it is not', async () => {
    expect((await request(t.app).get('/pets').set(me.auth)).status).toBe(200);
    expect((await request(t.app).get('/readyz')).status).toBe(200);
  });
});

describe('a real server whose event loop falls behind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-overload-'));
  let server: ServerProcess;
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sheds with 503 overloaded and Retry-After, says not ready, keeps /healthz, and recovers', async () => {
    server = await startServer({
      DATABASE_PATH: join(dir, 'petstore.db'),
      OVERLOAD_EVENT_LOOP_DELAY_MS: '100',
      NODE_OPTIONS: `--require ${join(__dirname, 'fixtures', 'block-on-signal.cjs')}`,
      BLOCK_MS: '300',
      BLOCK_TOTAL_MS: '3000',
    });
    // The first requests compile what the validator builds on first use, which may itself
    // hold the loop past this low bound for a moment: they are retried, as a client would.
    const me = await eventually(() => customer(server.url as never).catch(() => undefined));
    await eventually(async () => ((await request(server.url).get('/pets').set(me.auth)).status === 200 ? true : undefined));
    await eventually(async () => ((await request(server.url).get('/readyz')).status === 200 ? true : undefined));

    server.child.kill('SIGUSR2');
    const seen: Record<string, request.Response[]> = { api: [], readyz: [], healthz: [] };
    // Bounded: the bursts last 3 s, each request waits at most one burst.
    for (let i = 0; i < 6; i++) {
      seen.api!.push(await request(server.url).get('/pets').set(me.auth));
      seen.readyz!.push(await request(server.url).get('/readyz'));
      seen.healthz!.push(await request(server.url).get('/healthz'));
    }
    const shed = seen.api!.filter((res) => res.status === 503);
    expect(shed.length).toBeGreaterThan(0);
    for (const res of shed) {
      expectError(res, 503, 'overloaded');
      expect(res.headers['retry-after']).toBe('1');
    }
    expect(seen.readyz!.some((res) => res.status === 503 && res.body.code === 'overloaded')).toBe(true);
    expect(seen.healthz!.map((res) => res.status)).toEqual(seen.healthz!.map(() => 200));

    // Once the bursts are over, by itself.
    await eventually(async () => ((await request(server.url).get('/readyz')).status === 200 ? true : undefined), 15_000);
    expect((await request(server.url).get('/pets').set(me.auth)).status).toBe(200);
    const log = server.log();
    expect(log).toContain('Overloaded: new requests are refused with 503 overloaded');
    await eventually(() => (server.log().includes('No longer overloaded') ? true : undefined), 15_000);
    // One line for the episode, not one per refused request.
    expect(log.match(/"level":50/g)).toBeNull();
  });
});
