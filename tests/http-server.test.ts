// The real server process (in process where turns of the event loop are counted): what
// Node's HTTP parser refuses is answered in the Error shape, slow and idle clients are
// bounded, and the connection count is capped, a connection past a cap answered in the
// Error shape too.
import { connect, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import pino from 'pino';
import { loadConfig } from '../server/config';
import { createHttpServer, createLifecycle, InFlight, timeoutAnswersPerTurn } from '../server/http/server';
import {
  answeringAtMost,
  fileDescriptorLimit,
  globalCap,
  limitReaders,
  refusalLingerMs,
  reservedDescriptors,
} from '../server/http/connections';
import { describeOnLinux, itOnLinux } from './platform';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';
import { freePort, parseExposition, value } from './exposition';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parse(raw: string): RawResponse {
  const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

/**
 * Opens a socket (from `from`, a loopback address), writes `text` (if any), and resolves with
 * everything read until the server closes it; `allowHalfOpen`: it does not end its side when the server does.
 */
function exchange(url: string, text?: string, from?: string, allowHalfOpen = false): { socket: Socket; closed: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = connect({ port: Number(port), host: hostname, allowHalfOpen, ...(from && { localAddress: from }) });
  if (text !== undefined) socket.write(text);
  const closed = new Promise<string>((resolve) => {
    let out = '';
    socket.on('data', (chunk) => (out += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve(out));
  });
  return { socket, closed };
}

/**
 * Opens a socket (from `from`), writes `text` (if any), and resolves `answer` with the first
 * whole response read on it (undefined if it closed first), and `closed` with how it ended.
 */
function firstAnswer(url: string, text?: string, from?: string, allowHalfOpen = false) {
  const { socket, closed: rawClosed } = exchange(url, text, from, allowHalfOpen);
  let error: string | undefined;
  socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
  const answer = new Promise<RawResponse | undefined>((resolve) => {
    let out = '';
    socket.on('data', (chunk) => {
      out += chunk.toString('latin1');
      const end = out.indexOf('\r\n\r\n');
      if (end < 0) return;
      const res = parse(out);
      if (Buffer.byteLength(res.body, 'latin1') >= Number(res.headers['content-length'] ?? 0)) resolve(res);
    });
    socket.on('close', () => resolve(undefined));
  });
  const closed = rawClosed.then(() => ({ error, at: Date.now() }));
  return { socket, answer, closed };
}

/** The answer a connection refused by a cap gets: the Error shape, Retry-After, and the connection closed. */
function expectRefusal(res: RawResponse | undefined, status: number, code: string) {
  expect(res?.status).toBe(status);
  expect(res?.headers['content-type']).toMatch(/^application\/json/);
  expect(res?.headers['retry-after']).toMatch(/^\d+$/);
  expect(res?.headers['connection']).toBe('close');
  expect(res?.headers['x-content-type-options']).toBe('nosniff');
  expect(res?.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(JSON.parse(res?.body ?? '')).toEqual({ code, message: expect.any(String), status });
}

const dir = mkdtempSync(join(tmpdir(), 'petstore-http-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("requests Node's parser refuses", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({ DATABASE_PATH: join(dir, 'parser.db'), SEED_DEMO_DATA: 'false' });
  }, 60_000);
  afterAll(() => server.stop());

  it.each([
    ['an unknown method', 'FOO /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
    ['a malformed request line', 'GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n', 400, 'bad_request'],
    ['bare LF line ends', 'GET /healthz HTTP/1.1\nHost: x\n\n', 400, 'bad_request'],
    ['a folded header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n', 400, 'bad_request'],
    [
      'a duplicate Content-Length',
      'POST /accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      400,
      'bad_request',
    ],
    ['a DEL (0x7f) in a header value', 'GET /healthz HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \x7f\r\n\r\n', 400, 'bad_request'],
    ['headers over the limit', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
    ['a 17 KB request line', `GET /pets?x=${'a'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'headers_too_large'],
  ])('answers %s with its status in the Error shape, traceable and nosniff', async (_what, text, status, code) => {
    const res = parse(await exchange(server.url, text).closed);
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(res.body)).toEqual({ code, message: expect.any(String), status });
  });

  it('gives each refused request an id of its own, even when it sent one', async () => {
    const text = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`;
    const ids = await Promise.all([1, 2].map(async () => parse(await exchange(server.url, text).closed).headers['x-request-id']));
    expect(new Set(ids).size).toBe(2);
    expect(ids).not.toContain('mine');
  });
});

describe('request bodies', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({ DATABASE_PATH: join(dir, 'bodies.db'), SEED_DEMO_DATA: 'false' });
  }, 60_000);
  afterAll(() => server.stop());

  const head = (framing: string) => `POST /accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${framing}\r\n`;
  const pause = () => new Promise((r) => setTimeout(r, 30));
  // A whole body without its password: read and parsed whole, it is refused by the schema, naming what is missing.
  const body = '{"email":"pieces@example.com"}';
  const expectReadWhole = (res: RawResponse | undefined) => {
    expect(res?.status).toBe(400);
    const error = JSON.parse(res?.body ?? '') as { code: string; message: string };
    expect(error.code).toBe('validation_failed');
    expect(error.message).toContain('password');
  };

  it('reads a body of a declared length that arrives in pieces, whole', async () => {
    const { socket, answer } = firstAnswer(server.url, head(`Content-Length: ${body.length}\r\n`) + body.slice(0, 5));
    for (const piece of [body.slice(5, 15), body.slice(15)]) {
      await pause();
      socket.write(piece);
    }
    expectReadWhole(await answer);
    socket.destroy();
  });

  it('reads a chunked body, in pieces, whole', async () => {
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const { socket, answer } = firstAnswer(server.url, head('Transfer-Encoding: chunked\r\n') + chunk(body.slice(0, 9)));
    await pause();
    socket.write(chunk(body.slice(9)) + '0\r\n\r\n');
    expectReadWhole(await answer);
    socket.destroy();
  });

  it('answers a chunked body that grows past the limit with 413 in the Error shape', async () => {
    const piece = 'a'.repeat(8 * 1024);
    const chunks = Array.from({ length: 10 }, () => `${piece.length.toString(16)}\r\n${piece}\r\n`).join('');
    const { socket, answer } = firstAnswer(server.url, head('Transfer-Encoding: chunked\r\n') + chunks + '0\r\n\r\n');
    const res = await answer;
    expect(res?.status).toBe(413);
    expect(JSON.parse(res?.body ?? '')).toEqual({ code: 'payload_too_large', message: expect.any(String), status: 413 });
    socket.destroy();
  });

  it('goes on serving when a client leaves in the middle of a declared body', async () => {
    const { socket } = firstAnswer(server.url, head('Content-Length: 100\r\n') + '{"email":');
    await pause();
    socket.destroy();
    await pause();
    const res = parse(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').closed);
    expect(res.status).toBe(200);
    const again = await firstAnswer(server.url, head(`Content-Length: ${body.length}\r\n`) + body).answer;
    expectReadWhole(again);
  });
});

describe('slow clients and many connections', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({
      DATABASE_PATH: join(dir, 'limits.db'),
      SEED_DEMO_DATA: 'false',
      MAX_CONNECTIONS: '4',
      HEADERS_TIMEOUT_MS: '300',
      REQUEST_TIMEOUT_MS: '600',
      KEEP_ALIVE_TIMEOUT_MS: '300',
    });
  }, 60_000);
  afterAll(() => server.stop());

  it('answers headers that never finish with 408 in the Error shape and closes the socket', async () => {
    const res = parse(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n').closed);
    expect(res.status).toBe(408);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(res.body)).toEqual({ code: 'request_timeout', message: expect.any(String), status: 408 });
  });

  it('answers a body that never finishes with 408 and closes the socket', async () => {
    const text = 'POST /accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":';
    const res = parse(await exchange(server.url, text).closed);
    expect(res.status).toBe(408);
  });

  it('closes an idle keep-alive connection after KEEP_ALIVE_TIMEOUT_MS', async () => {
    const res = parse(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n').closed);
    expect(res.status).toBe(200);
  });
});

describe('connections that time out together', () => {
  it(`are answered 408 at most ${timeoutAnswersPerTurn} a turn of the event loop, one while connections arrive, so that the turns between serve everyone else`, async () => {
    // In process, so that the turns can be counted: the server and its clients share one event loop.
    const config = loadConfig({ SHUTDOWN_DELAY_MS: '0', HEADERS_TIMEOUT_MS: '500', MAX_CONNECTIONS_PER_ADDRESS: '0' });
    const http = createHttpServer((_req, res) => res.end(), config, createLifecycle(), pino({ level: 'silent' }));
    await new Promise<void>((resolve) => http.server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.server.address() as AddressInfo).port}`;
    let turn = 0;
    let counting = true;
    const tick = () => {
      turn++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      const count = 10 * timeoutAnswersPerTurn;
      // Opened at once, so that one or two of Node's sweeps find them all past the timeout.
      const slow = Array.from({ length: count }, () => exchange(url, 'GET / HTTP/1.1\r\nHost: x\r\n'));
      const answeredIn = slow.map(({ socket }) => new Promise<number>((resolve) => socket.once('data', () => resolve(turn))));
      const answers = await Promise.all(slow.map(({ closed }) => closed));
      expect(answers.map((raw) => parse(raw).status)).toEqual(Array(count).fill(408));
      // Written all in the sweep's turn, they were read here in one or two turns.
      const turns = new Set(await Promise.all(answeredIn));
      expect(turns.size).toBeGreaterThanOrEqual(count / timeoutAnswersPerTurn - 2);

      // While connections arrive (here one client reconnecting as soon as it is accepted),
      // one 408 a turn: Node accepts one connection a turn.
      let churning = true;
      const churn = () => {
        const socket = connect({ port: Number(new URL(url).port), host: '127.0.0.1' });
        socket.on('error', () => {});
        socket.once('connect', () => {
          socket.destroy();
          if (churning) churn();
        });
      };
      churn();
      const few = timeoutAnswersPerTurn;
      const slower = Array.from({ length: few }, () => exchange(url, 'GET / HTTP/1.1\r\nHost: x\r\n'));
      const slowerIn = slower.map(({ socket }) => new Promise<number>((resolve) => socket.once('data', () => resolve(turn))));
      const slowerAnswers = await Promise.all(slower.map(({ closed }) => closed));
      churning = false;
      expect(slowerAnswers.map((raw) => parse(raw).status)).toEqual(Array(few).fill(408));
      expect(new Set(await Promise.all(slowerIn)).size).toBeGreaterThanOrEqual(few / 2);
    } finally {
      counting = false;
      http.server.closeAllConnections();
      await new Promise((resolve) => http.server.close(resolve));
    }
  }, 30_000);
});

describe('thousands of slow and idle connections at once', () => {
  let server: ServerProcess;
  const timeouts = { headers: 1_000, request: 2_000, keepAlive: 1_000 };
  beforeAll(async () => {
    server = await startServer({
      DATABASE_PATH: join(dir, 'many.db'),
      SEED_DEMO_DATA: 'false',
      HEADERS_TIMEOUT_MS: String(timeouts.headers),
      REQUEST_TIMEOUT_MS: String(timeouts.request),
      KEEP_ALIVE_TIMEOUT_MS: String(timeouts.keepAlive),
    });
  }, 60_000);
  afterAll(() => server.stop());

  it('ends each one on time: 408 for unfinished headers and bodies, a close for idle keep-alive', async () => {
    // Under the default per-address cap, and unfinished sign-ups under their per-address limit.
    const kinds = [
      { text: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n', status: 408, after: timeouts.headers, count: 1_000 },
      {
        text: 'POST /accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":',
        status: 408,
        after: timeouts.request,
        count: 500,
      },
      { text: 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', status: 200, after: timeouts.keepAlive, count: 500 },
    ];
    // Opened in batches, as fast as the server accepts them (libuv accepts one connection
    // per turn of the event loop), each timed from its connect.
    const plan = kinds.flatMap((kind) => Array.from({ length: kind.count }, () => kind));
    const ends: Promise<{ kind: (typeof kinds)[number]; status: number; ms: number }>[] = [];
    for (let i = 0; i < plan.length; i += 100) {
      const batch = plan.slice(i, i + 100).map((kind, j) => {
        const { socket, closed } = exchange(server.url, kind.text, `127.34.${10 + ((i + j) % 2)}.${((i + j) % 200) + 1}`);
        const at = new Promise<number>((r) => socket.once('connect', () => r(Date.now())));
        // An idle keep-alive connection's time starts with its answer.
        const from = kind.status === 200 ? new Promise<number>((r) => socket.once('data', () => r(Date.now()))) : at;
        ends.push(Promise.all([from, closed]).then(([start, raw]) => ({ kind, status: parse(raw).status, ms: Date.now() - start })));
        return at;
      });
      await Promise.all(batch);
    }
    const results = await Promise.all(ends);
    for (const kind of kinds) {
      const mine = results.filter((r) => r.kind === kind);
      expect(mine.filter((r) => r.status !== kind.status)).toEqual([]);
      const ms = mine.map((r) => r.ms).sort((a, b) => a - b);
      // Node checks the timeouts every 100 ms; the rest is how far the event loops of a
      // loaded machine fall behind with 2,000 sockets to serve.
      expect(ms[0]).toBeGreaterThanOrEqual(kind.after - 50);
      expect(ms[ms.length - 1]).toBeLessThan(kind.after + 3_000);
    }
  }, 30_000);
});

describe('the default caps', () => {
  let server: ServerProcess;
  let metricsPort: number;
  beforeAll(async () => {
    metricsPort = await freePort();
    server = await startServer({ DATABASE_PATH: join(dir, 'defaults.db'), SEED_DEMO_DATA: 'false', METRICS_PORT: String(metricsPort) });
  }, 60_000);
  afterAll(() => server.stop());

  it('answer 200 concurrent fetch calls from one host, a connection each, all 200', async () => {
    const statuses = await Promise.all(
      Array.from({ length: 200 }, () =>
        fetch(`${server.url}/healthz`).then(
          (res) => res.status,
          (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
        ),
      ),
    );
    expect(statuses).toEqual(Array(200).fill(200));
    // On connections of their own, still open (keep-alive).
    const samples = parseExposition(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
    expect(value(samples, 'petstore_open_connections')).toBeGreaterThan(150);
    expect(value(samples, 'petstore_refused_connections_total')).toBe(0);
  });
});

describe('MAX_CONNECTIONS', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    // Long timeouts, so that nothing but the test closes the held sockets.
    server = await startServer({ DATABASE_PATH: join(dir, 'connections.db'), SEED_DEMO_DATA: 'false', MAX_CONNECTIONS: '8' });
  }, 60_000);
  afterAll(() => server.stop());

  it('serves up to the cap and answers each connection past it 503 overloaded, and serves again when they go', async () => {
    const all = Array.from({ length: 20 }, () => firstAnswer(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    const answers = await Promise.all(all.map(({ answer }) => answer));
    // The served ones stay open (keep-alive), holding their places.
    expect(answers.filter((res) => res?.status === 200)).toHaveLength(8);
    const refused = answers.filter((res) => res?.status !== 200);
    expect(refused).toHaveLength(12);
    for (const res of refused) expectRefusal(res, 503, 'overloaded');
    const refusedEnds = await Promise.all(all.filter((_, i) => answers[i]?.status !== 200).map(({ closed }) => closed));
    expect(refusedEnds.map((end) => end.error)).toEqual(Array(12).fill(undefined));

    for (const { socket } of all) socket.destroy();
    const status = await eventually(async () => {
      const res = parse(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').closed);
      return res.status === 200 ? res.status : undefined;
    });
    expect(status).toBe(200);
  });
});

describe('MAX_CONNECTIONS_PER_ADDRESS for one client', () => {
  it('answers an ordinary client over its cap with a 429 it reads, never a reset', async () => {
    const capped = await startServer({
      DATABASE_PATH: join(dir, 'per-address-8.db'),
      SEED_DEMO_DATA: 'false',
      MAX_CONNECTIONS_PER_ADDRESS: '8',
    });
    try {
      // Node's fetch opens a connection per request in flight.
      const statuses = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${capped.url}/healthz`).then(
            async (res) => `${res.status} ${res.headers.get('retry-after')} ${((await res.json()) as { code?: string }).code ?? 'ok'}`,
            (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
          ),
        ),
      );
      expect(statuses.filter((s) => s === '200 null ok')).toHaveLength(8);
      expect(statuses.filter((s) => s === '429 1 rate_limited')).toHaveLength(12);
    } finally {
      await capped.stop();
    }
  });
});

