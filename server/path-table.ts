// Which of the spec's paths a request path is, and the operations declared on it, found
// before the validator (which finds them again for its own work): the headers every
// answer on a path carries (server/browser-headers.ts) need them even when the request
// is refused before the validator runs (a rate limit, a malformed body).
import type { OperationEntry } from './spec';

export interface SpecPath {
  /** The template as the spec writes it, `/pets/{petId}`. */
  path: string;
  /** Its operations by method (`get`, `post`, ...). */
  operations: ReadonlyMap<string, OperationEntry>;
}

/** Looks a request path up exactly (routing is case-sensitive and strict): a literal path first, as OpenAPI says. */
export function createPathTable(table: Record<string, OperationEntry>): (path: string) => SpecPath | undefined {
  const byTemplate = new Map<string, Map<string, OperationEntry>>();
  for (const op of Object.values(table)) {
    let methods = byTemplate.get(op.path);
    if (!methods) byTemplate.set(op.path, (methods = new Map<string, OperationEntry>()));
    methods.set(op.method, op);
  }
  const literal = new Map<string, SpecPath>();
  const templated: Array<SpecPath & { pattern: RegExp }> = [];
  for (const [path, operations] of byTemplate) {
    if (!path.includes('{')) {
      literal.set(path, { path, operations });
      continue;
    }
    const source = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '[^/]+');
    templated.push({ path, operations, pattern: new RegExp(`^${source}$`) });
  }
  return (path) => literal.get(path) ?? templated.find((t) => t.pattern.test(path));
}
