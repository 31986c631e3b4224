// Reads openapi.yaml into the model the suite works from: operations with their
// parameters, bodies, documented responses and security, plus the "producers" that
// chain them (which create operation makes the id a path parameter or body field needs).
// Everything here is derived from the document; nothing names an operation of this
// project, so an operation added to the spec is exercised without editing the suite.
// The suite is a package of its own (package.json here): it reads the document itself and
// imports nothing of the service.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

export type Schema = { [key: string]: unknown };
export type Document = Schema & { paths: Record<string, Record<string, unknown>> };

export const methods = ['get', 'put', 'post', 'delete', 'patch'] as const;
export type Method = (typeof methods)[number];

export interface Param {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: Schema;
  /** Arrays in the query: `a=1&a=2` (explode) or `a=1,2`. */
  explode: boolean;
  /** Described as opaque (a cursor): only the server's own values are valid, never generated ones. */
  opaque: boolean;
}

export interface ResponseSpec {
  status: string;
  /** JSON pointer (into the document) of the body schema, when a JSON body is documented. */
  schemaPointer?: string;
  schema?: Schema;
  headers: string[];
  /** The headers marked `required: true`: every such answer carries them. */
  requiredHeaders: string[];
}

export interface Operation {
  id: string;
  method: Method;
  path: string;
  params: Param[];
  body?: { required: boolean; schema: Schema };
  responses: Map<string, ResponseSpec>;
  security: 'none' | 'bearer' | 'basic';
  /** `x-required-role` of the operation, when it names one. */
  role?: string;
  deprecated: boolean;
}

/** A create operation (POST to a collection answering 201/202 with an `id`) and what it makes. */
export interface Producer {
  op: Operation;
  /** The path parameter the created id fills: `petId` for `POST /pets` (`/pets/{petId}`). */
  param: string;
  /** The item path: `/pets/{petId}`. */
  itemPath: string;
  /** GET on the collection, to find existing resources when the suite may not create any. */
  list?: Operation;
}

export interface Contract {
  doc: Document;
  operations: Operation[];
  paths: string[];
  /** Keyed by parameter name (path parameter and body field alike). */
  producers: Map<string, Producer>;
  /** The body schema shared by the documented error responses. */
  errorPointer?: string;
  find(method: string, path: string): Operation | undefined;
  /** Follows `$ref`s to the schema they name. */
  deref: (schema: unknown) => Schema;
}

/**
 * The contract the suite checks by default: the project's openapi.yaml, one folder up from
 * the sources (contract/) and from the package's bundle (dist/, beside the copy `npm pack`
 * puts in the package).
 */
export const defaultSpecPath = join(__dirname, '..', 'openapi.yaml');

const escape = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');
const unescape = (segment: string) => segment.replace(/~1/g, '/').replace(/~0/g, '~');

export function loadContract(path = defaultSpecPath): Contract {
  return buildContract(parse(readFileSync(path, 'utf8')) as Document);
}

