// OpenTelemetry traces, when the OTEL_* variables ask for them (config.tracing; docs/operations.md,
// "Tracing"). The SDK (NodeSDK) reads those variables itself (exporter, protocol, endpoint,
// headers, service name, batching) but the sampler's: the service decides whether a new trace
// is kept before any OpenTelemetry call, so that a request left out (99 in 100 at a 1% ratio)
// costs a random number and nothing else. No instrumentation library: they patch http,
// express and pg as they load; the spans are made here instead, where the service knows the
// operation. Off, none of this is loaded or in the request path: createApp adds the
// middleware and wraps the storage only when given a Tracing.
import type { Request, RequestHandler } from 'express';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { NodeSDK, resources } from '@opentelemetry/sdk-node';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import type { Queries, Storage } from '../../domain/storage';
import type { TraceSampler } from '../config';
import { isProbe } from './log';
import '../pipeline/request-context';

export interface Tracing {
  /** First in the chain: the request's server span, current while the request is served. */
  middleware: RequestHandler;
  /** The storage with a child span per call made inside a traced request. */
  storage(storage: Storage): Storage;
  /** Exports the spans still buffered. */
  shutdown(): Promise<void>;
}

const scope = 'petstore-service';

/** The spec's default, parentbased_always_on: every new trace, and a caller's flag followed. */
const everyTrace: TraceSampler = { ratio: 1, parentBased: true };

/**
 * Starts the SDK from the environment; each worker of a cluster exports its own spans.
 * server/main.ts imports this module only when tracing is on, with config.traceSampler.
 * Tests may pass the span processors, which replace the exporter the environment names.
 */
export function startTracing(
  log: Logger,
  { sampler = everyTrace, spanProcessors }: { sampler?: TraceSampler; spanProcessors?: SpanProcessor[] } = {},
): Tracing {
  const sdk = new NodeSDK({
    sampler: sdkSampler(sampler),
    // A name until OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES gives one (detected
    // attributes override these).
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': scope })),
    // Traces only: metrics are Prometheus's (/metrics), logs are the pino lines.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
    ...(spanProcessors && { spanProcessors }),
  });
  sdk.start();
  log.info('OpenTelemetry tracing is on');
  const tracer = trace.getTracer(scope);
  const spans = serverSpans(tracer, sampler);
  return {
    middleware: spans.middleware,
    storage: (storage) => tracedStorage(storage, tracer, spans.sampledInFlight),
    shutdown: () => sdk.shutdown(),
  };
}

/**
 * The SDK's side of the decision. A root span is made only for a new trace the middleware
 * already kept, so the SDK keeps every root; the spans below it follow it. A caller's span
 * (a `traceparent`) is left to the SDK as the standard samplers have it: its sampled flag
 * decides when parent-based, else the ratio by the trace id (TraceIdRatioBased).
 */
export function sdkSampler({ ratio, parentBased }: TraceSampler): Sampler {
  const root = new AlwaysOnSampler();
  if (parentBased) return new ParentBasedSampler({ root });
  const byTraceId = ratio >= 1 ? new AlwaysOnSampler() : ratio <= 0 ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(ratio);
  return new ParentBasedSampler({ root, remoteParentSampled: byTraceId, remoteParentNotSampled: byTraceId });
}

/**
 * A SERVER span per request, child of the caller's W3C `traceparent` when it sent one,
 * named by the operationId the validator matched once the response is done (the method
 * alone when none matched). Probes are not traced, as they are not logged.
 */
export function serverSpans(tracer: Tracer, { ratio }: TraceSampler): { middleware: RequestHandler; sampledInFlight: () => boolean } {
  // The headers the propagators read (traceparent, tracestate, baggage by default): without
  // any of them there is no parent to extract, and the request starts a trace.
  const fields = propagation.fields();
  const hasParent = (headers: Request['headers']) => fields.some((field) => headers[field] !== undefined);
  // A new trace is kept with the configured probability. The standard ratio sampler decides
  // by the trace id so that every process of one trace decides alike; a new trace's id is
  // made here, and its spans below follow the root's decision, so a random draw is the same.
  const keepNewTrace = ratio >= 1 ? () => true : ratio <= 0 ? () => false : () => Math.random() < ratio;
  // Sampled requests being served: while none is, a storage call need not look for a span.
  let inFlight = 0;
  const middleware: RequestHandler = (req, res, next) => {
    if (isProbe(req.path)) return next();
    const parent = hasParent(req.headers) ? propagation.extract(ROOT_CONTEXT, req.headers) : ROOT_CONTEXT;
    // A new trace left out: no span, no ids, no context; the request is served as with
    // tracing off (its access line carries no trace ids).
    if (trace.getSpanContext(parent) === undefined && !keepNewTrace()) return next();
    const method = req.method;
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
    req.trace = span.spanContext();
    // A caller's trace left out (its sampled flag off): its ids still go in the access line,
    // to find the caller's trace, and nothing else is done; its storage calls make no span.
    if (!span.isRecording()) return next();
    inFlight++;
    span.setAttributes({ 'http.request.method': method, 'url.path': req.path });
    res.once('close', () => {
      inFlight--;
      const route = req.operation?.path;
      const status = res.statusCode;
      span.updateName(req.operation?.id ?? method);
      if (route) span.setAttribute('http.route', route);
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', String(status));
      }
      // The client went before its answer was written.
      if (!res.writableFinished) span.setAttribute('error.type', 'aborted');
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
  return { middleware, sampledInFlight: () => inFlight > 0 };
}

type Method = (...args: unknown[]) => unknown;

/**
 * Each storage call made while a recording span is current (a sampled request's) becomes its child,
 * `storage.<name>`; `storage.transaction` is the parent of the calls its work makes. Calls
 * outside a request (message delivery, periodic purges) are not traced.
 */
export function tracedStorage(storage: Storage, tracer: Tracer, sampledInFlight: () => boolean): Storage {
  const system = storage.engine === 'postgres' ? 'postgresql' : 'sqlite';
  // The context is looked up only while a sampled request is being served.
  const recording = () => sampledInFlight() && trace.getSpan(context.active())?.isRecording() === true;
  const run = (name: string, kind: SpanKind, call: () => unknown): unknown => {
    const parent = context.active();
    const span = tracer.startSpan(`storage.${name}`, { kind, attributes: { 'db.system.name': system, 'db.operation.name': name } }, parent);
    const failed = (error: unknown) => {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    let result: unknown;
    try {
      result = context.with(trace.setSpan(parent, span), call);
    } catch (error) {
      failed(error);
      throw error;
    }
    if (!(result instanceof Promise)) {
      span.end();
      return result;
    }
    return result.then(
      (value: unknown) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        failed(error);
        throw error;
      },
    );
  };
  const wrap = <T extends object>(target: T): T => {
    const traced: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(target)) {
      if (typeof value !== 'function') {
        traced[name] = value;
        continue;
      }
      const op = (value as Method).bind(target);
      // Outside a sampled request (99 in 100 at a 1% ratio) the call goes straight through.
      traced[name] =
        name === 'transaction'
          ? (work: (tx: Queries) => Promise<unknown>) =>
              recording() ? run(name, SpanKind.INTERNAL, () => op((tx: Queries) => work(wrap(tx)))) : op(work)
          : (...args: unknown[]) => (recording() ? run(name, SpanKind.CLIENT, () => op(...args)) : op(...args));
    }
    return traced as T;
  };
  return wrap(storage);
}
