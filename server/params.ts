// Integer parameters are taken only as canonical decimal text. The validator coerces a
// path or query string with JavaScript's Number(), which reads `1e3`, `0x10`, `+1`,
// `Infinity` and `1.0000000000000001` as numbers: another resource, or a value no
// list can serve. This runs before the validator and refuses them with 400.
import type { RequestHandler } from 'express';
import { validationFailed } from './errors';
import type { OpenApiDocument } from './spec';

const canonicalInteger = /^-?(?:0|[1-9][0-9]*)$/;

type Schema = { $ref?: string; type?: string; items?: Schema };
type Parameter = { $ref?: string; name: string; in: string; schema?: Schema };

function resolve<T extends { $ref?: string }>(spec: OpenApiDocument, node: T): T {
  let current: T = node;
  for (let hops = 0; current.$ref && hops < 10; hops++) {
    const target = current.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((at, key) => (at as Record<string, unknown>)?.[key], spec);
    current = target as T;
  }
  return current;
}

interface IntegerParams {
  pattern: RegExp;
  /** Path parameter names in template order. */
  path: Array<{ name: string; integer: boolean }>;
  /** Query parameters holding integers: one, or a comma-separated list. */
  query: Map<string, 'one' | 'list'>;
}

function integerParamsOf(spec: OpenApiDocument): IntegerParams[] {
  const out: IntegerParams[] = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    const shared = (item.parameters as Parameter[] | undefined) ?? [];
    const names = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
    const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '([^/]+)')}$`);
    const params = [...shared];
    for (const method of ['get', 'put', 'post', 'delete', 'patch'] as const) {
      params.push(...(((item[method] as { parameters?: Parameter[] } | undefined)?.parameters) ?? []));
    }
    const resolved = params.map((p) => resolve(spec, p));
    const kindOf = (p: Parameter): 'one' | 'list' | undefined => {
      const schema = p.schema ? resolve(spec, p.schema) : undefined;
      if (schema?.type === 'integer') return 'one';
      if (schema?.type === 'array' && schema.items && resolve(spec, schema.items).type === 'integer') return 'list';
      return undefined;
    };
    out.push({
      pattern,
      path: names.map((name) => ({ name, integer: resolved.some((p) => p.in === 'path' && p.name === name && kindOf(p) === 'one') })),
      query: new Map(
        resolved.flatMap((p) => {
          const kind = p.in === 'query' ? kindOf(p) : undefined;
          return kind ? [[p.name, kind] as const] : [];
        }),
      ),
    });
  }
  return out;
}

export function canonicalIntegers(spec: OpenApiDocument): RequestHandler {
  const table = integerParamsOf(spec);
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
    for (const [name, kind] of route.query) {
      const given = req.query[name];
      if (given === undefined) continue;
      const texts = (Array.isArray(given) ? given : [given]).flatMap((v) => (kind === 'list' ? String(v).split(',') : [String(v)]));
      if (!texts.every((text) => canonicalInteger.test(text))) {
        return next(validationFailed(`request/query/${name} must be ${kind === 'list' ? 'integers' : 'an integer'} written in plain decimal digits`));
      }
    }
    next();
  };
}
