// Each client's fair share of the event loop (server/http/admission.ts), on the service's
// HTTP server (server/http/server.ts) on loopback, in front of an app whose every request
// costs 1 ms of CPU: a greedy client in a process of its own (scripts/drill/attacker.ts)
// cannot hold a quiet one's requests behind its own; a connection whose requests wait is
// not read meanwhile; a client past its queue's bound is answered 429 in the Error shape.
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request, type RequestListener } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import express from 'express';
import { clientKey, type Trust } from '../server/http/admission';
import { loadConfig } from '../server/config';
import { createHttpServer, createLifecycle, type HttpService } from '../server/http/server';
import { repoRoot } from '../scripts/server-process';
import { describeOnLinux } from './platform';

/** An app whose every request costs `ms` of CPU, synchronously, as a handler's own work does. */
const burning =
  (ms: number): RequestListener =>
  (_req, res) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
    res.setHeader('Content-Type', 'application/json');
    res.end('{"status":"ok"}');
  };

async function serve(app: RequestListener, env: Record<string, string> = {}): Promise<{ http: HttpService; port: number }> {
  const config = loadConfig({ SHUTDOWN_DELAY_MS: '0', ...env });
  const http = createHttpServer(app, config, createLifecycle(), pino({ level: 'silent' }));
  await new Promise<void>((resolve) => http.server.listen(0, '127.0.0.1', resolve));
  return { http, port: (http.server.address() as AddressInfo).port };
}

const stop = async (http: HttpService) => {
  http.server.closeAllConnections();
  await new Promise((resolve) => http.server.close(resolve));
};

/** The greedy client: `connections` from 10 addresses of its own, 8 requests in flight on each, every answer read. */
function greedy(port: number, connections: number, ms: number): { child: ChildProcess; started: Promise<void> } {
  const addresses = Array.from({ length: 10 }, (_, i) => `127.52.1.${i + 1}`).join(',');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/drill/attacker.ts'), 'greedy', String(port), String(connections), String(ms), addresses],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, IN_FLIGHT: '8' } },
  );
  const started = new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
  return { child, started };
}

/** One GET on the keep-alive agent; resolves to how long its answer took, ms. */
function timed(port: number, agent: Agent): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(performance.now() - started));
    });
    req.on('error', reject);
    req.end();
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** The quiet client's median time to an answer, one request at a time for `ms`, while the greedy client floods. */
async function quietUnderFlood(env: Record<string, string>): Promise<number> {
  const { http, port } = await serve(burning(1), env);
  const flood = greedy(port, 40, 4_000);
  try {
    await flood.started;
    // The flood under way: its 320 requests in flight.
    await new Promise((r) => setTimeout(r, 500));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const times: number[] = [];
    const until = performance.now() + 2_000;
    while (performance.now() < until) times.push(await timed(port, agent));
    agent.destroy();
    return median(times);
  } finally {
    flood.child.kill();
    await stop(http);
  }
}

describeOnLinux('client addresses across 127.0.0.0/8', 'a fair share for every client', () => {
  it("answers a quiet client at once while a greedy one keeps 320 requests in flight, which without it waits for the greedy client's", async () => {
    const fair = await quietUnderFlood({});
    const unfair = await quietUnderFlood({ FAIR_SHARE: 'false' });
    // 320 requests of 1 ms each in every turn of the event loop: some 300 ms a request
    // without a share; with one, a round of the 11 clients and a slice.
    expect(unfair).toBeGreaterThan(150);
    expect(fair).toBeLessThan(unfair / 4);
  }, 60_000);
});

