// docs/operations.md, Tracing: what the spans say when a request fails, matches nothing, or
// is a probe. In process, with the service's own tracing (server/observability/tracing.ts) and the SDK
// keeping the spans in memory; tests/tracing.test.ts checks the export over OTLP.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import request from 'supertest';
import type { Storage } from '../domain/storage';
import { createLogger } from '../server/observability/log';
import { startTracing } from '../server/observability/tracing';
import { customer, setupApp, testStorage, type Caller } from './helpers';

const exporter = new InMemorySpanExporter();
const tracing = startTracing(createLogger('silent'), { spanProcessors: [new SimpleSpanProcessor(exporter)] });
afterAll(() => tracing.shutdown());
afterEach(() => exporter.reset());

/** SQLite whatever TEST_DATABASE_URL says: this file is about the spans, not the engine. */
const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-spans-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const sqlite = () => testStorage(join(dir, `${++files}.db`)).storage;

const spans = () => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('spans', () => {
  // One storage fails: findPet rejects (as PostgreSQL's calls fail), listPets throws (as SQLite's do).
  const storage = sqlite();
  const failing: Storage = {
    ...storage,
    findPet: () => Promise.reject(new Error('the disk is on fire')),
    listPets: () => {
      throw new Error('the disk is still on fire');
    },
  };
  const { app } = setupApp({ storage: failing, tracing });
  let buyer: Caller;
  beforeAll(async () => {
    buyer = await customer(app);
  });

  it('a storage call that fails records its error, and the 500 marks the server span', async () => {
    for (const path of ['/pets/1', '/pets?ids=1']) {
      exporter.reset();
      expect((await request(app).get(path).set(buyer.auth)).status).toBe(500);
      const server = spans().find((s) => s.kind === SpanKind.SERVER);
      const failed = spans().find((s) => s.status.code === SpanStatusCode.ERROR && s.name.startsWith('storage.'));
      expect(server?.status.code).toBe(SpanStatusCode.ERROR);
      expect(server?.attributes).toMatchObject({ 'http.response.status_code': 500, 'error.type': '500' });
      expect(failed?.name).toBe(path === '/pets/1' ? 'storage.findPet' : 'storage.listPets');
      expect(parentOf(failed!)).toBe(server?.spanContext().spanId);
      expect(failed?.events.find((e) => e.name === 'exception')?.attributes?.['exception.message']).toMatch(/on fire/);
    }
  });

  it('a request that matches no operation is named by its method, without a route', async () => {
    expect((await request(app).get('/nowhere')).status).toBe(404);
    const [span] = named('GET');
    expect(span?.attributes).toMatchObject({ 'http.request.method': 'GET', 'url.path': '/nowhere', 'http.response.status_code': 404 });
    expect(span?.attributes).not.toHaveProperty('http.route');
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a HEAD request is traced as the GET operation that serves it, with its own method', async () => {
    const working = setupApp({ storage: sqlite(), tracing });
    const caller = await customer(working.app);
    exporter.reset();
    // No pet yet: the store looked for it, and the 404 is no error of the service.
    expect((await request(working.app).head('/pets/1').set(caller.auth)).status).toBe(404);
    expect(named('getPetById')[0]?.attributes).toMatchObject({
      'http.request.method': 'HEAD',
      'http.route': '/pets/{petId}',
      'http.response.status_code': 404,
    });
    expect(named('getPetById')[0]?.status.code).toBe(SpanStatusCode.UNSET);
    const findPet = named('storage.findPet')[0];
    expect(findPet && parentOf(findPet)).toBe(named('getPetById')[0]?.spanContext().spanId);
  });

  it('the probes are not traced', async () => {
    expect((await request(app).get('/healthz')).status).toBe(200);
    expect((await request(app).get('/readyz')).status).toBe(200);
    expect(spans()).toEqual([]);
  });
});

describe('a request the sampler leaves out', () => {
  const { app } = setupApp({ storage: sqlite(), tracing });
  let buyer: Caller;
  beforeAll(async () => {
    buyer = await customer(app);
  });

  it('is answered, makes no span of its own nor any storage span, and the next sampled one is traced whole', async () => {
    exporter.reset();
    // A caller's trace context with the sampled flag off: the default sampler follows its parent.
    const unsampled = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`;
    const res = await request(app).get('/pets?ids=1').set(buyer.auth).set('traceparent', unsampled);
    expect(res.status).toBe(200);
    expect(spans()).toEqual([]);
    expect((await request(app).get('/pets?ids=1').set(buyer.auth)).status).toBe(200);
    const server = spans().find((s) => s.kind === SpanKind.SERVER);
    expect(server?.name).toBe('listPets');
    expect(spans().some((s) => s.name.startsWith('storage.') && parentOf(s) === server?.spanContext().spanId)).toBe(true);
  });
});
