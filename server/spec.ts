// openapi.yaml as the service reads it: loaded (as the JSON `npm run generate` writes),
// its references inlined for the validator, and walked once into the table of operations
// that routing, the handlers' runner, deprecation and metrics read.
import { readFileSync } from 'node:fs';
import { specJsonFile } from './files';

export type OpenApiDocument = {
  paths: Record<string, Record<string, { operationId?: string } & Record<string, unknown>>>;
} & Record<string, unknown>;

/**
 * openapi.yaml as JSON, written by `npm run generate` (and checked by generate:check):
 * parsing the YAML at every start took about a third of it. A fresh copy on each call.
 */
export function loadSpec(): OpenApiDocument {
  return JSON.parse(readFileSync(specJsonFile, 'utf8')) as OpenApiDocument;
}

/**
 * The document with each `$ref` replaced by the object it names, one object however often
 * it is named, as json-schema-ref-parser's dereference leaves it: what
 * express-openapi-validator works on (server/app.ts). openapi.yaml's references all point
 * within it (`#/components/...`), so a walk does it; the parser's own walk, which resolves
 * every reference as a URL, took a tenth of the service's start. The document given is
 * left as it is.
 */
export function dereferenced<T extends object>(doc: T): T {
  const at = (ref: string): unknown => {
    if (!ref.startsWith('#/')) throw new Error(`${ref}: only references within the document are resolved`);
    const found = ref
      .slice(2)
      .split('/')
      .reduce<unknown>(
        (node, key) => (node as Record<string, unknown> | undefined)?.[key.replaceAll('~1', '/').replaceAll('~0', '~')],
        doc,
      );
    if (found === undefined) throw new Error(`${ref}: nothing in the document has this name`);
    return found;
  };
  // By the object copied: a schema named twice is copied once, and a schema that contains
  // itself (through a reference) contains its own copy.
  const copies = new Map<object, unknown>();
  const copy = (node: unknown): unknown => {
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string') return copy(at(ref));
    const done = copies.get(node);
    if (done) return done;
    if (Array.isArray(node)) {
      const items: unknown[] = [];
      copies.set(node, items);
      for (const item of node) items.push(copy(item));
      return items;
    }
    const fields: Record<string, unknown> = {};
    copies.set(node, fields);
    for (const [key, value] of Object.entries(node)) fields[key] = copy(value);
    return fields;
  };
  return copy(doc) as T;
}

/** HTTP methods an OpenAPI 3.0 path item may declare, in the order the table lists them. */
const httpMethods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
type HttpMethod = (typeof httpMethods)[number];

/** One operation of a document as written, with the path item it sits in. */
export interface SpecOperation {
  path: string;
  method: HttpMethod;
  item: Record<string, unknown>;
  operation: Record<string, unknown>;
}

/**
 * The one walk over `paths` x methods, in the document's order: the operation table below
 * is made from it, and the tools that compare or check documents (scripts/) walk with it.
 */
export function* operationsIn(doc: Record<string, unknown>): Generator<SpecOperation> {
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    for (const method of httpMethods) {
      const operation = item[method] as Record<string, unknown> | undefined;
      if (operation) yield { path, method, item, operation };
    }
  }
}

/** What the service and its tools need to know about one operation, read from the spec. */
export interface OperationEntry {
  method: HttpMethod;
  path: string;
  /** The first tag: the handler module (`handlers/<tag>.ts`) that implements it. */
  tag: string;
  /** The credentials it takes: `security: []` is public, an HTTP Basic scheme is basic. */
  security: 'public' | 'bearer' | 'basic';
  /** `x-required-role`, when the operation names one. */
  requiredRole?: string;
  /** Whether it takes a request body (server/pipeline/body.ts reads only these). */
  body?: true;
  /** The deprecation extensions, exactly as written, when the operation is `deprecated`. */
  deprecated?: { since?: string; sunset?: string; successor?: string; declaresGone: boolean };
  /**
   * Its integer parameters, when it has any (server/pipeline/params.ts takes them only as plain
   * decimal text): path parameter names, and query parameters holding one integer or a
   * comma-separated list of them.
   */
  integers?: { path?: readonly string[]; query?: Readonly<Record<string, 'one' | 'list'>> };
}

type Schema = { $ref?: string; type?: string; items?: Schema };
type Parameter = { $ref?: string; name: string; in: string; schema?: Schema };