export function buildContract(doc: Document): Contract {
  const at = (pointer: string): unknown => {
    let node: unknown = doc;
    for (const segment of pointer.replace(/^#\/?/, '').split('/').filter(Boolean)) {
      node = (node as Record<string, unknown> | undefined)?.[unescape(segment)];
    }
    if (node === undefined) throw new Error(`openapi.yaml: ${pointer} does not exist`);
    return node;
  };
  /** Follows a chain of `$ref`s and returns the object with its pointer. */
  const follow = (value: unknown, pointer: string): { value: Schema; pointer: string } => {
    let current = value as Schema;
    let where = pointer;
    for (let hops = 0; typeof current.$ref === 'string'; hops++) {
      if (hops > 32) throw new Error(`openapi.yaml: $ref loop at ${pointer}`);
      where = current.$ref;
      current = at(where) as Schema;
    }
    return { value: current, pointer: where };
  };
  const deref = (schema: unknown): Schema => follow(schema ?? {}, '#').value;

  const schemes = ((doc.components as Schema | undefined)?.securitySchemes ?? {}) as Record<string, Schema>;
  /** The first scheme of the first requirement: none (`security: []`), HTTP Basic, or a bearer key. */
  const securityOf = (requirements: unknown): Operation['security'] => {
    for (const requirement of (requirements ?? []) as Schema[]) {
      for (const name of Object.keys(requirement)) {
        const scheme = schemes[name] ? deref(schemes[name]) : undefined;
        return scheme?.type === 'http' && String(scheme.scheme).toLowerCase() === 'basic' ? 'basic' : 'bearer';
      }
    }
    return 'none';
  };

  const operations: Operation[] = [];
  for (const path of Object.keys(doc.paths)) {
    const item = follow(doc.paths[path], `#/paths/${escape(path)}`).value;
    // The suite speaks the five methods a JSON API declares; anything else is not probed.
    for (const method of methods) {
      const raw = item[method] as Schema | undefined;
      if (!raw) continue;
      const id = typeof raw.operationId === 'string' ? raw.operationId : `${method.toUpperCase()} ${path}`;
      const shared = (item.parameters ?? []) as unknown[];
      const base = `#/paths/${escape(path)}/${method}`;
      const byKey = new Map<string, Param>();
      for (const p of [...shared, ...((raw.parameters ?? []) as unknown[])]) {
        const param = deref(p);
        if (param.in === 'cookie') continue;
        const explode = param.explode === undefined ? (param.style ?? 'form') === 'form' : param.explode === true;
        byKey.set(`${String(param.in)}:${String(param.name)}`, {
          name: String(param.name),
          in: param.in as Param['in'],
          required: param.required === true,
          schema: (param.schema ?? {}) as Schema,
          explode,
          opaque: /\bopaque\b/i.test(String(param.description ?? '')),
        });
      }
      let body: Operation['body'];
      if (raw.requestBody) {
        const rb = deref(raw.requestBody);
        const json = (rb.content as Record<string, Schema> | undefined)?.['application/json'];
        if (json) body = { required: rb.required === true, schema: (json.schema ?? {}) as Schema };
      }
      const responses = new Map<string, ResponseSpec>();
      for (const [status, rawResponse] of Object.entries((raw.responses ?? {}) as Record<string, unknown>)) {
        const { value: response, pointer } = follow(rawResponse, `${base}/responses/${escape(status)}`);
        responses.set(status, responseSpec(status, response, pointer, deref));
      }
      operations.push({
        id,
        method,
        path,
        params: [...byKey.values()],
        body,
        responses,
        security: securityOf(raw.security ?? doc.security),
        role: typeof raw['x-required-role'] === 'string' ? raw['x-required-role'] : undefined,
        deprecated: raw.deprecated === true,
      });
    }
  }

  const find = (method: string, path: string) => operations.find((o) => o.method === method && o.path === path);

  // `/pets/{petId}` is made by `POST /pets` when that POST answers an object with an id.
  const producers = new Map<string, Producer>();
  for (const path of Object.keys(doc.paths)) {
    const match = /^(.*)\/\{([^}/]+)\}$/.exec(path);
    if (!match?.[1] || !match[2]) continue;
    const create = find('post', match[1]);
    if (!create || !createdSchema(create, deref)) continue;
    if (!producers.has(match[2])) {
      producers.set(match[2], { op: create, param: match[2], itemPath: path, list: find('get', match[1]) });
    }
  }

  // The error schema: the one most 4xx responses document.
  const counts = new Map<string, number>();
  for (const op of operations) {
    for (const r of op.responses.values()) {
      if (!r.status.startsWith('4') || !r.schema) continue;
      const key = typeof r.schema.$ref === 'string' ? r.schema.$ref : r.schemaPointer!;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  const errorPointer = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];

  return { doc, operations, paths: Object.keys(doc.paths), producers, errorPointer, find, deref };
}

function responseSpec(status: string, response: Schema, pointer: string, deref: (s: unknown) => Schema): ResponseSpec {
  const content = (response.content ?? {}) as Record<string, Schema>;
  const jsonType = Object.keys(content).find((t) => /^application\/(.+\+)?json$/i.test(t));
  const json = jsonType ? content[jsonType] : undefined;
  return {
    status,
    schema: json?.schema as Schema | undefined,
    schemaPointer: json?.schema ? `${pointer}/content/${escape(jsonType!)}/schema` : undefined,
    headers: Object.keys(response.headers ?? {}),
    requiredHeaders: Object.entries((response.headers ?? {}) as Record<string, unknown>)
      .filter(([, header]) => deref(header).required === true)
      .map(([name]) => name),
  };
}

/** The 201/202 body schema of a create operation, when it is an object with an `id`. */
function createdSchema(op: Operation, deref: (s: unknown) => Schema): Schema | undefined {
  for (const status of ['201', '202']) {
    const schema = op.responses.get(status)?.schema;
    if (!schema) continue;
    const resolved = deref(schema);
    if ((resolved.properties as Schema | undefined)?.id) return resolved;
  }
  return undefined;
}

/** Success statuses documented for an operation. */
export const successStatuses = (op: Operation) => [...op.responses.keys()].filter((s) => /^2/.test(s));

/** Whether a status is documented, with `4XX`-style ranges and `default`. */
export function documented(op: Operation, status: number): ResponseSpec | undefined {
  return op.responses.get(String(status)) ?? op.responses.get(`${String(status)[0]}XX`) ?? op.responses.get('default');
}