describeOnLinux('client addresses across 127.0.0.0/8', 'a light client beside greedy ones', () => {
  it("goes first: its request waits for none of the greedy clients' waiting requests, where last in the round it waited for one of each", async () => {
    // For each of the quiet client's requests: how many of the greedy client's ran between
    // its read (the server's second 'request' listener, after the fair share's) and its run.
    let greedyRan = 0;
    let atRead = 0;
    const ranBefore: number[] = [];
    const app = burning(1);
    const { http, port } = await serve((req, res) => {
      if (req.headers['x-quiet']) ranBefore.push(greedyRan - atRead);
      else greedyRan++;
      app(req, res);
    });
    http.server.on('request', (req: { headers: Record<string, unknown> }) => {
      if (req.headers['x-quiet']) atRead = greedyRan;
    });
    const flood = greedy(port, 40, 6_500);
    try {
      await flood.started;
      // A whole window of the flood seen; the quiet client sends slowly enough to stay light
      // (under half an equal share) even on a busy machine that answers few a second.
      await new Promise((r) => setTimeout(r, 1_500));
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 15; i++) {
        const started = performance.now();
        await new Promise<void>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port, path: '/healthz', agent, headers: { 'x-quiet': '1' } }, (res) => {
            res.resume();
            res.on('end', resolve);
          });
          req.on('error', reject);
          req.end();
        });
        await new Promise((r) => setTimeout(r, Math.max(0, 250 - (performance.now() - started))));
      }
      agent.destroy();
      expect(ranBefore).toHaveLength(15);
      // The greedy client had requests waiting throughout (nearly all of its requests wait).
      expect(http.connections.fairShare.deferred).toBeGreaterThan(200);
      expect(median(ranBefore)).toBe(0);
    } finally {
      flood.child.kill();
      await stop(http);
    }
  }, 30_000);
});

describe('who a request is from', () => {
  const trust = (setting: string | number) => express().set('trust proxy', setting).get('trust proxy fn') as Trust;
  const from = (remoteAddress: string, forwarded?: string) =>
    ({ socket: { remoteAddress }, headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded } }) as never;

  it('is the peer, X-Forwarded-For unread, unless the peer is a trusted proxy', () => {
    expect(clientKey(from('203.0.113.7', '198.51.100.1'), undefined)).toBe('203.0.113.7');
    expect(clientKey(from('203.0.113.7', '198.51.100.1'), trust('loopback'))).toBe('203.0.113.7');
  });

  it("behind trusted proxies is the right-most address they did not write, as Express's req.ip", () => {
    // The client wrote the first entry itself; the proxy appended the address it saw.
    expect(clientKey(from('127.0.0.1', '10.9.9.9, 198.51.100.1'), trust('loopback'))).toBe('198.51.100.1');
    expect(clientKey(from('127.0.0.1', '198.51.100.1, 127.0.0.2'), trust('loopback'))).toBe('198.51.100.1');
    expect(clientKey(from('127.0.0.1', '10.9.9.9, 198.51.100.1'), trust(1))).toBe('198.51.100.1');
  });

  it('is an IPv6 client by its /56, however many addresses of it it uses', () => {
    expect(clientKey(from('2001:db8:1:2ff::1'), undefined)).toBe(clientKey(from('2001:db8:1:200::9'), undefined));
    expect(clientKey(from('2001:db8:1:300::1'), undefined)).not.toBe(clientKey(from('2001:db8:1:200::1'), undefined));
  });
});

/** A raw connection that keeps what it reads. */
function rawConnection(port: number): { socket: Socket; read: () => string } {
  const socket = connect({ port, host: '127.0.0.1' });
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => {});
  return { socket, read: () => text };
}