// Clients at several addresses: Linux answers on all of 127.0.0.0/8, macOS on 127.0.0.1 alone.
const otherLoopbackAddresses = 'client addresses across 127.0.0.0/8';
const connected = (socket: Socket) => new Promise((r) => socket.once('connect', r));
const healthz = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';

describeOnLinux(otherLoopbackAddresses, 'MAX_CONNECTIONS_PER_ADDRESS', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({ DATABASE_PATH: join(dir, 'per-address.db'), SEED_DEMO_DATA: 'false', MAX_CONNECTIONS_PER_ADDRESS: '3' });
  }, 60_000);
  afterAll(() => server.stop());

  it("answers an address's connections past its cap 429 whatever they send, serves other addresses, and names the address in one log line", async () => {
    const held = Array.from({ length: 3 }, () => exchange(server.url, undefined, '127.34.9.1'));
    await Promise.all(held.map(({ socket }) => connected(socket)));
    // A malformed request too: nothing of it is parsed.
    for (const text of [healthz, 'NOT HTTP\r\n\r\n', healthz]) {
      const { answer, closed } = firstAnswer(server.url, text, '127.34.9.1');
      expectRefusal(await answer, 429, 'rate_limited');
      expect((await closed).error).toBeUndefined();
    }
    expect(parse(await exchange(server.url, healthz, '127.34.9.2').closed).status).toBe(200);
    const lines = await eventually(() => {
      const named = server
        .log()
        .split('\n')
        .filter((l) => l.includes('MAX_CONNECTIONS_PER_ADDRESS'));
      return named.length > 0 ? named : undefined;
    });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, address: '127.34.9.1', open: 3, cap: 3 });

    // Its places come back as its connections go.
    for (const { socket } of held) socket.destroy();
    await Promise.all(held.map(({ closed }) => closed));
    const status = await eventually(async () => {
      const res = parse(await exchange(server.url, healthz, '127.34.9.1').closed);
      return res.status === 200 ? res.status : undefined;
    });
    expect(status).toBe(200);
  });

  it('closes a refused connection that sends nothing, or its request in pieces, within the linger bound, answered', async () => {
    const held = exchange(server.url, undefined, '127.34.9.4');
    const others = Array.from({ length: 2 }, () => exchange(server.url, undefined, '127.34.9.4'));
    await Promise.all([held, ...others].map(({ socket }) => connected(socket)));
    const started = Date.now();
    const silent = firstAnswer(server.url, undefined, '127.34.9.4');
    // Goes on sending after the answer, and never ends its side.
    const trickling = firstAnswer(server.url, 'GET /hea', '127.34.9.4', true);
    const rest = 'lthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n';
    let sent = 0;
    const trickle = setInterval(() => {
      if (!trickling.socket.writable || sent >= rest.length) return;
      trickling.socket.write(rest[sent++]!);
    }, 50);
    try {
      // The piece sent is enough for an answer; what follows is read and dropped.
      expectRefusal(await trickling.answer, 429, 'rate_limited');
      expect(Date.now() - started).toBeLessThan(refusalLingerMs / 2);
      // One that sends nothing is answered at the bound; both are closed by then.
      expectRefusal(await silent.answer, 429, 'rate_limited');
      const ends = await Promise.all([silent.closed, trickling.closed]);
      for (const end of ends) {
        expect(end.at - started).toBeGreaterThanOrEqual(refusalLingerMs - 50);
        expect(end.at - started).toBeLessThan(refusalLingerMs + 1_000);
      }
    } finally {
      clearInterval(trickle);
      for (const { socket } of [held, ...others]) socket.destroy();
    }
  });

  it(`answers ${answeringAtMost} refused connections at once at most, closing the next ones at accept`, async () => {
    const held = Array.from({ length: 3 }, () => exchange(server.url, undefined, '127.34.9.7'));
    await Promise.all(held.map(({ socket }) => connected(socket)));
    // Refused connections that send nothing each linger up to the bound, answering held.
    const lingering = Array.from({ length: answeringAtMost }, () => firstAnswer(server.url, undefined, '127.34.9.7'));
    await Promise.all(lingering.map(({ socket }) => connected(socket)));
    try {
      // The server may still be accepting the last of them: until then, the next is answered.
      const next = await eventually(
        async () => ((await firstAnswer(server.url, healthz, '127.34.9.7').answer) ? undefined : 'unanswered'),
        refusalLingerMs / 2,
      );
      expect(next).toBe('unanswered');
      // Once they are cut, refusals are answered again.
      const answers = await Promise.all(lingering.map(({ answer }) => answer));
      expect(answers.filter((res) => res?.status === 429)).toHaveLength(answeringAtMost);
      expectRefusal(await firstAnswer(server.url, healthz, '127.34.9.7').answer, 429, 'rate_limited');
    } finally {
      for (const { socket } of held) socket.destroy();
    }
  });

  it('keeps the place of a connection that timed out for a while, so a slow client cannot come back in step', async () => {
    const slow = await startServer({
      DATABASE_PATH: join(dir, 'per-address-slow.db'),
      SEED_DEMO_DATA: 'false',
      MAX_CONNECTIONS_PER_ADDRESS: '20',
      HEADERS_TIMEOUT_MS: '2000',
    });
    try {
      const timedOut = Array.from({ length: 20 }, () => exchange(slow.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n', '127.34.9.3'));
      const answers = await Promise.all(timedOut.map(({ closed }) => closed));
      expect(answers.map((a) => parse(a).status)).toEqual(Array(20).fill(408));
      // Their places come back one by one over the next HEADERS_TIMEOUT_MS, not all at once:
      // each place taken again is held (a keep-alive connection after its answer).
      const start = Date.now();
      const admittedAt: number[] = [];
      const holding: Socket[] = [];
      while (admittedAt.length < 20 && Date.now() - start < 4_000) {
        // A refused connection is answered 429; an admitted one 200, and held.
        const { socket, answer } = firstAnswer(slow.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', '127.34.9.3');
        if ((await answer)?.status === 200) {
          admittedAt.push(Date.now() - start);
          holding.push(socket);
        }
      }
      for (const socket of holding) socket.destroy();
      expect(admittedAt.length).toBe(20);
      expect(admittedAt.filter((ms) => ms < 300).length).toBeLessThan(10);
      expect(Math.max(...admittedAt)).toBeGreaterThan(500);
    } finally {
      await slow.stop();
    }
  }, 30_000);
});

describeOnLinux(otherLoopbackAddresses, 'MAX_CONNECTIONS_PER_ADDRESS behind a trusted proxy', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({
      DATABASE_PATH: join(dir, 'proxy.db'),
      SEED_DEMO_DATA: 'false',
      MAX_CONNECTIONS_PER_ADDRESS: '2',
      TRUST_PROXY: '127.34.9.5',
    });
  }, 60_000);
  afterAll(() => server.stop());

  it("does not count the proxy's connections as one client's, and still caps other addresses", async () => {
    const viaProxy = Array.from({ length: 5 }, () => exchange(server.url, undefined, '127.34.9.5'));
    await Promise.all(viaProxy.map(({ socket }) => connected(socket)));
    expect(parse(await exchange(server.url, healthz, '127.34.9.5').closed).status).toBe(200);
    const direct = Array.from({ length: 2 }, () => exchange(server.url, undefined, '127.34.9.6'));
    await Promise.all(direct.map(({ socket }) => connected(socket)));
    expectRefusal(await firstAnswer(server.url, healthz, '127.34.9.6').answer, 429, 'rate_limited');
    for (const { socket } of [...viaProxy, ...direct]) socket.destroy();
  });
});

