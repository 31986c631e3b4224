// The one error mapper: whatever fails (validation, auth, routing, body parsing, size or
// rate limits, a bug) leaves as the contract's Error body (ApiError, domain/errors.ts).
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, Request, Response } from 'express';
import type { Logger } from 'pino';
import {
  ApiError,
  apiErrorOf,
  designedServerErrors,
  DomainError,
  StorageUnavailable,
  unavailable,
  type ErrorCode,
} from '../../domain/errors';
import './request-context';

/**
 * The Error as a whole HTTP/1.1 response that ends its connection, for what is answered on
 * the socket before there is a request for Express (Node's parser refusals, the connection
 * caps). A fresh X-Request-Id: the client's own is in bytes that were not parsed.
 */
export function rawErrorResponse(status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}): string {
  const body = JSON.stringify({ code, message, status });
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n`;
  for (const [name, value] of Object.entries({ 'X-Request-Id': randomUUID(), ...headers })) head += `${name}: ${value}\r\n`;
  return `${head}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** The shape of express-openapi-validator's errors. */
interface HttpLikeError {
  status?: number;
  statusCode?: number;
  message?: string;
  headers?: Record<string, string>;
  errors?: Array<{ path?: string; message?: string; errorCode?: string }>;
}

/** Names each offending field: `request/body/name is required`. */
function describeValidation(e: HttpLikeError): string {
  if (!Array.isArray(e.errors) || e.errors.length === 0) return e.message ?? 'The request is not valid';
  return e.errors
    .slice(0, 5)
    .map(({ path = '', message = 'is not valid', errorCode = '' }) => {
      const where = `request${path.startsWith('/') ? path : `/${path}`}`;
      if (errorCode.startsWith('additionalProperties')) return `${where} is not allowed (unknown property)`;
      if (errorCode.startsWith('required')) return `${where} is required`;
      if (message.startsWith('Unknown query parameter')) return `${where} is not allowed (unknown query parameter)`;
      return `${where} ${message}`;
    })
    .join('; ');
}

function toApiError(err: unknown, req: Request): ApiError {
  if (err instanceof ApiError) return err;
  // The validator re-wraps whatever a security handler throws as a bare HTTP error;
  // the handler keeps its own, with code, headers and cause, on the request.
  if (req.authError) return req.authError;
  if (err instanceof DomainError) return apiErrorOf(err);
  if (err instanceof StorageUnavailable) return unavailable(err);
  const e = (typeof err === 'object' && err !== null ? err : {}) as HttpLikeError;
  const status = e.status ?? e.statusCode;
  switch (status) {
    case 400:
      return new ApiError('validation_failed', describeValidation(e), 400);
    case 401:
      return new ApiError('unauthorized', e.message ?? 'Authentication is required', 401);
    case 403:
      return new ApiError('forbidden', e.message ?? 'Forbidden', 403);
    case 404:
      return new ApiError('not_found', `Nothing is at ${req.method} ${req.path}`, 404);
    case 405: {
      const allow = (e.headers?.Allow ?? '')
        .split(',')
        .map((m) => m.trim().toUpperCase())
        .filter(Boolean)
        .join(', ');
      return new ApiError('method_not_allowed', `${req.method} is not allowed on ${req.path}; allowed are ${allow}`, 405, {
        Allow: allow,
      });
    }
    case 412:
      return new ApiError('precondition_failed', 'A precondition of the request (If-Match, If-Unmodified-Since) does not hold', 412);
    case 413:
      return new ApiError('payload_too_large', 'The request body is too large', 413);
    case 416: {
      const range = (err as { headers?: Record<string, string> }).headers?.['Content-Range'];
      return new ApiError('range_not_satisfiable', 'The requested range is outside the file', 416, range ? { 'Content-Range': range } : {});
    }
    // The contract answers a missing or non-JSON content type with 400, never 415.
    case 415:
      return new ApiError('invalid_content_type', 'The request body must be sent with Content-Type: application/json', 400);
    default:
      return new ApiError('internal_error', 'Something went wrong on our side', 500);
  }
}

/** RFC 9110 / RFC 6750: which challenge a 401 carries. */
function challenge(req: Request): string {
  if (req.operation?.security === 'basic') return 'Basic realm="petstore", charset="UTF-8"';
  const sentBearerKey = /^bearer\s+\S/i.test(req.headers.authorization ?? '');
  return sentBearerKey ? 'Bearer realm="petstore", error="invalid_token"' : 'Bearer realm="petstore"';
}

function sendError(res: Response, error: ApiError): void {
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  // Sent with send(), not json(): the response validator hooks json(), and an error
  // about an error must not loop back into this mapper.
  res
    .status(error.status)
    .type('application/json')
    .send(JSON.stringify({ code: error.code, message: error.message, status: error.status }));
}

/** `onError` hears every error answered (server/observability/metrics.ts counts the store's refusals). */
export function errorMapper(log: Logger, onError?: (error: ApiError) => void): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const error = toApiError(err, req);
    onError?.(error);
    // A refusal of the store (StorageUnavailable) or for overload is logged once per
    // outage where it begins, not once per request; 501 `not_implemented` is a designed
    // answer (a stub, or a mock asked for what its operation does not document), and so is
    // 503 `unavailable` from /readyz while the process warms up, drains or lacks its database.
    const designed = err instanceof StorageUnavailable || designedServerErrors.has(error.code);
    if (error.status >= 500 && !designed) {
      const cause: unknown = error.cause ?? err;
      log.error(
        {
          requestId: res.getHeader('X-Request-Id'),
          method: req.method,
          path: req.path,
          err: cause instanceof Error ? cause : new Error(String(cause)),
        },
        'request failed',
      );
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (error.status === 401) res.setHeader('WWW-Authenticate', challenge(req));
    sendError(res, error);
  };
}
