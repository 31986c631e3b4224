// The types of trace-worker.cjs, for server/observability/tracing.ts.
import type { HrTime, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

/** A finished span as the event loop recorded it, in plain data a worker can be sent. */
export interface SpanRecord {
  name: string;
  kind: SpanKind;
  traceId: string;
  spanId: string;
  /** The span it is a child of: the caller's (remote), or the request's own. */
  parent?: { spanId: string; traceFlags: number; isRemote: boolean; traceState?: string };
  start: HrTime;
  end: HrTime;
  attributes: Record<string, string | number>;
  status?: SpanStatusCode;
  exception?: { name?: string; message?: string; stack?: string; code?: string | number };
}

export interface SpanMaker {
  make(records: SpanRecord[]): void;
  shutdown(): Promise<void>;
}

export function makeSpans(options?: { serviceName?: string; spanProcessors?: SpanProcessor[] }): SpanMaker;