/** Follows local `$ref`s (`#/components/...`) to the node they name. */
function resolveRef<T extends { $ref?: string }>(doc: Record<string, unknown>, node: T): T {
  let current: T = node;
  for (let hops = 0; current.$ref && hops < 10; hops++) {
    current = current.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((at, key) => (at as Record<string, unknown>)?.[key], doc) as T;
  }
  return current;
}

/** The integer parameters of one operation, its path item's shared ones included. */
function integersOf(doc: Record<string, unknown>, item: Record<string, unknown>, op: Record<string, unknown>): OperationEntry['integers'] {
  const params = [...((item.parameters as Parameter[] | undefined) ?? []), ...((op.parameters as Parameter[] | undefined) ?? [])].map((p) =>
    resolveRef(doc, p),
  );
  const kindOf = (p: Parameter): 'one' | 'list' | undefined => {
    const schema = p.schema ? resolveRef(doc, p.schema) : undefined;
    if (schema?.type === 'integer') return 'one';
    if (schema?.type === 'array' && schema.items && resolveRef(doc, schema.items).type === 'integer') return 'list';
    return undefined;
  };
  const path = params.filter((p) => p.in === 'path' && kindOf(p) === 'one').map((p) => p.name);
  const query = Object.fromEntries(params.flatMap((p) => (p.in === 'query' && kindOf(p) ? [[p.name, kindOf(p)!] as const] : [])));
  const integers: NonNullable<OperationEntry['integers']> = {};
  if (path.length > 0) integers.path = path;
  if (Object.keys(query).length > 0) integers.query = query;
  return integers.path || integers.query ? integers : undefined;
}

/**
 * The table of the document's operations by operationId. `npm run generate` writes it into
 * generated/operations.ts; the server makes it again for the document it serves (a test's
 * variant included).
 */
export function operationsOf(doc: { paths: Record<string, unknown> } & Record<string, unknown>): Record<string, OperationEntry> {
  type Raw = Record<string, unknown>;
  const schemes = ((doc.components as Raw | undefined)?.securitySchemes ?? {}) as Record<string, Raw>;
  const securityOf = (requirements: unknown): OperationEntry['security'] => {
    for (const requirement of (requirements ?? []) as Raw[]) {
      for (const name of Object.keys(requirement)) {
        const scheme = schemes[name];
        if (!scheme) throw new Error(`security names ${name}, which components.securitySchemes does not define`);
        return scheme.type === 'http' && String(scheme.scheme).toLowerCase() === 'basic' ? 'basic' : 'bearer';
      }
    }
    return 'public';
  };
  // A YAML date (2026-01-15) may arrive as a Date; keep the text the spec author wrote.
  const text = (value: unknown) =>
    value === undefined
      ? undefined
      : value instanceof Date
        ? value.toISOString()
        : typeof value === 'string'
          ? value
          : JSON.stringify(value);

  const table: Record<string, OperationEntry> = {};
  for (const { path, method, item, operation: op } of operationsIn(doc)) {
    const name = `${method.toUpperCase()} ${path}`;
    const id = op.operationId;
    if (typeof id !== 'string') throw new Error(`${name} has no operationId`);
    if (table[id]) throw new Error(`operationId ${id} is used twice`);
    const tag = (op.tags as string[] | undefined)?.[0];
    if (!tag) throw new Error(`${id} has no tag: every operation belongs to one handler module`);
    const entry: OperationEntry = { method, path, tag, security: securityOf(op.security ?? doc.security) };
    if (typeof op['x-required-role'] === 'string') entry.requiredRole = op['x-required-role'];
    if (op.requestBody !== undefined) entry.body = true;
    if (op.deprecated === true) {
      // The 410 it answers past its sunset must be in its responses (server/deprecation/headers.ts).
      const declaresGone = Object.hasOwn(op.responses ?? {}, '410');
      const deprecated: NonNullable<OperationEntry['deprecated']> = { declaresGone };
      const since = text(op['x-deprecated-since']);
      const sunset = text(op['x-deprecated-sunset']);
      const successor = text(op['x-successor']);
      if (since !== undefined) deprecated.since = since;
      if (sunset !== undefined) deprecated.sunset = sunset;
      if (successor !== undefined) deprecated.successor = successor;
      entry.deprecated = deprecated;
    }
    const integers = integersOf(doc, item, op);
    if (integers) entry.integers = integers;
    table[id] = entry;
  }
  return table;
}
