// The deprecation lifecycle from the spec, for whichever operations it marks `deprecated`:
// `Deprecation` (RFC 9745) from `x-deprecated-since`, `Sunset` (RFC 8594) from
// `x-deprecated-sunset`, and `Link: <...>; rel="successor-version"` from `x-successor`,
// a path template filled from the request's path parameters; each authenticated call
// counted by account (server/deprecation/call-log.ts); and from the sunset on, 410 `gone`.
// Nothing here names an operation: editing openapi.yaml is the only way to deprecate one.
import type { Request, RequestHandler, Response } from 'express';
import type { DeprecatedCallLog } from './call-log';
import { ApiError } from '../../domain/errors';
import type { OperationEntry } from '../spec';

interface DeprecatedOperation {
  operationId: string;
  name: string;
  deprecation: string;
  sunset?: string;
  /** The sunset in ms since the epoch: from then on, 410. */
  sunsetAt?: number;
  /** The successor's path for this request's path parameters (in the order the path has them). */
  successor?: (values: string[]) => string;
}

/**
 * Compiles `x-successor` once: its literal parts, and for each `{name}` the index of that
 * parameter in the deprecated path, filled (percent-encoded) per request.
 */
function successorTemplate(successor: string, params: string[], name: string): (values: string[]) => string {
  const parts = successor.split(/\{(\w+)\}/);
  const unknown = parts.filter((part, i) => i % 2 === 1 && !params.includes(part));
  if (unknown.length > 0) throw new Error(`${name}: x-successor uses {${unknown.join('}, {')}}, not a path parameter`);
  const slots = parts.map((part, i) => (i % 2 === 1 ? params.indexOf(part) : -1));
  return (values) => parts.map((part, i) => (slots[i] === -1 ? part : encodeURIComponent(values[slots[i] as number] ?? ''))).join('');
}

/** A `YYYY-MM-DD` (midnight UTC) or a full date-time, as the spec writes it. */
function parseDate(value: string, where: string): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new Error(`${where} is not a date: ${String(value)}`);
  return date;
}

/** Reads the deprecated operations once, at start-up; a half-described one stops start-up. */
function deprecatedOperations(operations: Record<string, OperationEntry>): DeprecatedOperation[] {
  const found: DeprecatedOperation[] = [];
  for (const [operationId, { method, path, deprecated }] of Object.entries(operations)) {
    if (!deprecated) continue;
    const name = `${method.toUpperCase()} ${path}`;
    if (deprecated.since === undefined) {
      throw new Error(`${name} is deprecated but has no x-deprecated-since (RFC 9745 needs the date)`);
    }
    if (deprecated.sunset !== undefined && !deprecated.declaresGone) {
      throw new Error(`${name} has an x-deprecated-sunset but does not declare the 410 it answers after it`);
    }
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
    const { successor } = deprecated;
    const sunset = deprecated.sunset === undefined ? undefined : parseDate(deprecated.sunset, `${name} x-deprecated-sunset`);
    found.push({
      operationId,
      name,
      deprecation: `@${Math.floor(parseDate(deprecated.since, `${name} x-deprecated-since`).getTime() / 1000)}`,
      ...(sunset && { sunset: sunset.toUTCString(), sunsetAt: sunset.getTime() }),
      ...(successor !== undefined && { successor: successorTemplate(successor, params, name) }),
    });
  }
  return found;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function addLink(res: Response, link: string): void {
  const current = res.getHeader('Link');
  const existing = current === undefined ? [] : Array.isArray(current) ? current : [String(current)];
  res.setHeader('Link', [...existing, link].join(', '));
}

/** What a deprecated operation's response carries until its status line goes out. */
interface Pending {
  op: DeprecatedOperation;
  req: Request;
  writeHead: Response['writeHead'];
}
const pending = Symbol('deprecation');
type Deprecated = Response & { [pending]: Pending };

/**
 * The `writeHead` of every deprecated operation's response: one function, its request's
 * state kept on the response. A function made for each response and stored on it kept
 * the requests it was made for alive through young collections while V8 ran the code
 * unoptimised, the first seconds of a new instance's load (docs/performance.md, "Warm
 * before ready").
 */
function writeHeadDeprecated(this: Deprecated, ...args: Parameters<Response['writeHead']>): Response {
  const { op, req, writeHead } = this[pending];
  this.setHeader('Deprecation', op.deprecation);
  if (op.sunset) this.setHeader('Sunset', op.sunset);
  const target = op.successor?.(valuesOf(req));
  if (target !== undefined) addLink(this, `<${target}>; rel="successor-version"`);
  return writeHead.apply(this, args);
}

/** The request's path parameters, as the successor's template takes them. */
const valuesOf = (req: Request) => (req.pathValues ?? []).map(decode);

/**
 * What a deprecated operation's chain runs (server/app.ts); nothing for the others.
 * `headers` adds the headers to every response, errors included (a 401 or a 429 is still
 * an answer from a deprecated endpoint), and counts the call once its caller is known.
 * They are written just before the status line goes out, so a handler's own `Link` is
 * kept beside the successor's. `sunset` answers 410 `gone` from the sunset on; it is
 * placed after the access log and the per-address limit.
 */
export interface Deprecation {
  headers: RequestHandler;
  sunset: RequestHandler;
}

export function createDeprecation(
  table: Record<string, OperationEntry>,
  { now = Date.now, calls }: { now?: () => number; calls: DeprecatedCallLog },
): (operationId: string) => Deprecation | undefined {
  const byId = new Map(deprecatedOperations(table).map((op) => [op.operationId, op]));

  return (operationId) => {
    const op = byId.get(operationId);
    if (!op) return undefined;
    const headers: RequestHandler = (req, res, next) => {
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called with apply(this) by writeHeadDeprecated
      (res as Deprecated)[pending] = { op, req, writeHead: res.writeHead };
      res.writeHead = writeHeadDeprecated as Response['writeHead'];
      // Whatever the answer, a call by a known account counts: it still depends on the operation.
      res.once('finish', () => {
        if (req.principal) calls.add(op.operationId, req.principal.accountId, now());
      });
      next();
    };
    const sunset: RequestHandler = (req, _res, next) => {
      if (op.sunsetAt === undefined || now() < op.sunsetAt) return next();
      const target = op.successor?.(valuesOf(req));
      const instead = target === undefined ? '' : `; use ${target}`;
      next(new ApiError('gone', `${op.name} was retired on ${op.sunset}${instead}`, 410));
    };
    return { headers, sunset };
  };
}