describe('the global cap (MAX_CONNECTIONS)', () => {
  const limits = (open: string) => () =>
    `Limit                     Soft Limit           Hard Limit           Units\nMax processes             95000                95000                processes\nMax open files            ${open}                20000                files\n`;

  it("is derived from the process's file-descriptor limit, with room kept for the database and files", () => {
    expect(fileDescriptorLimit(limits('20000'))).toBe(20_000);
    expect(fileDescriptorLimit(limits('unlimited'))).toBeUndefined();
    expect(
      fileDescriptorLimit(() => {
        throw new Error('no /proc');
      }),
    ).toBeUndefined();
    // A shell's `ulimit -n`, where there is no /proc.
    expect(fileDescriptorLimit(() => '10240\n')).toBe(10_240);
    expect(fileDescriptorLimit(() => 'unlimited\n')).toBeUndefined();
    // Room is kept for the refused connections being answered, too.
    expect(globalCap(undefined, 0, 20_000)).toBe(20_000 - reservedDescriptors - answeringAtMost);
    // Each PostgreSQL connection of the pool is a descriptor too.
    expect(globalCap(undefined, 10, 20_000)).toBe(20_000 - reservedDescriptors - answeringAtMost - 10);
    expect(globalCap(500, 10, 20_000)).toBe(500);
    expect(globalCap(undefined, 0, undefined)).toBe(1_000);
  });

  it("knows this process's limit, except on Windows, which has none", () => {
    if (process.platform === 'win32') expect(fileDescriptorLimit()).toBeUndefined();
    else expect(fileDescriptorLimit()).toBeGreaterThan(reservedDescriptors);
  });

  itOnLinux('/proc', "reads the same limit from /proc as from a shell's ulimit -n, which is how it asks on macOS", () => {
    expect(fileDescriptorLimit(limitReaders.shell)).toBe(fileDescriptorLimit(limitReaders.proc));
  });

  it('refuses at start-up a MAX_CONNECTIONS that the limit cannot hold, naming it', async () => {
    expect(() => globalCap(100_000, 0, 20_000)).toThrow(/MAX_CONNECTIONS=100000 is more than .*ulimit -n: 20000/);
    await expect(startServer({ DATABASE_PATH: join(dir, 'too-many.db'), MAX_CONNECTIONS: '10000000' })).rejects.toThrow(
      /exited with 1 before listening:[^]*\nMAX_CONNECTIONS=10000000 is more than the \d+ connections/,
    );
  });
});

describe('the responses in flight (kept for drain)', () => {
  it('reuse their slots: after many requests, as many slots as were ever in flight at once', () => {
    const inFlight = new InFlight();
    const res = {} as ServerResponse;
    for (let round = 0; round < 1_000; round++) {
      const a = inFlight.add(res);
      const b = inFlight.add(res);
      inFlight.delete(a);
      inFlight.delete(b);
    }
    expect(inFlight.size).toBe(0);
    const held = [inFlight.add(res), inFlight.add(res), inFlight.add(res)];
    expect(Math.max(...held)).toBe(2);
    expect([...inFlight]).toHaveLength(3);
  });
});
