// The OpenTelemetry SDK's side of tracing (server/observability/tracing.ts): it turns the spans
// the event loop recorded as plain data into the SDK's spans and exports them. It runs on a
// thread of its own, so that the SDK's objects and code never meet the request path's
// (docs/performance.md, "Metrics and tracing", says what that saves); the tests make spans
// in process with it (makeSpans). Plain CommonJS: a worker runs it as it is, under node, tsx
// and jest alike.
'use strict';
const { isMainThread, parentPort, workerData } = require('node:worker_threads');

/**
 * Starts the SDK from the environment (NodeSDK reads the exporter, endpoint, headers,
 * service name and batching from the OTEL_* variables) and returns a function that makes
 * and ends one SDK span per record. Every record is kept: the service decided which
 * requests are traced before it recorded them. `spanProcessors`, from a test, replace the
 * exporter the environment names.
 */
function makeSpans({ serviceName, spanProcessors } = {}) {
  const { context, ROOT_CONTEXT, trace, createTraceState } = require('@opentelemetry/api');
  const { NodeSDK, resources } = require('@opentelemetry/sdk-node');
  const { AlwaysOnSampler } = require('@opentelemetry/sdk-trace-base');
  // The SDK makes a span's ids itself; each record brings the ids the service already put
  // in the access line, handed to the SDK as the next ones it makes.
  const next = { traceId: '', spanId: '' };
  const sdk = new NodeSDK({
    sampler: new AlwaysOnSampler(),
    idGenerator: { generateTraceId: () => next.traceId, generateSpanId: () => next.spanId },
    // A name until OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES gives one (detected
    // attributes override these).
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': serviceName })),
    // Traces only: metrics are Prometheus's (/metrics), logs are the pino lines.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
    ...(spanProcessors && { spanProcessors }),
  });
  sdk.start();
  const tracer = trace.getTracer(serviceName);
  const make = (record) => {
    const { parent } = record;
    const parentContext = parent
      ? trace.setSpanContext(ROOT_CONTEXT, {
          traceId: record.traceId,
          spanId: parent.spanId,
          traceFlags: parent.traceFlags,
          isRemote: parent.isRemote,
          ...(parent.traceState !== undefined && { traceState: createTraceState(parent.traceState) }),
        })
      : ROOT_CONTEXT;
    next.traceId = record.traceId;
    next.spanId = record.spanId;
    const span = tracer.startSpan(
      record.name,
      { kind: record.kind, startTime: record.start, attributes: record.attributes },
      parentContext,
    );
    if (record.exception) span.recordException(record.exception, record.end);
    if (record.status !== undefined) span.setStatus({ code: record.status });
    span.end(record.end);
  };
  return {
    make: (records) => context.with(ROOT_CONTEXT, () => records.forEach(make)),
    shutdown: () => sdk.shutdown(),
  };
}

if (!isMainThread && workerData?.traceWorker) {
  const spans = makeSpans(workerData);
  parentPort.on('message', (message) => {
    if (message.records) return spans.make(message.records);
    if (message.shutdown) {
      spans.shutdown().then(
        () => parentPort.postMessage({ shutdown: true }),
        (error) => parentPort.postMessage({ shutdown: true, error: String(error) }),
      );
    }
  });
}

module.exports = { makeSpans };
