// docs/operations.md, Tracing: which requests are traced. The service decides for a new
// trace before any OpenTelemetry call (server/observability/tracing.ts): one it leaves out
// makes no span and carries no trace ids; one it keeps is traced whole; a caller's sampled
// flag decides when the sampler is parent-based. In process, with the SDK keeping the spans
// in memory and the access lines captured.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import { InMemorySpanExporter, SamplingDecision, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import express from 'express';
import request from 'supertest';
import { loadConfig } from '../server/config';
import type { SpanRecord } from '../server/observability/trace-worker.cjs';
import { callerPropagator, callerSampler, serverSpans as requestSpans, startTracing } from '../server/observability/tracing';
import { captureLog, customer, setupApp, testStorage, type Caller } from './helpers';

const ratio = 0.25;
const exporter = new InMemorySpanExporter();
const tracing = startTracing(captureLog('silent').log, {
  sampler: loadConfig({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(ratio) }).traceSampler,
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
afterAll(() => tracing.shutdown());

/** SQLite whatever TEST_DATABASE_URL says: this file is about the spans, not the engine. */
const dir = mkdtempSync(join(tmpdir(), 'petstore-tracing-sampler-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const logged = captureLog('info');
const { app } = setupApp({ storage: testStorage(join(dir, 'sampler.db')).storage, tracing, log: logged.log });
let buyer: Caller;
beforeAll(async () => {
  buyer = await customer(app);
});

const serverSpans = () => exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
const accessLines = () => logged.lines().filter((line) => line.operationId === 'listPets');

describe('a request that starts a trace, at a 25% ratio', () => {
  it('is traced about one time in four; one left out makes no span and no trace ids; one kept is traced whole', async () => {
    exporter.reset();
    const before = accessLines().length;
    const requests = 400;
    for (let i = 0; i < requests; i++) expect((await request(app).get('/pets?ids=1').set(buyer.auth)).status).toBe(200);
    const servers = serverSpans();
    // 100 expected, with a standard deviation of 8.7: outside 60-140 one run in some 10^5.
    expect(servers.length).toBeGreaterThan(60);
    expect(servers.length).toBeLessThan(140);
    // Every kept request has its storage spans under it, and nothing else made a span.
    const storage = exporter.getFinishedSpans().filter((s) => s.name.startsWith('storage.'));
    const kept = new Set(servers.map((s) => s.spanContext().spanId));
    expect(storage.every((s) => kept.has(s.parentSpanContext?.spanId ?? ''))).toBe(true);
    expect(new Set(storage.map((s) => s.parentSpanContext?.spanId)).size).toBe(servers.length);
    // The access lines carry ids for exactly the kept requests.
    const lines = accessLines().slice(before);
    expect(lines).toHaveLength(requests);
    const withIds = lines.filter((line) => line.trace_id !== undefined);
    expect(withIds.map((line) => line.span_id).sort()).toEqual([...kept].sort());
  });
});

describe("a caller's trace (traceparent), with a parent-based sampler", () => {
  const traceparent = (flags: string, i: number) => `00-${(i + 1).toString(16).padStart(32, 'a')}-${'b'.repeat(16)}-${flags}`;

  it('is traced every time the caller sampled it', async () => {
    exporter.reset();
    for (let i = 0; i < 20; i++)
      expect((await request(app).get('/pets?ids=1').set(buyer.auth).set('traceparent', traceparent('01', i))).status).toBe(200);
    expect(serverSpans()).toHaveLength(20);
    expect(serverSpans().every((s) => s.parentSpanContext?.spanId === 'b'.repeat(16))).toBe(true);
  });

  it('is never traced when the caller did not, and its access line keeps the caller’s trace id', async () => {
    exporter.reset();
    const before = accessLines().length;
    for (let i = 0; i < 20; i++)
      expect((await request(app).get('/pets?ids=1').set(buyer.auth).set('traceparent', traceparent('00', i))).status).toBe(200);
    expect(exporter.getFinishedSpans()).toEqual([]);
    const lines = accessLines().slice(before);
    expect(lines.map((line) => line.trace_id)).toEqual(Array.from({ length: 20 }, (_, i) => traceparent('00', i).split('-')[1]));
  });

  it('starts a trace of its own when the header is not a valid traceparent, at the ratio', async () => {
    exporter.reset();
    for (let i = 0; i < 200; i++)
      expect((await request(app).get('/pets?ids=1').set(buyer.auth).set('traceparent', 'not-a-trace')).status).toBe(200);
    // 50 expected, standard deviation 6.1.
    expect(serverSpans().length).toBeGreaterThan(20);
    expect(serverSpans().length).toBeLessThan(80);
    expect(serverSpans().every((s) => s.parentSpanContext === undefined)).toBe(true);
  });
});

describe("the decision for a caller's trace, by sampler", () => {
  // A caller's span context, as propagation.extract makes it.
  const remote = (traceId: string, sampled: boolean) =>
    trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId: 'b'.repeat(16),
      traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
      isRemote: true,
    });
  const decide = (name: string, arg: string | undefined, traceId: string, sampled: boolean) =>
    callerSampler(
      loadConfig({ OTEL_TRACES_SAMPLER: name, ...(arg !== undefined && { OTEL_TRACES_SAMPLER_ARG: arg }) }).traceSampler,
    ).shouldSample(remote(traceId, sampled), traceId, 'GET', SpanKind.SERVER, {}, []).decision;
  const record = SamplingDecision.RECORD_AND_SAMPLED;
  const drop = SamplingDecision.NOT_RECORD;
  // TraceIdRatioBased keeps an id whose four 32-bit words XOR to below ratio x 2^32.
  const low = 'f'.repeat(32);
  const high = `${'f'.repeat(24)}${'0'.repeat(8)}`;

  it("follow a caller's flag when parent-based, else decide by the ratio on the trace id", () => {
    expect([decide('parentbased_traceidratio', '0.01', high, true), decide('parentbased_traceidratio', '0.01', low, false)]).toEqual([
      record,
      drop,
    ]);
    expect([decide('parentbased_always_off', undefined, high, true), decide('parentbased_always_on', undefined, low, false)]).toEqual([
      record,
      drop,
    ]);
    expect([decide('traceidratio', '0.5', low, false), decide('traceidratio', '0.5', high, true)]).toEqual([record, drop]);
    expect([decide('always_on', undefined, high, false), decide('always_off', undefined, low, true)]).toEqual([record, drop]);
  });
});

describe("a caller's span, read from the headers OTEL_PROPAGATORS names", () => {
  const traceId = 'c'.repeat(32);
  const spanId = 'd'.repeat(16);
  /** The server span a request with `headers` gets, under the propagators the variable names. */
  const spanOf = async (variable: string | undefined, headers: Record<string, string>) => {
    const { tracePropagators } = loadConfig(variable === undefined ? {} : { OTEL_PROPAGATORS: variable });
    const records: SpanRecord[] = [];
    const spans = requestSpans({ ratio: 1, parentBased: true }, callerPropagator(tracePropagators), (span) => records.push(span));
    const app = express().use(spans.middleware);
    app.get('/traced', (_req, res) => res.json({}));
    expect((await request(app).get('/traced').set(headers)).status).toBe(200);
    await new Promise((resolve) => setImmediate(resolve));
    expect(records).toHaveLength(1);
    return records[0] as SpanRecord;
  };
  const traceparent = { traceparent: `00-${traceId}-${spanId}-01` };

  it('reads a W3C traceparent by default, and a B3 or Jaeger header when named', async () => {
    for (const [variable, headers] of [
      [undefined, traceparent],
      ['b3', { b3: `${traceId}-${spanId}-1` }],
      ['b3multi', { 'X-B3-TraceId': traceId, 'X-B3-SpanId': spanId, 'X-B3-Sampled': '1' }],
      ['jaeger', { 'uber-trace-id': `${traceId}:${spanId}:0:1` }],
      ['tracecontext,b3', { b3: `${traceId}-${spanId}-1` }],
    ] as const) {
      const span = await spanOf(variable, headers);
      expect([variable, span.traceId, span.parent?.spanId, span.parent?.isRemote]).toEqual([variable, traceId, spanId, true]);
    }
  });

  it('starts a trace where the propagators named do not read the header sent, or none is named', async () => {
    for (const [variable, headers] of [
      ['b3', traceparent],
      ['none', traceparent],
    ] as const) {
      const span = await spanOf(variable, headers);
      expect([variable, span.parent, span.traceId === traceId]).toEqual([variable, undefined, false]);
    }
  });

  it('refuses at start a propagator the SDK does not offer', () => {
    expect(() => loadConfig({ OTEL_PROPAGATORS: 'tracecontext,xray' })).toThrow(
      /OTEL_PROPAGATORS=tracecontext,xray: expected tracecontext/,
    );
  });
});
