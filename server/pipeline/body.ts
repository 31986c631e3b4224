// Reads every request body once, with the configured size limit, whatever its content type, and
// parses JSON itself so that malformed, too-deep or imprecise JSON is refused before
// the validator sees a silently rounded value.
import express, { type NextFunction, type Request, type RequestHandler } from 'express';
import { fullFormats } from 'ajv-formats/dist/formats';
import { ApiError } from '../../domain/errors';
import { textProblem, type TextProblem } from '../../domain/text';

/** JSON nested deeper than this is refused (openapi.yaml, info: x-limits.jsonDepth). */
export const maxJsonDepth = 32;
const jsonMediaType = /^application\/json\s*(?:;|$)/i;
const charsetParam = /;\s*charset\s*=\s*("?)([^";\s]*)\1/i;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The first string of a body (values and keys, at any depth) that no engine would store
 * as it is (domain/text.ts): a lone surrogate, or U+0000, refused on every engine so that
 * a client meets one behaviour (openapi.yaml, "Errors").
 */
function bodyTextProblem(value: unknown): TextProblem | undefined {
  if (typeof value === 'string') return textProblem(value);
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, v] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
    const problem = (typeof key === 'string' ? textProblem(key) : undefined) ?? bodyTextProblem(v);
    if (problem) return problem;
  }
  return undefined;
}

const plainInteger = /^-?[0-9]+$/;
const numberToken = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/** The double `value` as an exact fraction: mantissa * 2^exponent. */
function binaryParts(value: number): { mantissa: bigint; exponent: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(value));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return biased === 0 ? { mantissa: fraction, exponent: -1074 } : { mantissa: fraction | (1n << 52n), exponent: biased - 1075 };
}

/**
 * Why a JSON number token is refused, or null: JSON.parse rounds silently, so a token
 * is taken only when the double it becomes is exactly the number written
 * (`1.9999999999999999` would become 2), and integers only within +-(2^53-1).
 */
function inexactNumber(token: string): string | null {
  const value = Number(token);
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return `The number ${token} is beyond 2^53-1 and cannot be held exactly`;
  }
  // Most tokens are integers such as an id or a quantity: one written without fraction or
  // exponent, within 2^53-1, is a double exactly, so the fraction arithmetic below is spared.
  if (Number.isSafeInteger(value) && plainInteger.test(token)) return null;
  const parts = numberToken.exec(token);
  if (!parts) return `The number ${token} is not a JSON number`;
  const [, , whole = '', decimals = '', exp = '0'] = parts;
  const digits = BigInt(whole + decimals);
  if (digits === 0n) return null;
  const inexact = `The number ${token} cannot be held exactly; send it as written by its exact value`;
  // Infinity and underflow to 0 are the far ends of inexact; checked first so that no
  // power below is computed for an exponent like 1e99999999.
  if (value === 0 || !Number.isFinite(value)) return inexact;
  const exponent10 = Number(exp) - decimals.length;
  const { mantissa, exponent } = binaryParts(value);
  // digits * 10^exponent10 === mantissa * 2^exponent, cross-multiplied into integers.
  const left = digits * 10n ** BigInt(Math.max(exponent10, 0)) * 2n ** BigInt(Math.max(-exponent, 0));
  const right = mantissa * 2n ** BigInt(Math.max(exponent, 0)) * 10n ** BigInt(Math.max(-exponent10, 0));
  return left === right ? null : inexact;
}

type Refusal = { code: 'invalid_json' | 'validation_failed'; message: string };

/** A string token's value: its text as is, unless it holds an escape (`"\\u0061"` is `a`). */
const stringValue = (text: string, start: number, end: number): string => {
  const raw = text.slice(start + 1, end);
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end + 1)) as string) : raw;
};

/**
 * Walks valid JSON text once. JSON.parse has already accepted it, so tokens are well
 * formed. Returns why the text is refused, or null: nesting, inexact numbers, and a
 * member name given twice in one object (I-JSON, RFC 7493: JSON.parse would silently
 * keep the last one, so two readers of the body could disagree on its meaning).
 */
function checkJsonText(text: string): Refusal | null {
  // The member names seen in each open object (null for an array, or an object with none yet).
  const names: Array<Set<string> | null> = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (names.length === 0) continue;
      // A member name is a string followed by a colon.
      let j = i + 1;
      while (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r') j++;
      if (text[j] !== ':') continue;
      const name = stringValue(text, start, i);
      const seen = (names[names.length - 1] ??= new Set());
      if (seen.has(name))
        return {
          code: 'invalid_json',
          message: `The request body names the member ${JSON.stringify(name.slice(0, 64))} twice in one object`,
        };
      seen.add(name);
    } else if (c === '{' || c === '[') {
      if (names.push(null) > maxJsonDepth)
        return { code: 'validation_failed', message: `The request body is nested deeper than ${maxJsonDepth} levels` };
    } else if (c === '}' || c === ']') {
      names.pop();
    } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9eE+.-]/.test(text[j] as string)) j++;
      const token = text.slice(i, j);
      i = j - 1;
      const problem = inexactNumber(token);
      if (problem) return { code: 'validation_failed', message: problem };
    }
  }
  return null;
}

