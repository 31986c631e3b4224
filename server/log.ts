// pino JSON lines on stderr, and pino-http's one access line per request. Nothing here
// logs request headers: secrets never reach a line, and the redaction below is the
// second guard for fields a caller might pass by mistake.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import pino, { type DestinationStream } from 'pino';
import { pinoHttp } from 'pino-http';
import type { Config } from './config';
import './request-context';

export type Logger = pino.Logger;

const redactedPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'authorization',
  'cookie',
  'password',
  'key',
  'keyHash',
  'passwordHash',
  '*.authorization',
  '*.cookie',
  '*.password',
  '*.key',
  '*.keyHash',
  '*.passwordHash',
];

/** The service's logger; tests pass a destination to read what was written. */
export function createLogger(level: Config['logLevel'], destination: DestinationStream = pino.destination(2)): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: redactedPaths, censor: '[redacted]' },
    },
    destination,
  );
}

const accessLineRedaction = ['authorization', 'cookie', 'password', 'key', 'keyHash', 'passwordHash'].map((name) => `err.${name}`);

/** Probes are polled by orchestrators every few seconds; an access line (or a span) each is noise. */
const probes = new Set(['/healthz', '/readyz']);
export const isProbe = (path: string) => probes.has(path);

/**
 * One access line per request when the response is finished: request id, method, route
 * template, operationId, status, duration and account. Placed after the per-address
 * rate limit, so an outsider cannot make lines faster than that limit allows.
 */
export function accessLog(log: Logger): RequestHandler {
  // Everything is read when the response is finished, once the route and the account are
  // known. pino-http binds nothing per request (quietResLogger): a child logger per
  // request cost more than the line itself (docs/performance.md).
  const line = (req: IncomingMessage, res: ServerResponse, val: { durationMs?: number; err?: unknown }) => {
    const r = req as Request;
    return {
      requestId: r.id,
      method: r.method,
      // The template when an operation matched; the path itself only when none did.
      route: r.operation?.path,
      ...(!r.operation && { path: r.path }),
      operationId: r.operation?.id,
      status: res.statusCode,
      durationMs: val.durationMs,
      accountId: r.principal?.accountId,
      // Named as OpenTelemetry's log data model names them, which log stores link to traces.
      ...(r.trace && { trace_id: r.trace.traceId, span_id: r.trace.spanId }),
      ...(val.err !== undefined && { err: val.err }),
    };
  };
  const middleware = pinoHttp<IncomingMessage, ServerResponse>({
    // The line's fields are fixed and hold no secret; only an error may carry anything.
    // Redacting by exact paths under `err` keeps that guard without the service logger's
    // wildcard paths, which run a redaction pass over every key of every line.
    logger: log.child({}, { redact: { paths: accessLineRedaction, censor: '[redacted]' } }),
    quietResLogger: true,
    genReqId: (_req, res) => String(res.getHeader('X-Request-Id')),
    autoLogging: { ignore: (req) => isProbe((req as Request).path) },
    // A 503 is a designed refusal (the outage behind it is logged once, where it begins).
    customLogLevel: (_req, res, err) => (res.statusCode === 503 ? 'warn' : err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
    customAttributeKeys: { responseTime: 'durationMs' },
    // The line above says what is needed; no headers, so no secrets.
    serializers: { req: () => undefined, res: () => undefined, err: pino.stdSerializers.err },
    // Ours alone: wrapped, pino-std-serializers would still build a copy of every request.
    wrapSerializers: false,
    customSuccessObject: line,
    customErrorObject: (req, res, _err, val: { durationMs?: number }) => line(req, res, val),
  });
  return middleware;
}
