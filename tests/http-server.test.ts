// The real server process: what Node's HTTP parser refuses is answered in the Error
// shape, slow and idle clients are bounded, and the connection count is capped.
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { InFlight } from '../server/http-server';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';

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

/** Opens a socket, writes `text` (if any), and resolves with everything read until the server closes it. */
function exchange(url: string, text?: string): { socket: Socket; closed: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  if (text !== undefined) socket.write(text);
  const closed = new Promise<string>((resolve) => {
    let out = '';
    socket.on('data', (chunk) => (out += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve(out));
  });
  return { socket, closed };
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
    ['headers over the limit', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
  ])('answers %s with its status in the Error shape', async (_what, text, status, code) => {
    const res = parse(await exchange(server.url, text).closed);
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(JSON.parse(res.body)).toEqual({ code, message: expect.any(String), status });
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

describe('MAX_CONNECTIONS', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    // Long timeouts, so that nothing but the test closes the held sockets.
    server = await startServer({ DATABASE_PATH: join(dir, 'connections.db'), SEED_DEMO_DATA: 'false', MAX_CONNECTIONS: '4' });
  }, 60_000);
  afterAll(() => server.stop());

  it('refuses connections past the cap at once, and serves again when they go', async () => {
    const held = Array.from({ length: 4 }, () => exchange(server.url));
    await Promise.all(held.map(({ socket }) => new Promise((r) => socket.once('connect', r))));
    // The fifth is closed by the server without an answer while the four are open.
    expect(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n').closed).toBe('');
    for (const { socket } of held) socket.destroy();
    await Promise.all(held.map(({ closed }) => closed));
    const status = await eventually(async () => {
      const res = parse(await exchange(server.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').closed);
      return res.status === 200 ? res.status : undefined;
    });
    expect(status).toBe(200);
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