const rfc3339DateTime = fullFormats['date-time'] as { validate: (value: string) => boolean };

/**
 * The `date-time` format the validator applies: RFC 3339, and a moment a JavaScript
 * Date can hold. RFC 3339 allows a leap second (23:59:60), which Date cannot represent,
 * so such a value is a 400 here rather than a failure further in; so is a moment outside
 * the years 0000-9999 once normalised to UTC.
 */
export function isStorableDateTime(value: string): boolean {
  if (!rfc3339DateTime.validate(value)) return false;
  const ms = Date.parse(value);
  // Stored and answered in UTC (toISOString), which must itself be RFC 3339: an
  // offset can push 9999-12-31 into year 10000, which no response can carry.
  return !Number.isNaN(ms) && rfc3339DateTime.validate(new Date(ms).toISOString());
}

const tooLarge = (limitBytes: number) => new ApiError('payload_too_large', `The request body is larger than ${limitBytes} bytes`, 413);

/**
 * A body whose declared length is over the limit is refused with the framing, before
 * routing (openapi.yaml, info: "Order of checks"); one that grows past it while read
 * (chunked) is refused by the reader. The connection closes rather than read what is left.
 */
export function declaredTooLarge(limitBytes: number): RequestHandler {
  return (req, res, next) => {
    const declared = req.headers['content-length'];
    if (declared === undefined || Number(declared) <= limitBytes) return next();
    res.setHeader('Connection', 'close');
    next(tooLarge(limitBytes));
  };
}

/** body-parser's read errors, classified where they happen. */
function readError(err: { type?: string; message?: string }, limitBytes: number): ApiError {
  if (err.type === 'entity.too.large') return tooLarge(limitBytes);
  if (err.type === 'encoding.unsupported') {
    return new ApiError('invalid_content_type', 'The request body uses a Content-Encoding this service does not accept', 400);
  }
  return new ApiError('invalid_json', 'The request body could not be read', 400);
}

/**
 * A body of a declared length within the limit and without Content-Encoding, read straight
 * off the request: Node's parser delivers exactly the declared bytes, so there is nothing
 * to decode and no limit to count while reading. body-parser's general reader, kept for
 * the rest, costs more a body for that work (docs/performance.md, "The request path").
 */
function readDeclared(req: Request, next: NextFunction): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  };
  const settle = (error?: ApiError) => {
    if (settled) return;
    settled = true;
    req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    if (!error) req.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    next(error);
  };
  const onEnd = () => settle();
  // The client went before its body ended (or a timeout answered it, and closed): nothing to parse.
  const onClose = () => settle(new ApiError('invalid_json', 'The request body could not be read', 400));
  const onError = onClose;
  req.on('data', onData).once('end', onEnd).once('error', onError).once('close', onClose);
}

export function bodyReader(limitBytes: number): RequestHandler[] {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  const readRaw: RequestHandler = (req, res, next) => {
    const declared = req.headers['content-length'];
    if (declared !== undefined && req.headers['content-encoding'] === undefined && Number(declared) <= limitBytes) {
      return readDeclared(req, next);
    }
    raw(req, res, (err?: unknown) => next(err ? readError(err, limitBytes) : undefined));
  };
  const parse: RequestHandler = (req, _res, next) => {
    const raw: unknown = req.body;
    if (!Buffer.isBuffer(raw) || raw.length === 0) {
      req.body = undefined;
      return next();
    }
    // Every body this service takes is JSON: any other body is refused whichever
    // operation it was sent to, including those whose body is optional.
    if (!jsonMediaType.test(req.headers['content-type'] ?? '')) {
      return next(new ApiError('invalid_content_type', 'The request body must be sent with Content-Type: application/json', 400));
    }
    const charset = charsetParam.exec(req.headers['content-type'] ?? '')?.[2];
    if (charset !== undefined && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
      return next(new ApiError('invalid_content_type', `The request body must be UTF-8; charset=${charset} is not accepted`, 400));
    }
    let text: string;
    try {
      // fatal: invalid bytes are refused, not replaced with U+FFFD; a leading BOM is dropped.
      text = utf8.decode(raw);
    } catch {
      return next(new ApiError('invalid_json', 'The request body is not valid UTF-8', 400));
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (error) {
      const reason = error instanceof Error ? error.message : 'malformed';
      return next(new ApiError('invalid_json', `The request body is not valid JSON: ${reason}`, 400));
    }
    const problem = checkJsonText(text);
    if (problem) return next(new ApiError(problem.code, problem.message, 400));
    // JSON.parse turns a `\ud800` escape into a lone surrogate, which is no character.
    const unfit = bodyTextProblem(body);
    if (unfit === 'surrogate') {
      return next(
        new ApiError('invalid_json', 'The request body holds a lone surrogate (\\uD800-\\uDFFF) escape, which is no character', 400),
      );
    }
    if (unfit === 'nul') return next(new ApiError('validation_failed', 'Strings must not contain the character U+0000', 400));
    req.body = body;
    next();
  };
  return [readRaw, parse];
}
