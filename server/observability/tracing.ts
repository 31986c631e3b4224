// OpenTelemetry traces, when the OTEL_* variables ask for them (config.tracing; docs/operations.md,
// "Tracing"). The service decides whether a new trace is kept before anything else, so that a
// request left out (99 in 100 at a 1% ratio) costs a random number and nothing else. No
// instrumentation library: they patch http, express and pg as they load; the spans are
// recorded here instead, where the service knows the operation. The event loop records a kept
// request's spans as plain data (ids, times, attributes) and hands them to a thread of its own,
// where the SDK makes, batches and exports them (trace-worker.cjs): the SDK's spans made on the
// event loop slowed every request, traced or not (docs/performance.md, "Metrics and tracing").
// Off, none of this is loaded or in the request path: createApp adds the middleware and wraps
// the storage only when given a Tracing.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { Request, RequestHandler } from 'express';
import {
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type TextMapPropagator,
} from '@opentelemetry/api';
import { CompositePropagator, hrTime, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import type { Queries, Storage } from '../../domain/storage';
import type { TracePropagator, TraceSampler } from '../config';
import { traceWorkerFile } from '../files';
import { isProbe } from './log';
import type { SpanRecord } from './trace-worker.cjs';
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
 * Starts tracing: the SDK on a thread of its own, started from the environment; each
 * process of a cluster exports its own spans. server/main.ts imports this module only when
 * tracing is on, with config.traceSampler. Tests may pass the span processors, which
 * replace the exporter the environment names; the SDK then makes the spans in this thread,
 * as each ends.
 */
export function startTracing(
  log: Logger,
  {
    sampler = everyTrace,
    propagators = ['tracecontext', 'baggage'],
    spanProcessors,
  }: { sampler?: TraceSampler; propagators?: readonly TracePropagator[]; spanProcessors?: SpanProcessor[] } = {},
): Tracing {
  const maker = spanProcessors ? inProcess(spanProcessors) : onThread(log);
  log.info('OpenTelemetry tracing is on');
  const spans = serverSpans(sampler, callerPropagator(propagators), maker.record);
  return {
    middleware: spans.middleware,
    storage: (storage) => tracedStorage(storage, spans.current, maker.record),
    shutdown: maker.shutdown,
  };
}

interface Sink {
  record: (span: SpanRecord) => void;
  shutdown: () => Promise<void>;
}

function inProcess(spanProcessors: SpanProcessor[]): Sink {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the file the thread runs, which loads the SDK
  const { makeSpans } = require(traceWorkerFile) as typeof import('./trace-worker.cjs');
  const maker = makeSpans({ serviceName: scope, spanProcessors });
  return { record: (span) => maker.make([span]), shutdown: () => maker.shutdown() };
}

/** How long finished spans wait on the event loop before they go to the thread together. */
const handOverMs = 200;

function onThread(log: Logger): Sink {
  const worker = new Worker(traceWorkerFile, { workerData: { traceWorker: true, serviceName: scope }, execArgv: [] });
  // The thread never keeps the process alive; the shutdown holds it while it exports.
  worker.unref();
  let stopped = false;
  worker.on('error', (err) => {
    stopped = true;
    log.warn({ err }, 'The tracing thread stopped: spans are no longer exported');
  });
  let pending: SpanRecord[] = [];
  let timer: NodeJS.Timeout | undefined;
  const handOver = () => {
    timer = undefined;
    if (pending.length > 0 && !stopped) worker.postMessage({ records: pending });
    pending = [];
  };
  return {
    record: (span) => {
      if (stopped) return;
      pending.push(span);
      timer ??= setTimeout(handOver, handOverMs).unref();
    },
    shutdown: async () => {
      clearTimeout(timer);
      handOver();
      if (stopped) return;
      worker.ref();
      const done = new Promise<void>((resolve, reject) => {
        worker.on('message', (message: { shutdown?: boolean; error?: string }) => {
          if (!message.shutdown) return;
          if (message.error) reject(new Error(message.error));
          else resolve();
        });
        worker.once('exit', () => resolve());
      });
      worker.postMessage({ shutdown: true });
      try {
        await done;
      } finally {
        stopped = true;
        await worker.terminate();
      }
    },
  };
}

/**
 * The decision for a request that carries a caller's span (a `traceparent`), as the SDK's
 * standard samplers make it: the caller's sampled flag when parent-based, else the ratio by
 * the trace id (TraceIdRatioBased). A new trace is the middleware's own draw.
 */
export function callerSampler({ ratio, parentBased }: TraceSampler): Sampler {
  if (parentBased) return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  return ratio >= 1 ? new AlwaysOnSampler() : ratio <= 0 ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(ratio);
}

/**
 * What reads a caller's span from a request's headers, as OTEL_PROPAGATORS names it: the
 * propagators the Node SDK offers, and none for `none`.
 */
export function callerPropagator(names: readonly TracePropagator[]): TextMapPropagator {
  if (names.includes('none')) return new CompositePropagator();
  const made = [...new Set(names)].map((name): TextMapPropagator => {
    if (name === 'tracecontext') return new W3CTraceContextPropagator();
    if (name === 'baggage') return new W3CBaggagePropagator();
    if (name === 'jaeger') {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when named
      const { JaegerPropagator } = require('@opentelemetry/propagator-jaeger') as typeof import('@opentelemetry/propagator-jaeger');
      return new JaegerPropagator();
    }
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when named
    const { B3Propagator, B3InjectEncoding } = require('@opentelemetry/propagator-b3') as typeof import('@opentelemetry/propagator-b3');
    return new B3Propagator({ injectEncoding: name === 'b3multi' ? B3InjectEncoding.MULTI_HEADER : B3InjectEncoding.SINGLE_HEADER });
  });
  return new CompositePropagator({ propagators: made });
}

/** The span a request's storage calls are children of: the request's, or a transaction's. */
interface Current {
  traceId: string;
  spanId: string;
  traceState: string | undefined;
}

/** The current span of a kept request, and a way to make another one current. */
interface CurrentSpan {
  /** None outside a kept request, and none looked up while no kept request is in flight. */
  get(): Current | undefined;
  run<T>(span: Current, work: () => T): T;
}

const randomId = (bytes: number): string => {
  const id = randomBytes(bytes).toString('hex');
  // An id of zeros is invalid (W3C Trace Context).
  return /[^0]/.test(id) ? id : randomId(bytes);
};

const exceptionOf = (error: unknown): SpanRecord['exception'] => {
  if (!(error instanceof Error)) return { message: String(error) };
  const { code } = error as { code?: unknown };
  return {
    name: error.name,
    message: error.message,
    ...(error.stack !== undefined && { stack: error.stack }),
    ...((typeof code === 'string' || typeof code === 'number') && { code }),
  };
};

/**
 * A SERVER span per request, child of the caller's span when it sent one (a W3C
 * `traceparent`, or the headers OTEL_PROPAGATORS names), named by the operationId the
 * validator matched once the response is done (the method alone when none matched).
 * Probes are not traced, as they are not logged.
 */
export function serverSpans(
  sampling: TraceSampler,
  propagator: TextMapPropagator,
  record: (span: SpanRecord) => void,
): { middleware: RequestHandler; current: CurrentSpan } {
  // Without any of the headers the propagators read there is no parent, and the request starts a trace.
  const fields = propagator.fields();
  const hasParent = (headers: Request['headers']) => fields.some((field) => headers[field] !== undefined);
  const sampler = callerSampler(sampling);
  // A new trace is kept with the configured probability. The standard ratio sampler decides
  // by the trace id so that every process of one trace decides alike; a new trace's id is
  // made here, and its spans below follow the root's decision, so a random draw is the same.
  const { ratio } = sampling;
  const keepNewTrace = ratio >= 1 ? () => true : ratio <= 0 ? () => false : () => Math.random() < ratio;
  // The span current while a kept request is served, for its storage calls.
  const spans = new AsyncLocalStorage<Current>();
  // Kept requests being served: while none is, a storage call need not look for a span.
  let inFlight = 0;
  const middleware: RequestHandler = (req, res, next) => {
    if (isProbe(req.path)) return next();
    const caller = hasParent(req.headers) ? propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter) : ROOT_CONTEXT;
    const parent = trace.getSpanContext(caller);
    // A new trace left out: no span, no ids, no context; the request is served as with
    // tracing off (its access line carries no trace ids).
    if (parent === undefined && !keepNewTrace()) return next();
    const method = req.method;
    const traceId = parent?.traceId ?? randomId(16);
    const spanId = randomId(8);
    req.trace = { traceId, spanId };
    // A caller's trace left out (its sampled flag off): its ids still go in the access line,
    // to find the caller's trace, and nothing else is done; its storage calls make no span.
    if (parent && sampler.shouldSample(caller, traceId, method, SpanKind.SERVER, {}, []).decision === SamplingDecision.NOT_RECORD)
      return next();
    inFlight++;
    const start = hrTime();
    const traceState = parent?.traceState?.serialize();
    res.once('close', () => {
      inFlight--;
      const route = req.operation?.path;
      const status = res.statusCode;
      const attributes: SpanRecord['attributes'] = { 'http.request.method': method, 'url.path': req.path };
      if (route) attributes['http.route'] = route;
      attributes['http.response.status_code'] = status;
      if (status >= 500) attributes['error.type'] = String(status);
      // The client went before its answer was written.
      if (!res.writableFinished) attributes['error.type'] = 'aborted';
      record({
        name: req.operation?.id ?? method,
        kind: SpanKind.SERVER,
        traceId,
        spanId,
        ...(parent && {
          parent: { spanId: parent.spanId, traceFlags: parent.traceFlags, isRemote: true, ...(traceState !== undefined && { traceState }) },
        }),
        start,
        end: hrTime(),
        attributes,
        ...(status >= 500 && { status: SpanStatusCode.ERROR }),
      });
    });
    spans.run({ traceId, spanId, traceState }, next);
  };
  const current: CurrentSpan = {
    get: () => (inFlight > 0 ? spans.getStore() : undefined),
    run: (span, work) => spans.run(span, work),
  };
  return { middleware, current };
}

