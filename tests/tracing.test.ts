// docs/operations.md, Tracing. The built service (as `npm start` runs it) with the standard
// OTEL_* variables sends its spans over OTLP/HTTP to a receiver on loopback, in JSON and in
// protobuf: a server span per request named by its operationId, child of the caller's
// `traceparent`, storage spans under it, and the same ids in the request's access line.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startServer, type ServerProcess } from '../scripts/server-process';
import { createPgDatabase, testDatabaseUrl } from './helpers';

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  service: unknown;
  /** The process that exported it (the resource's `process.pid`). */
  pid: unknown;
}

/** An OTLP/HTTP trace receiver on 127.0.0.1: every span of every export, decoded. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; contentTypes: string[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      if (req.method !== 'POST' || req.url !== '/v1/traces') return res.writeHead(404).end();
      spans.push(...(type.startsWith('application/json') ? fromJson(body) : fromProtobuf(body)));
      // An empty ExportTraceServiceResponse, in the request's encoding.
      res.writeHead(200, { 'Content-Type': type }).end(type.startsWith('application/json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

type JsonValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type JsonKeyValue = { key: string; value: JsonValue };
const jsonAttributes = (list: JsonKeyValue[] = []) =>
  Object.fromEntries(
    list.map(({ key, value }) => [
      key,
      value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue)),
    ]),
  );

function fromJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as {
    resourceSpans: Array<{
      resource?: { attributes?: JsonKeyValue[] };
      scopeSpans: Array<{
        spans: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: JsonKeyValue[] }>;
      }>;
    }>;
  };
  return request.resourceSpans.flatMap((rs) => {
    const resource = jsonAttributes(rs.resource?.attributes);
    return rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: s.kind,
        attributes: jsonAttributes(s.attributes),
        service: resource['service.name'],
        pid: resource['process.pid'],
      })),
    );
  });
}

/** The protobuf wire format's fields of one message: [field number, value]. */
function wireFields(buf: Buffer): Array<[number, Buffer | bigint]> {
  const out: Array<[number, Buffer | bigint]> = [];
  let pos = 0;
  const varint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buf[pos++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (pos < buf.length) {
    const tag = Number(varint());
    const field = tag >> 3;
    switch (tag & 7) {
      case 0:
        out.push([field, varint()]);
        break;
      case 1:
        out.push([field, buf.subarray(pos, (pos += 8))]);
        break;
      case 2: {
        const length = Number(varint());
        out.push([field, buf.subarray(pos, (pos += length))]);
        break;
      }
      case 5:
        out.push([field, buf.subarray(pos, (pos += 4))]);
        break;
      default:
        throw new Error(`unexpected wire type in field ${field}`);
    }
  }
  return out;
}

const messages = (buf: Buffer, field: number) => wireFields(buf).flatMap(([f, v]) => (f === field && Buffer.isBuffer(v) ? [v] : []));
const one = (buf: Buffer, field: number) => wireFields(buf).find(([f]) => f === field)?.[1];

/** KeyValue { key = 1; AnyValue value = 2 }, AnyValue { string_value = 1; bool_value = 2; int_value = 3 }. */
function protobufAttributes(list: Buffer[]): Record<string, unknown> {
  return Object.fromEntries(
    list.map((kv) => {
      const value = one(kv, 2) as Buffer;
      const str = one(value, 1);
      const int = one(value, 3);
      return [
        (one(kv, 1) as Buffer).toString('utf8'),
        Buffer.isBuffer(str) ? str.toString('utf8') : int !== undefined ? Number(int) : one(value, 2) === 1n,
      ];
    }),
  );
}

/** opentelemetry-proto's trace service, by field number: ExportTraceServiceRequest, ResourceSpans, ScopeSpans, Span. */
function fromProtobuf(body: Buffer): ReceivedSpan[] {
  return messages(body, 1).flatMap((resourceSpans) => {
    const found = one(resourceSpans, 1);
    const resource = Buffer.isBuffer(found) ? protobufAttributes(messages(found, 1)) : {};
    return messages(resourceSpans, 2).flatMap((scopeSpans) =>
      messages(scopeSpans, 2).map((span) => ({
        traceId: (one(span, 1) as Buffer).toString('hex'),
        spanId: (one(span, 2) as Buffer).toString('hex'),
        parentSpanId: ((one(span, 4) as Buffer | undefined) ?? Buffer.alloc(0)).toString('hex'),
        name: (one(span, 5) as Buffer).toString('utf8'),
        kind: Number(one(span, 6)),
        attributes: protobufAttributes(messages(span, 9)),
        service: resource['service.name'],
        pid: resource['process.pid'],
      })),
    );
  });
}

const password = 'correct horse battery staple';

async function call(
  server: ServerProcess,
  method: string,
  path: string,
  init: { auth?: string; body?: object; traceparent?: string; idempotencyKey?: string } = {},
) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(init.auth && { Authorization: init.auth }),
      ...(init.body && { 'Content-Type': 'application/json' }),
      ...(init.traceparent && { traceparent: init.traceparent }),
      ...(init.idempotencyKey && { 'Idempotency-Key': init.idempotencyKey }),
    },
    ...(init.body && { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

/** A new account's Bearer key. */
async function customer(server: ServerProcess): Promise<string> {
  const email = `trace-${randomBytes(4).toString('hex')}@example.com`;
  expect((await call(server, 'POST', '/accounts', { body: { email, password } })).status).toBe(201);
  const key = await call(server, 'POST', '/api-keys', { auth: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` });
  expect(key.status).toBe(201);
  return `Bearer ${key.body.key as string}`;
}

/** A caller's span: W3C trace context, sampled. */
function callerSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** The access lines (JSON) the process wrote for `operationId`. */
const accessLines = (server: ServerProcess, operationId: string) =>
  server
    .log()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === 'request' && line.operationId === operationId);

/** One GET on a connection of its own, so that the cluster hands it to any worker. */
const getOnNewConnection = (url: string, auth: string) =>
  new Promise<number>((resolve, reject) => {
    get(url, { agent: false, headers: { Authorization: auth } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });

describe('OpenTelemetry traces over OTLP/HTTP', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** A new database for one service: a SQLite file, or on TEST_DATABASE_URL's server. */
  const database = async (name: string): Promise<Record<string, string>> =>
    testDatabaseUrl
      ? { DATABASE_URL: await createPgDatabase(testDatabaseUrl, `petstore_tracing_${name}_${randomBytes(4).toString('hex')}`) }
      : { DATABASE_PATH: join(dir, `${name}.db`) };
  const engine = testDatabaseUrl ? 'postgresql' : 'sqlite';

  it('http/json: a server span per request named by its operationId, under the caller, with storage spans under it and its ids in the access line', async () => {
    const receiver = await startReceiver();
    const server = await startServer({
      ...(await database('json')),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'petstore-under-test',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    try {
      const key = await customer(server);
      const read = callerSpan();
      expect((await call(server, 'GET', '/pets/1', { auth: key, traceparent: read.traceparent })).status).toBe(200);
      const write = callerSpan();
      const order = await call(server, 'POST', '/store/orders', {
        auth: key,
        body: { petId: 1, quantity: 1 },
        traceparent: write.traceparent,
        // With a key the order is a transaction (the key's record and the order), so its spans nest.
        idempotencyKey: 'traced-order',
      });
      expect([201, 409]).toContain(order.status);

      const spans = receiver.spans;
      const getPet = await eventually(() => spans.find((s) => s.name === 'getPetById'));
      const placeOrder = await eventually(() => spans.find((s) => s.name === 'placeOrder'));
      const transaction = await eventually(() => spans.find((s) => s.name === 'storage.transaction' && s.traceId === write.traceId));
      expect(receiver.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);

      // The caller's trace, its span the parent; the operation, its route and status.
      expect(getPet).toMatchObject({ traceId: read.traceId, parentSpanId: read.spanId, kind: 2, service: 'petstore-under-test' });
      expect(getPet.attributes).toMatchObject({
        'http.request.method': 'GET',
        'http.route': '/pets/{petId}',
        'http.response.status_code': 200,
      });
      expect(placeOrder).toMatchObject({ traceId: write.traceId, parentSpanId: write.spanId, kind: 2 });

      // Storage work under the server span: the pet read, and the order's transaction with its statements under it.
      const storageOf = (parent: ReceivedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId && s.name.startsWith('storage.'));
      expect(storageOf(getPet).map((s) => s.name)).toContain('storage.findPet');
      expect(storageOf(getPet).every((s) => s.traceId === read.traceId && s.attributes['db.system.name'] === engine)).toBe(true);
      expect(transaction.parentSpanId).toBe(placeOrder.spanId);
      expect(storageOf(transaction).map((s) => s.name)).toContain('storage.placeOrder');

      // A request without a traceparent starts a trace of its own.
      const signUp = spans.find((s) => s.name === 'createAccount');
      expect(signUp).toMatchObject({ parentSpanId: '' });
      expect([read.traceId, write.traceId]).not.toContain(signUp?.traceId);

      // The request's access line names the same trace and span.
      const line = await eventually(() => accessLines(server, 'getPetById')[0]);
      expect(line).toMatchObject({ trace_id: read.traceId, span_id: getPet.spanId });
    } finally {
      await server.stop();
      await receiver.close();
    }
  });

  it('http/protobuf: the spans still buffered are exported when the service stops', async () => {
    const receiver = await startReceiver();
    const server = await startServer({
      ...(await database('protobuf')),
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      // Far beyond the test: only the flush at shutdown can send them.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    let exited = false;
    try {
      const key = await customer(server);
      const caller = callerSpan();
      expect((await call(server, 'GET', '/pets/1', { auth: key, traceparent: caller.traceparent })).status).toBe(200);
      expect(receiver.spans).toEqual([]);
      expect(await server.stop()).toBe(0);
      exited = true;

      expect(receiver.contentTypes.length).toBeGreaterThan(0);
      expect(receiver.contentTypes.every((t) => t.startsWith('application/x-protobuf'))).toBe(true);
      const getPet = receiver.spans.find((s) => s.name === 'getPetById');
      expect(getPet).toMatchObject({ traceId: caller.traceId, parentSpanId: caller.spanId, kind: 2, service: 'petstore-service' });
      expect(getPet?.attributes).toMatchObject({ 'http.route': '/pets/{petId}', 'http.response.status_code': 200 });
      const findPet = receiver.spans.find((s) => s.name === 'storage.findPet' && s.parentSpanId === getPet?.spanId);
      expect(findPet).toMatchObject({ traceId: caller.traceId, kind: 3 });
      expect(accessLines(server, 'getPetById')[0]).toMatchObject({ trace_id: caller.traceId, span_id: getPet?.spanId });
    } finally {
      if (!exited) await server.stop();
      await receiver.close();
    }
  });

  it('with WEB_CONCURRENCY, each worker exports its own spans', async () => {
    const receiver = await startReceiver();
    const server = await startServer({
      ...(await database('cluster')),
      WEB_CONCURRENCY: '2',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    try {
      const key = await customer(server);
      // New connections are dealt to the workers in turn.
      for (let i = 0; i < 8; i++) expect(await getOnNewConnection(`${server.url}/pets/1`, key)).toBe(200);
      const pids = await eventually(() => {
        const found = new Set(receiver.spans.filter((s) => s.name === 'getPetById').map((s) => s.pid));
        return found.size === 2 ? found : undefined;
      });
      // The primary serves nothing and traces nothing.
      expect([...pids].every((pid) => typeof pid === 'number' && pid !== server.child.pid)).toBe(true);
    } finally {
      await server.stop();
      await receiver.close();
    }
  });

  it('is off without the OTEL_* variables: no trace ids in the access lines', async () => {
    const server = await startServer(await database('off'));
    try {
      const key = await customer(server);
      expect((await call(server, 'GET', '/pets/1', { auth: key, traceparent: callerSpan().traceparent })).status).toBe(200);
      const line = await eventually(() => accessLines(server, 'getPetById')[0]);
      expect(line).not.toHaveProperty('trace_id');
      expect(server.log()).not.toContain('tracing is on');
    } finally {
      await server.stop();
    }
  });
});
