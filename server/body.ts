// Reads every request body once, with the 64 KiB limit, whatever its content type, and
// parses JSON itself so that malformed, too-deep or imprecise JSON is refused before
// the validator sees a silently rounded value.
import express, { type RequestHandler } from 'express';
import { fullFormats } from 'ajv-formats/dist/formats';
import { ApiError } from './errors';

const maxDepth = 32;
const jsonMediaType = /^application\/json\s*(?:;|$)/i;

/**
 * Walks valid JSON text once. JSON.parse has already accepted it, so tokens are
 * well formed. Returns why the text is refused, or null.
 */
export function checkJsonText(text: string): string | null {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '{' || c === '[') {
      if (++depth > maxDepth) return `The request body is nested deeper than ${maxDepth} levels`;
    } else if (c === '}' || c === ']') {
      depth--;
    } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9eE+.-]/.test(text[j] as string)) j++;
      const token = text.slice(i, j);
      i = j - 1;
      const value = Number(token);
      const imprecise = /^-?\d+$/.test(token)
        ? BigInt(token) > BigInt(Number.MAX_SAFE_INTEGER) || BigInt(token) < BigInt(Number.MIN_SAFE_INTEGER)
        : Number.isInteger(value) && !Number.isSafeInteger(value);
      if (imprecise) return `The number ${token} is beyond 2^53-1 and cannot be held exactly`;
    }
  }
  return null;
}

const rfc3339DateTime = fullFormats['date-time'] as { validate: (value: string) => boolean };

/**
 * The `date-time` format the validator applies: RFC 3339, and a moment a JavaScript
 * Date can hold. RFC 3339 allows a leap second (23:59:60), which Date cannot represent,
 * so such a value is a 400 here rather than a failure further in.
 */
export function isStorableDateTime(value: string): boolean {
  return rfc3339DateTime.validate(value) && !Number.isNaN(Date.parse(value));
}

/** body-parser's read errors, classified where they happen. */
function readError(err: { type?: string; message?: string }): ApiError {
  if (err.type === 'entity.too.large') {
    return new ApiError('payload_too_large', 'The request body is larger than 65536 bytes', 413);
  }
  if (err.type === 'encoding.unsupported') {
    return new ApiError('invalid_content_type', 'The request body uses a Content-Encoding this service does not accept', 400);
  }
  return new ApiError('invalid_json', 'The request body could not be read', 400);
}

export function bodyReader(limitBytes: number): RequestHandler[] {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  const readRaw: RequestHandler = (req, res, next) => raw(req, res, (err?: unknown) => next(err ? readError(err) : undefined));
  const parse: RequestHandler = (req, _res, next) => {
    const raw: unknown = req.body;
    if (!Buffer.isBuffer(raw) || raw.length === 0) {
      req.body = undefined;
      return next();
    }
    // Every body this service takes is JSON: any other body is refused whichever
    // operation it was sent to, including those whose body is optional.
    if (!jsonMediaType.test(req.headers['content-type'] ?? '')) {
      return next(
        new ApiError('invalid_content_type', 'The request body must be sent with Content-Type: application/json', 400),
      );
    }
    const text = raw.toString('utf8').replace(/^\uFEFF/, '');
    try {
      req.body = JSON.parse(text) as unknown;
    } catch (error) {
      const reason = error instanceof Error ? error.message : 'malformed';
      return next(new ApiError('invalid_json', `The request body is not valid JSON: ${reason}`, 400));
    }
    const problem = checkJsonText(text);
    next(problem ? new ApiError('validation_failed', problem, 400) : undefined);
  };
  return [readRaw, parse];
}
