// HTTP/1.1 pipelining on the real server process (server/http/pipelining.ts): a client
// that reads its answers gets them all, in order; one that sends more than the service
// keeps unanswered is answered 429 after what it is owed; one that does not read is not
// read either, and is closed after SEND_TIMEOUT_MS.
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { maxPipelined, requestHeads } from '../server/http/pipelining';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';
import { freePort, parseExposition, value } from './exposition';

const dir = mkdtempSync(join(tmpdir(), 'petstore-pipelining-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const get = (path: string, id: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\n\r\n`;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The whole responses in `raw`, in order (each with a Content-Length, as this service sends them). */
function answersIn(raw: Buffer): Answer[] {
  const answers: Answer[] = [];
  let at = 0;
  for (;;) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end < 0) return answers;
    const [statusLine = '', ...lines] = raw.toString('latin1', at, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (raw.length < end + 4 + length) return answers;
    answers.push({ status: Number(statusLine.split(' ')[1]), headers, body: raw.toString('utf8', end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
}

/** A connection to `url` that keeps all it reads, and says when it has closed. */
function open(url: string): { socket: Socket; read: () => Buffer; closed: Promise<void> } {
  const { hostname, port } = new URL(url);
  const socket = connect({ port: Number(port), host: hostname });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, read: () => Buffer.concat(chunks), closed };
}

describe('requestHeads', () => {
  it('counts the request heads a read holds, up to one past its bound', () => {
    expect(requestHeads(Buffer.from(get('/healthz', 'a').repeat(3)))).toBe(3);
    expect(requestHeads(Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\n'))).toBe(0);
    expect(requestHeads(Buffer.from(get('/healthz', 'a').repeat(500)), 10)).toBe(11);
  });
});

describe('pipelining', () => {
  let server: ServerProcess;
  let metricsPort: number;
  const metric = async (name: string, labels: Record<string, string> = {}) =>
    value(parseExposition(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()), name, labels);

  beforeAll(async () => {
    metricsPort = await freePort();
    server = await startServer({
      DATABASE_PATH: join(dir, 'pipelining.db'),
      SEED_DEMO_DATA: 'false',
      METRICS_PORT: String(metricsPort),
      SEND_TIMEOUT_MS: '1000',
    });
  }, 60_000);
  afterAll(() => server.stop());

  it('answers 50 requests sent at once on one connection, all of them, in order', async () => {
    const paths = ['/healthz', '/readyz', '/openapi.json'];
    const text = Array.from({ length: 50 }, (_, i) => get(paths[i % paths.length] as string, `pipelined-${i}`)).join('');
    const { socket, read } = open(server.url);
    socket.write(text);
    await eventually(() => (answersIn(read()).length >= 50 ? true : undefined), 10_000);
    const answers = answersIn(read());
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect(answers.map((a) => a.headers['x-request-id'])).toEqual(Array.from({ length: 50 }, (_, i) => `pipelined-${i}`));
    // Still open for more, as keep-alive.
    socket.write(get('/healthz', 'after'));
    await eventually(() => (answersIn(read()).length >= 51 ? true : undefined), 5_000);
    socket.destroy();
  });

  it(`answers more than ${maxPipelined} requests sent ahead of their answers with 429, after the answers owed, and closes`, async () => {
    const before = await metric('petstore_closed_connections_total', { reason: 'pipelining' });
    const { socket, read, closed } = open(server.url);
    socket.write(Array.from({ length: 100 }, (_, i) => get('/healthz', `first-${i}`)).join(''));
    socket.write(Array.from({ length: maxPipelined + 1 }, (_, i) => get('/healthz', `second-${i}`)).join(''));
    await closed;
    const answers = answersIn(read());
    // Those of the first write that were parsed (TCP may deliver the two writes as one read).
    const served = answers.slice(0, -1);
    expect(served.map((a) => a.headers['x-request-id'])).toEqual(served.map((_, i) => `first-${i}`));
    expect(served.every((a) => a.status === 200)).toBe(true);
    const last = answers.at(-1);
    expect(last?.status).toBe(429);
    expect(last?.headers['retry-after']).toBe('1');
    expect(last?.headers['connection']).toBe('close');
    expect(JSON.parse(last?.body ?? '')).toEqual({
      code: 'rate_limited',
      message: expect.stringContaining(String(maxPipelined)),
      status: 429,
    });
    expect(await metric('petstore_closed_connections_total', { reason: 'pipelining' })).toBe(before + 1);
  });

  it('stops reading a connection whose answers are not read, and closes it after SEND_TIMEOUT_MS', async () => {
    const served = () => metric('http_server_request_duration_seconds_count', { route: '/openapi.yaml' });
    const before = { served: await served(), closed: await metric('petstore_closed_connections_total', { reason: 'not_reading' }) };
    const { hostname, port } = new URL(server.url);
    // 100 answers of some 100 KB each, more than the kernel's buffers on loopback hold.
    const socket = connect({ port: Number(port), host: hostname });
    socket.pause();
    socket.on('error', () => {});
    const startedAt = Date.now();
    socket.write(Array.from({ length: 100 }, (_, i) => get('/openapi.yaml', `unread-${i}`)).join(''));
    await new Promise((r) => setTimeout(r, 300));
    // Sent while the answers wait: not read by the service, so never run.
    socket.write(Array.from({ length: 100 }, (_, i) => get('/openapi.yaml', `unread-more-${i}`)).join(''));
    // A paused socket does not see its close: the service's count does.
    await eventually(async () =>
      (await metric('petstore_closed_connections_total', { reason: 'not_reading' })) > before.closed ? true : undefined,
    );
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_000);
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(await metric('petstore_closed_connections_total', { reason: 'not_reading' })).toBe(before.closed + 1);
    expect(await metric('petstore_open_connections')).toBe(0);
    socket.destroy();
    expect((await served()) - before.served).toBeLessThanOrEqual(100);
  });
});
