// The checks every response goes through. Bodies are validated by this suite's own ajv,
// compiled from the parsed openapi.yaml, never by the server's middleware: a server whose
// validator is off or wrong is still caught.
import type Ajv from 'ajv';
import type { ValidateFunction } from 'ajv';
import { createAjv, toJsonSchema } from './schema';
import type { ReceivedResponse, SentRequest } from './http';
import { documented, type Contract, type Operation, type Schema } from './spec';

/** What the suite meant by a request, beyond "answer as documented". */
export type Expectation =
  /** Input the contract allows; `refused`: a status that would mean its input was refused (400). */
  | { kind: 'valid'; refused?: number }
  /** Input that breaks the contract: never 2xx. */
  | { kind: 'invalid' }
  /** Exactly this status (401 for a malformed Authorization, 413 for a big body, ...). */
  | { kind: 'status'; status: number }
  | { kind: 'not-status'; status: number };

export interface Exchange {
  /** The operation, or a pseudo-operation for undeclared methods and unknown paths. */
  opId: string;
  op?: Operation;
  /** What the request is for: "valid", "field "name" longer than maxLength 100", ... */
  label: string;
  expect: Expectation;
  request: SentRequest;
  response: ReceivedResponse;
  /** For 405 answers: the methods the path declares. */
  allowed?: string[];
  /** Sent to spend a limit on purpose (to see its 429): neither paced nor retried. */
  spending?: boolean;
  failures: string[];
}

const jsonType = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

export class ResponseValidator {
  private readonly ajv: Ajv;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly contract: Contract) {
    this.ajv = createAjv({ allErrors: true });
    this.ajv.addSchema(toJsonSchema(contract.doc) as Schema, 'openapi.json');
  }

  /** Validates a body against the schema at a pointer (`#/components/...`); returns the problems. */
  validate(pointer: string, body: unknown): string[] {
    let fn = this.compiled.get(pointer);
    if (!fn) {
      fn = this.ajv.compile({ $ref: `openapi.json${pointer}` });
      this.compiled.set(pointer, fn);
    }
    if (fn(body)) return [];
    return (fn.errors ?? []).slice(0, 5).map((e) => {
      const where = e.instancePath || '(the body)';
      const detail =
        e.keyword === 'additionalProperties'
          ? ` "${String((e.params as { additionalProperty?: string }).additionalProperty)}"`
          : e.keyword === 'enum'
            ? ` ${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)}`
            : '';
      return `${where} ${e.message ?? 'is not valid'}${detail}`;
    });
  }
}

const describeStatuses = (op: Operation) => [...op.responses.keys()].join(', ');

/** Runs every check on one exchange and returns what failed, in words. */
export function check(exchange: Omit<Exchange, 'failures'>, contract: Contract, validator: ResponseValidator): string[] {
  const { op, response, expect } = exchange;
  const failures: string[] = [];
  const status = response.status;

  if (status >= 500) failures.push(`answered ${status}: a 5xx is never an acceptable answer to what the suite sends`);

  // The documented response: the operation's, or for the pseudo-operations the error shape.
  let schemaPointer: string | undefined;
  let documentsBody = false;
  if (op) {
    const spec = documented(op, status);
    if (!spec) {
      failures.push(`status ${status} is not documented for ${op.id} (documented: ${describeStatuses(op)})`);
    } else {
      schemaPointer = spec.schemaPointer;
      documentsBody = spec.schemaPointer !== undefined;
    }
  } else if (contract.errorPointer) {
    schemaPointer = contract.errorPointer;
    documentsBody = true;
  }

  if (documentsBody && status !== 204 && status !== 304) {
    const type = response.headers['content-type'] ?? '';
    if (!jsonType.test(type)) {
      failures.push(`Content-Type is ${type ? `"${type}"` : 'missing'}, but the documented ${status} body is JSON`);
    } else if (response.json === undefined) {
      failures.push(`the body is not valid JSON: ${JSON.stringify(response.text.slice(0, 120))}`);
    } else if (schemaPointer) {
      const problems = validator.validate(schemaPointer, response.json);
      if (problems.length > 0) {
        failures.push(`the body does not match the documented schema (${schemaPointer}): ${problems.join('; ')}`);
      }
    }
  }

  // The Error body carries the HTTP status; any body with a numeric `status` on an error answer.
  const body = response.json as { status?: unknown } | undefined;
  if (status >= 400 && body && typeof body === 'object' && typeof body.status === 'number' && body.status !== status) {
    failures.push(`the Error body says status ${body.status}, the HTTP status is ${status}`);
  }

  switch (expect.kind) {
    case 'invalid':
      if (status >= 200 && status < 300) failures.push(`invalid input (${exchange.label}) was accepted with ${status}`);
      break;
    case 'status':
      if (status !== expect.status) failures.push(`expected ${expect.status} for ${exchange.label}, got ${status}`);
      break;
    case 'not-status':
      if (status === expect.status) failures.push(`expected anything but ${expect.status} for ${exchange.label}`);
      break;
    case 'valid':
      if (status === expect.refused) failures.push(`input the contract allows (${exchange.label}) was refused with ${status}`);
      break;
  }

  // Location on a create, where the spec documents it: present, and naming the new resource.
  const spec = op ? documented(op, status) : undefined;
  // The headers the answer declares `required` (X-Request-Id, X-Content-Type-Options, ...) are sent.
  const absent = (spec?.requiredHeaders ?? []).filter((name) => response.headers[name.toLowerCase()] === undefined);
  if (absent.length > 0)
    failures.push(`no ${absent.join(', ')} header on ${status}, though the spec declares ${absent.length === 1 ? 'it' : 'them'} required`);
  if (spec && (status === 201 || status === 202) && spec.headers.some((h) => h.toLowerCase() === 'location')) {
    const location = response.headers.location;
    const id = (body as { id?: unknown } | undefined)?.id;
    if (!location) failures.push(`no Location header on ${status}, though the spec documents one`);
    else if (id !== undefined) {
      const path = new URL(location, 'http://x').pathname;
      if (!path.endsWith(`/${encodeURIComponent(String(id))}`)) {
        failures.push(`Location "${location}" does not name the created resource (id ${JSON.stringify(id)})`);
      } else if (!contract.paths.some((p) => templateMatches(p, path))) {
        failures.push(`Location "${location}" is not a path of the spec`);
      }
    }
  }

  if (status === 405 && exchange.allowed) {
    const allow = (response.headers.allow ?? '')
      .split(',')
      .map((m) => m.trim().toUpperCase())
      .filter(Boolean);
    const missing = exchange.allowed.filter((m) => !allow.includes(m));
    const extra = allow.filter((m) => !exchange.allowed!.includes(m) && m !== 'HEAD' && m !== 'OPTIONS');
    if (!response.headers.allow) failures.push('405 without an Allow header');
    else if (missing.length > 0 || extra.length > 0) {
      failures.push(`Allow "${response.headers.allow}" should list exactly ${exchange.allowed.join(', ')}`);
    }
  }
  return failures;
}

/** Whether a concrete path fits a spec template such as /pets/{petId}. */
export function templateMatches(template: string, path: string): boolean {
  const t = template.split('/');
  const p = path.split('/');
  return t.length === p.length && t.every((seg, i) => /^\{[^}]+\}$/.test(seg) || seg === p[i]);
}
