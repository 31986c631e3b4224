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
 * The log's file descriptor (standard error for the service), written once 2 KiB of lines
 * have gathered or 100 ms have passed rather than a write a line, which a request paid for
 * when a turn of the event loop answered only one (docs/operations.md, "Running notes").
 * Each write is whole lines and at most 4 KiB (a longer line goes alone), which a pipe
 * takes whole: the lines of the processes of `WEB_CONCURRENCY` on one pipe do not
 * interleave. The writes are made in the turn that gathered the lines (`sync`), as Node
 * writes its own stderr to files and pipes: written from the thread pool, one chunk went
 * out a turn, less than a busy turn gathers, and the lines waiting in memory grew without
 * bound. A reader that stops reading holds the service up instead.
 * What is left is written when the process exits (`stop` in server/main.ts flushes it before).
 */
export const logLines = (fd: number) => pino.destination({ dest: fd, minLength: 2048, maxWrite: 4096, periodicFlush: 100, sync: true });

let stderr: ReturnType<typeof logLines> | undefined;
/** The process's one writer of stderr, for every logger in it; what it holds is written as the process exits. */
const stderrLines = () => {
  if (!stderr) {
    const lines = (stderr = logLines(2));
    process.once('exit', () => {
      try {
        lines.flushSync();
      } catch {
        // A write that fails as the process exits has no one left to tell.
      }
    });
  }
  return stderr;
};

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