type Method = (...args: unknown[]) => unknown;

/**
 * Each storage call made while a kept request's span is current becomes its child,
 * `storage.<name>`; `storage.transaction` is the parent of the calls its work makes. Calls
 * outside a request (message delivery, periodic purges) are not traced.
 */
export function tracedStorage(storage: Storage, current: CurrentSpan, record: (span: SpanRecord) => void): Storage {
  const system = storage.engine === 'postgres' ? 'postgresql' : 'sqlite';
  const run = (parent: Current, name: string, kind: SpanKind, call: () => unknown): unknown => {
    const span: Current = { traceId: parent.traceId, spanId: randomId(8), traceState: parent.traceState };
    const start = hrTime();
    const end = (failed: boolean, error?: unknown) =>
      record({
        name: `storage.${name}`,
        kind,
        traceId: span.traceId,
        spanId: span.spanId,
        parent: {
          spanId: parent.spanId,
          traceFlags: TraceFlags.SAMPLED,
          isRemote: false,
          ...(parent.traceState !== undefined && { traceState: parent.traceState }),
        },
        start,
        end: hrTime(),
        attributes: { 'db.system.name': system, 'db.operation.name': name },
        ...(failed && { status: SpanStatusCode.ERROR, exception: exceptionOf(error) }),
      });
    let result: unknown;
    try {
      result = current.run(span, call);
    } catch (error) {
      end(true, error);
      throw error;
    }
    if (!(result instanceof Promise)) {
      end(false);
      return result;
    }
    return result.then(
      (value: unknown) => {
        end(false);
        return value;
      },
      (error: unknown) => {
        end(true, error);
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
      // Outside a kept request (99 in 100 at a 1% ratio) the call goes straight through.
      traced[name] =
        name === 'transaction'
          ? (work: (tx: Queries) => Promise<unknown>) => {
              const parent = current.get();
              return parent ? run(parent, name, SpanKind.INTERNAL, () => op((tx: Queries) => work(wrap(tx)))) : op(work);
            }
          : (...args: unknown[]) => {
              const parent = current.get();
              return parent ? run(parent, name, SpanKind.CLIENT, () => op(...args)) : op(...args);
            };
    }
    return traced as T;
  };
  return wrap(storage);
}