const get = (id: number, key = 'a') => `GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nX-Request-Id: r${id}\r\n\r\n`;
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`still not there after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('requests read in the same turn', () => {
  it('run together after the reads: the first at once, the others once the turn has read them all', async () => {
    // How many requests the server had read when each one ran. This listener is the
    // server's second: it counts a request after the fair share's listener has run it or
    // put it by.
    let read = 0;
    const readWhenRun: number[] = [];
    const app: RequestListener = (req, res) => {
      readWhenRun.push(read);
      burning(0.05)(req, res);
    };
    // A slice long enough that none of the ten waits for want of it, on however slow a machine.
    const { http, port } = await serve(app, { FAIR_SHARE_SLICE_MS: '100' });
    http.server.on('request', () => read++);
    try {
      let accepted = 0;
      http.server.on('connection', () => accepted++);
      const connections = Array.from({ length: 10 }, () => rawConnection(port));
      await until(() => accepted === connections.length);
      // Past the short turns that follow accepts (server/http/admission.ts).
      await new Promise((r) => setTimeout(r, 50));
      for (const [n, { socket }] of connections.entries()) socket.write(get(n));
      // The loop held while the kernel takes all ten: the next turn reads them together.
      const heldUntil = performance.now() + 50;
      while (performance.now() < heldUntil);
      await until(() => connections.every(({ read }) => statuses(read()).length === 1));
      expect(connections.map(({ read }) => statuses(read())[0])).toEqual(Array.from({ length: 10 }, () => 200));
      // Run as read, they would have seen 0, 1, 2 ... 9.
      expect(readWhenRun).toEqual([0, ...Array.from({ length: 9 }, () => 10)]);
      expect(http.connections.fairShare.deferred).toBe(0);
      for (const { socket } of connections) socket.destroy();
    } finally {
      await stop(http);
    }
  }, 30_000);
});

describe('a client alone', () => {
  it('keeps the whole service once its connections are in: none of its requests waits, however long the turn', async () => {
    // 320 requests in flight of 0.2 ms each: turns of some 60 ms, far past any slice.
    const { http, port } = await serve(burning(0.2));
    const flood = greedy(port, 40, 4_000);
    try {
      await flood.started;
      // Past the short turns that follow its connections' accepts, and a first whole window
      // of its requests, by which its addresses are seen to take equal shares.
      await new Promise((r) => setTimeout(r, 1_500));
      const deferred = http.connections.fairShare.deferred;
      let answered = 0;
      const counting = () => answered++;
      http.server.on('request', counting);
      await new Promise((r) => setTimeout(r, 1_500));
      http.server.off('request', counting);
      expect(answered).toBeGreaterThan(1_000);
      expect(http.connections.fairShare.deferred - deferred).toBe(0);
    } finally {
      flood.child.kill();
      await stop(http);
    }
  }, 30_000);
});

describe('a client whose requests wait', () => {
  it('is not read meanwhile: a second batch sent while the first waits is read only once the first ran', async () => {
    const { http, port } = await serve(burning(1));
    try {
      const client = rawConnection(port);
      const batch = (from: number) => Array.from({ length: 100 }, (_, i) => get(from + i)).join('');
      client.socket.write(batch(0));
      // The first answers are out: the rest of the batch waits in the client's queue.
      await until(() => statuses(client.read()).length > 0);
      client.socket.write(batch(100));
      await until(() => statuses(client.read()).length === 200 || client.socket.destroyed);
      // Read while 29 or more of the first batch waited, the second would have taken the
      // connection past the 128 requests it may leave unanswered (server/http/pipelining.ts).
      expect(statuses(client.read())).toEqual(Array.from({ length: 200 }, () => 200));
      expect(http.connections.fairShare.deferred).toBeGreaterThan(150);
      client.socket.destroy();
    } finally {
      await stop(http);
    }
  }, 30_000);

  it("has its other connections' reads put off while its requests wait past the turn's slice, and all answered", async () => {
    // The first request takes 20 ms, well past the turn's slice; the others next to nothing, so
    // that a play is short.
    const slow = burning(20);
    const quick = burning(0);
    const { http, port } = await serve((req, res) => (req.headers['x-request-id'] === 'r0' ? slow : quick)(req, res));
    try {
      // A read is put off once the turn's slice has passed since the client's requests began
      // to wait, so after the reads parsed before it in the same turn: each connection
      // sends a large batch, whose parsing takes longer than the slice. Which turn each
      // batch is read in is up to the kernel and a loaded machine, so the scenario is played
      // until a read came while the client's requests waited (at most 20 times); with the
      // put-off disabled, none ever does.
      const perConnection = 100;
      for (let attempt = 0; attempt < 20 && http.connections.fairShare.read_deferred === 0; attempt++) {
        // Every connection accepted before any writes: Node accepts one a turn, and a connection
        // accepted after the writes has its batch read in a turn of its own.
        await until(() => http.connections.open === 0);
        const connections = Array.from({ length: 10 }, () => rawConnection(port));
        await Promise.all(connections.map(({ socket }) => new Promise((resolve) => socket.once('connect', resolve))));
        await until(() => http.connections.open === connections.length);
        const [first, ...others] = connections as [ReturnType<typeof rawConnection>, ...ReturnType<typeof rawConnection>[]];
        first.socket.write(get(0));
        for (const [n, { socket }] of others.entries())
          socket.write(Array.from({ length: perConnection }, (_, i) => get(1 + perConnection * n + i)).join(''));
        await until(() => statuses(first.read()).length === 1);
        await until(() => others.every(({ read }) => statuses(read()).length === perConnection));
        // Put off or not, every request is answered, in order.
        expect(others.flatMap(({ read }) => statuses(read()))).toEqual(Array.from({ length: others.length * perConnection }, () => 200));
        for (const { socket } of connections) socket.destroy();
      }
      // Read while the client's requests waited and the slice was spent: put off, not parsed.
      expect(http.connections.fairShare.read_deferred).toBeGreaterThan(0);
    } finally {
      await stop(http);
    }
  }, 30_000);

  it("takes turns with the client's other credentials, but buys no share of its own", async () => {
    // 40 ms a request: should the second key's read come once the turn's slice is spent (a
    // busy machine), it is put off for up to 100 ms, a few of the first key's turns.
    const { http, port } = await serve(burning(40));
    try {
      const busy = rawConnection(port);
      busy.socket.write(Array.from({ length: 40 }, (_, i) => get(i, 'first')).join(''));
      await until(() => statuses(busy.read()).length > 0);
      // The same address with another key: its request waits for one turn of the first key's, not for all 39.
      const other = rawConnection(port);
      other.socket.write(get(0, 'second'));
      await until(() => statuses(other.read()).length === 1);
      expect(statuses(busy.read()).length).toBeLessThan(10);
      busy.socket.destroy();
      other.socket.destroy();
    } finally {
      await stop(http);
    }
  }, 30_000);

  it('runs few of them a turn while connections arrive, so that each new one is accepted soon', async () => {
    // libuv accepts one connection a turn: 50 arriving at once take 50 turns, during which
    // the waiting requests (50 µs each) get a short slice a turn rather than 1 ms.
    let ran = 0;
    const app = burning(0.05);
    const { http, port } = await serve((req, res) => {
      ran++;
      app(req, res);
    });
    try {
      let accepted = 0;
      http.server.on('connection', () => accepted++);
      const busy = Array.from({ length: 7 }, () => rawConnection(port));
      for (const [n, { socket }] of busy.entries()) socket.write(Array.from({ length: 120 }, (_, i) => get(1000 * n + i)).join(''));
      // The busy client's own connections all accepted first (a turn each, as these are),
      // and the others sent within the second their accepts keep the slices short: later,
      // with nobody else asking, a turn would have no slice and run all that waits.
      await until(() => accepted === busy.length);
      const atAccept: number[] = [];
      http.server.on('connection', () => atAccept.push(ran));
      // The 50 connect() calls run on the next tick, then the loop is held while the kernel
      // completes them all into the accept queue.
      const arriving = Array.from({ length: 50 }, () => connect({ port, host: '127.0.0.1' }).on('error', () => {}));
      process.nextTick(() => {
        const heldUntil = performance.now() + 50;
        while (performance.now() < heldUntil);
      });
      await until(() => atAccept.length === 50);
      // With 1 ms slices some 11 ran between one accept and the next.
      expect((atAccept[49] as number) - (atAccept[0] as number)).toBeLessThan(49 * 6);
      // Requests still waited when the last connection came: the slices were theirs to take.
      expect(atAccept[49]).toBeLessThan(7 * 120);
      for (const socket of arriving) socket.destroy();
      for (const { socket } of busy) socket.destroy();
    } finally {
      await stop(http);
    }
  }, 30_000);

  it('is answered 429 rate_limited with Retry-After in the Error shape past FAIR_SHARE_QUEUE', async () => {
    const { http, port } = await serve(burning(10), { FAIR_SHARE_QUEUE: '4' });
    try {
      const client = rawConnection(port);
      client.socket.write(Array.from({ length: 20 }, (_, i) => get(i)).join(''));
      await until(() => statuses(client.read()).length === 20);
      const text = client.read();
      // The first runs at once and spends the turn's slice; four wait; the rest are refused, answered in order.
      expect(statuses(text)).toEqual([...Array.from({ length: 5 }, () => 200), ...Array.from({ length: 15 }, () => 429)]);
      const refusal = text.slice(text.indexOf('HTTP/1.1 429'));
      expect(refusal).toMatch(/\r\nRetry-After: 1\r\n/);
      expect(refusal).toMatch(/\r\nContent-Type: application\/json\r\n/);
      const body = JSON.parse(refusal.slice(refusal.indexOf('\r\n\r\n') + 4, refusal.indexOf('}') + 1)) as Record<string, unknown>;
      expect(body).toEqual({ code: 'rate_limited', message: expect.stringContaining('4 requests waiting') as unknown, status: 429 });
      expect(http.connections.fairShare.queue_full).toBe(15);
      // The connection stays open for its next requests.
      client.socket.write(get(99));
      await until(() => statuses(client.read()).length === 21);
      expect(statuses(client.read())[20]).toBe(200);
      client.socket.destroy();
    } finally {
      await stop(http);
    }
  }, 30_000);
});
