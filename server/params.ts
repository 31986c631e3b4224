// Integer parameters are taken only as canonical decimal text. The validator coerces a
// path or query string with JavaScript's Number(), which reads `1e3`, `0x10`, `+1`,
// `Infinity` and `1.0000000000000001` as numbers: another resource, or a value no
// list can serve. This runs before the validator and refuses them with 400.
import type { RequestHandler } from 'express';
import { validationFailed } from './errors';
import type { OperationEntry } from './spec';

const canonicalInteger = /^-?(?:0|[1-9][0-9]*)$/;
// A nested query value (`a[b]=1`) is no integer: '' fails the test above like any other.
const textOf = (v: unknown) => (typeof v === 'string' ? v : '');

interface IntegerParams {
  pattern: RegExp;
  /** Path parameter names in template order. */
  path: Array<{ name: string; integer: boolean }>;
  /** Query parameters holding integers: one, or a comma-separated list. */
  query: Map<string, 'one' | 'list'>;
}

/** One entry per path template, from the operation table: any method's integers count. */
function integerParamsOf(operations: Record<string, OperationEntry>): IntegerParams[] {
  const byPath = new Map<string, IntegerParams & { integerPath: Set<string> }>();
  for (const op of Object.values(operations)) {
    let route = byPath.get(op.path);
    if (!route) {
      const pattern = new RegExp(`^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '([^/]+)')}$`);
      route = { pattern, path: [], query: new Map(), integerPath: new Set() };
      byPath.set(op.path, route);
    }
    for (const name of op.integers?.path ?? []) route.integerPath.add(name);
    for (const [name, kind] of Object.entries(op.integers?.query ?? {})) route.query.set(name, kind);
  }
  return [...byPath].map(([template, { pattern, query, integerPath }]) => ({
    pattern,
    path: [...template.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1] as string, integer: integerPath.has(m[1] as string) })),
    query,
  }));
}

export function canonicalIntegers(operations: Record<string, OperationEntry>): RequestHandler {
  const table = integerParamsOf(operations);
  return (req, _res, next) => {
    const path = req.path;
    let route: IntegerParams | undefined;
    let match: RegExpExecArray | null = null;
    for (const r of table) {
      match = r.pattern.exec(path);
      if (match) {
        route = r;
        break;
      }
    }
    if (!route || !match) return next();
    const values = match.slice(1);
    for (const [i, param] of route.path.entries()) {
      if (!param.integer) continue;
      let value: string;
      try {
        value = decodeURIComponent(values[i] ?? '');
      } catch {
        return next(validationFailed(`request/params/${param.name} is not valid percent-encoding`));
      }
      if (!canonicalInteger.test(value)) {
        return next(validationFailed(`request/params/${param.name} must be an integer written in plain decimal digits`));
      }
    }
    // Express 5 parses the query string again on every read of req.query: read it once.
    const query = route.query.size > 0 ? req.query : {};
    for (const [name, kind] of route.query) {
      const given = query[name];
      if (given === undefined) continue;
      const texts = (Array.isArray(given) ? given : [given]).flatMap((v) => (kind === 'list' ? textOf(v).split(',') : [textOf(v)]));
      if (!texts.every((text) => canonicalInteger.test(text))) {
        return next(
          validationFailed(`request/query/${name} must be ${kind === 'list' ? 'integers' : 'an integer'} written in plain decimal digits`),
        );
      }
    }
    next();
  };
}
