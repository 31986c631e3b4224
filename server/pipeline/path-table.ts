// Routing, once per request: which of the spec's paths a request path is, and the
// operation its method names there (server/app.ts, route). Everything after it (the
// headers for browsers, deprecation, the limits, the operation's own chain) reads the
// result from the request instead of matching the path again.
import type { OperationEntry } from '../spec';

/** An operation of the spec, with its operationId. */
export type Operation = OperationEntry & { id: string };

export interface SpecPath {
  /** The template as the spec writes it, `/pets/{petId}`. */
  path: string;
  /** Its operations by method (`get`, `post`, ...). */
  operations: ReadonlyMap<string, Operation>;
  /** Its methods as an `Allow` header lists them. */
  allow: string;
}

/** A request path found in the table, with the raw (still percent-encoded) values of its template's parameters. */
export interface PathMatch {
  specPath: SpecPath;
  values: string[];
}

/** Looks a request path up exactly (routing is case-sensitive and strict): a literal path first, as OpenAPI says. */
export function createPathTable(table: Record<string, OperationEntry>): (path: string) => PathMatch | undefined {
  const byTemplate = new Map<string, Map<string, Operation>>();
  for (const [id, op] of Object.entries(table)) {
    let methods = byTemplate.get(op.path);
    if (!methods) byTemplate.set(op.path, (methods = new Map<string, Operation>()));
    methods.set(op.method, { ...op, id });
  }
  const literal = new Map<string, PathMatch>();
  const templated: Array<{ specPath: SpecPath; pattern: RegExp }> = [];
  for (const [path, operations] of byTemplate) {
    const specPath = { path, operations, allow: [...operations.keys()].map((m) => m.toUpperCase()).join(', ') };
    if (!path.includes('{')) {
      literal.set(path, { specPath, values: [] });
      continue;
    }
    const source = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '([^/]+)');
    templated.push({ specPath, pattern: new RegExp(`^${source}$`) });
  }
  return (path) => {
    const found = literal.get(path);
    if (found) return found;
    for (const { specPath, pattern } of templated) {
      const match = pattern.exec(path);
      if (match) return { specPath, values: match.slice(1) };
    }
    return undefined;
  };
}
