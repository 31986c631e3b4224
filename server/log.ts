// pino JSON lines on stderr, and one access line per request. Nothing here
// logs request headers: secrets never reach a line, and the redaction below is the
// second guard for fields a caller might pass by mistake.
import type { RequestHandler } from 'express';
import pino, { type DestinationStream } from 'pino';
import type { Config } from './config';
import './request-context';

export type Logger = pino.Logger;

export const redactedPaths = [
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

/** Probes are polled by orchestrators every few seconds; an access line each is noise. */
const probes = new Set(['/healthz', '/readyz']);

/**
 * One access line per request when the response is finished: request id, method, route
 * template, operationId, status, duration and account. Placed after the per-address
 * rate limit, so an outsider cannot make lines faster than that limit allows.
 *
 * The line is the one pino-http wrote here before (same fields, order, levels and
 * message); pino-http also made two child loggers per request and ran its serializers
 * for a request logger nothing here uses, which was about a tenth of the CPU time of a
 * GET under load.
 */
export function accessLog(log: Logger): RequestHandler {
  // A success line holds only the fields below, none of them a redacted name, so it skips
  // the redaction walk (a few per cent of a GET); a failure line, which carries the
  // error, keeps it.
  const successes = log.child({}, { redact: { paths: [], censor: '[redacted]' } });
  return (req, res, next) => {
    const began = Date.now();
    const finished = (err?: unknown) => {
      res.removeListener('close', finished);
      res.removeListener('finish', finished);
      res.removeListener('error', finished);
      const failed = err !== undefined || res.statusCode >= 500;
      const line = {
        requestId: String(res.getHeader('X-Request-Id')),
        method: req.method,
        // The template when an operation matched; the path itself only when none did.
        route: req.openapi?.openApiRoute,
        ...(!req.openapi && { path: req.path }),
        operationId: req.openapi?.schema.operationId,
        status: res.statusCode,
        durationMs: Date.now() - began,
        accountId: req.principal?.accountId,
        ...(failed && { err: err ?? new Error(`failed with status code ${res.statusCode}`) }),
      };
      if (failed) log.error(line, 'request');
      else successes.info(line, 'request');
    };
    // Probes are polled by orchestrators every few seconds; an access line each is noise.
    if (!probes.has(req.path)) {
      res.on('close', finished);
      res.on('finish', finished);
    }
    res.on('error', finished);
    next();
  };
}
