// pino JSON lines on stderr, and one access line per request. Nothing here
// logs request headers: secrets never reach a line, and the redaction below is the
// second guard for fields a caller might pass by mistake.
import type { RequestHandler } from 'express';
import pino, { type DestinationStream } from 'pino';
import '../pipeline/request-context';

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

/**
 * Standard error, written once 2 KiB of lines have gathered or 100 ms have passed rather
 * than a write a line, which a request paid for when a turn of the event loop answered
 * only one (docs/operations.md, "Running notes"). Each write is whole lines and at most
 * 4 KiB (a longer line goes alone), which a pipe takes whole: the lines of the processes
 * of `WEB_CONCURRENCY` on one pipe do not interleave. pino writes what is left when the process exits, and
 * `stop` in server/main.ts flushes it before that.
 */
const stderrLines = () => pino.destination({ dest: 2, minLength: 2048, maxWrite: 4096, periodicFlush: 100 });

/** The service's logger; tests pass a destination to read what was written. */
export function createLogger(level: pino.LevelWithSilent, destination: DestinationStream = stderrLines()): pino.Logger {
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

/** Probes are polled by orchestrators every few seconds; an access line (or a span) each is noise. */
const probes = new Set(['/healthz', '/readyz']);
export const isProbe = (path: string) => probes.has(path);

/**
 * One access line per request when the response is finished: request id, method, route
 * template, operationId, status, duration and account. Placed after the per-address
 * rate limit, so an outsider cannot make lines faster than that limit allows.
 */
export function accessLog(log: pino.Logger): RequestHandler {
  // The line's fields are fixed and none is a secret, so it skips the redaction pass the
  // service logger runs over every key of every line.
  const access = log.child({}, { redact: { paths: [], censor: '[redacted]' } });
  return (req, res, next) => {
    if (isProbe(req.path)) return next();
    const startedAt = Date.now();
    // Everything is read once the response is done (or its client gone), when the route
    // and the account are known.
    res.once('close', () => {
      const status = res.statusCode;
      // A 503 is a designed refusal (the outage behind it is logged once, where it begins),
      // and a 501 a designed answer (a stub, or a mock asked for what it does not document).
      const level = status === 503 ? 'warn' : status >= 500 && status !== 501 ? 'error' : 'info';
      access[level](
        {
          requestId: req.id,
          method: req.method,
          // The template when an operation matched; the path itself only when none did.
          route: req.operation?.path,
          ...(!req.operation && { path: req.path }),
          operationId: req.operation?.id,
          status,
          durationMs: Date.now() - startedAt,
          accountId: req.principal?.accountId,
          // Named as OpenTelemetry's log data model names them, which log stores link to traces.
          ...(req.trace && { trace_id: req.trace.traceId, span_id: req.trace.spanId }),
        },
        'request',
      );
    });
    next();
  };
}
