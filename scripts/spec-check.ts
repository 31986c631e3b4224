// `npm run generate` checks openapi.yaml before it writes anything, naming what is wrong:
// against the OpenAPI schema of its version (a document that is not valid OpenAPI never
// reaches generated/), and every example against its schema, with the service's own
// validator settings (server/pipeline/schemas.ts): an example that the service would
// refuse, or never send, fails here rather than misleading a consumer or the mock. The
// service does not check the document again at each start: that compiles the whole
// OpenAPI meta-schema, about a fifth of a start.
import type { ValidateFunction } from 'ajv';
import { OpenAPISchemaValidator } from 'express-openapi-validator/dist/framework/openapi.schema.validator';
import { describeErrors, schemaChecks } from '../server/pipeline/schemas';
import { dereferenced, operationsIn, type OpenApiDocument } from '../server/spec';

/** Throws, naming what is wrong, when `spec` breaks the OpenAPI schema of its version. */
export function checkSpec(spec: Record<string, unknown>): void {
  const validator = new OpenAPISchemaValidator({ version: String(spec.openapi), validateApiSpec: true });
  const errors = validator.validate(structuredClone(spec) as never).errors ?? [];
  if (errors.length > 0) {
    const list = errors.slice(0, 10).map((e) => `  ${e.instancePath || '/'}: ${e.message ?? 'invalid'}`);
    throw new Error(`The OpenAPI document is not valid OpenAPI ${String(spec.openapi)}:\n${list.join('\n')}`);
  }
}

type Node = Record<string, unknown>;
type Media = { schema?: Node; example?: unknown; examples?: Record<string, { value?: unknown }> };

/** A media type's examples as [label, value]: `example`, or each named one as `example "name"`. */
function examplesOf(media: Media): Array<[string, unknown]> {
  const named = Object.entries(media.examples ?? {})
    .filter(([, e]) => e.value !== undefined)
    .map(([name, e]): [string, unknown] => [`example "${name}"`, e.value]);
  return media.example === undefined ? named : [['example', media.example], ...named];
}

/**
 * Every example of `spec` that does not fit its schema, one line each, naming where it is:
 * request bodies' and responses' examples (`example` and named `examples`) checked as the
 * service checks a request or a response, and the `example` of each schema in
 * `components.schemas` (and inside them), which the mock's answers made from a schema use.
 */
export function exampleProblems(spec: Record<string, unknown>): string[] {
  const doc = dereferenced(spec) as OpenApiDocument;
  const checks = schemaChecks(doc);
  const problems: string[] = [];
  const fit = (check: ValidateFunction, value: unknown, where: string) => {
    // The request checks fill in defaults: the document's value stays as written.
    if (!check(structuredClone(value))) problems.push(`${where}: ${describeErrors(check)}`);
  };
  // A shared request body or response (components) is checked once, under the first
  // operation using it, and says how many use it.
  const media = new Map<Media, { check: 'request' | 'response'; where: string; uses: number }>();
  const add = (content: Record<string, Media> | undefined, check: 'request' | 'response', where: string) => {
    for (const m of Object.values(content ?? {})) {
      const seen = media.get(m);
      if (seen) seen.uses++;
      else if (m.schema) media.set(m, { check, where, uses: 1 });
    }
  };
  for (const { path, method, operation } of operationsIn(doc)) {
    const name = `${String(operation.operationId)} (${method.toUpperCase()} ${path})`;
    add((operation.requestBody as { content?: Record<string, Media> } | undefined)?.content, 'request', `${name} request body`);
    for (const [status, response] of Object.entries((operation.responses ?? {}) as Record<string, { content?: Record<string, Media> }>))
      add(response.content, 'response', `${name} response ${status}`);
  }
  for (const [m, { check, where, uses }] of media) {
    const shared = uses > 1 ? ` (shared by ${uses} operations)` : '';
    for (const [label, value] of examplesOf(m)) fit(checks[check](m.schema as Node), value, `${where} ${label}${shared}`);
  }
  // Each named schema is walked under its own name, not again inside the schemas using it.
  const schemas = ((doc.components as Node | undefined)?.schemas ?? {}) as Record<string, Node>;
  const named = new Set<unknown>(Object.values(schemas));
  const walk = (schema: unknown, where: string, root: boolean) => {
    if (!schema || typeof schema !== 'object' || (!root && named.has(schema))) return;
    const s = schema as Node;
    if (s.example !== undefined) fit(checks.response(s), s.example, `${where} example`);
    for (const [key, value] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) walk(value, `${where}.${key}`, false);
    walk(s.items, `${where}[]`, false);
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${where}.*`, false);
    for (const k of ['allOf', 'oneOf', 'anyOf']) ((s[k] ?? []) as unknown[]).forEach((part, i) => walk(part, `${where} ${k}[${i}]`, false));
  };
  for (const [name, schema] of Object.entries(schemas)) walk(schema, `components.schemas.${name}`, true);
  return problems;
}

/** Throws, naming each one, when an example of `spec` does not fit its schema. */
export function checkExamples(spec: Record<string, unknown>): void {
  const problems = exampleProblems(spec);
  if (problems.length > 0) {
    throw new Error(
      `Examples in the OpenAPI document that do not fit their schema (as the service checks it):\n${problems.map((p) => `  ${p}`).join('\n')}`,
    );
  }
}
