// Integer parameters are taken only as canonical decimal text. The validator coerces a
// path or query string with JavaScript's Number(), which reads `1e3`, `0x10`, `+1`,
// `Infinity` and `1.0000000000000001` as numbers: another resource, or a value no
// list can serve. This runs before the validator and refuses them with 400.
import type { RequestHandler } from 'express';
import { validationFailed } from '../../domain/errors';
import type { Operation } from './path-table';

const canonicalInteger = /^-?(?:0|[1-9][0-9]*)$/;
// A nested query value (`a[b]=1`) is no integer: '' fails the test above like any other.
const textOf = (v: unknown) => (typeof v === 'string' ? v : '');

/**
 * The check for one operation's integer parameters, or undefined when it has none. Runs
 * in the operation's chain, after routing (req.pathValues) and before the validator.
 */
export function canonicalIntegers(op: Operation): RequestHandler | undefined {
  const integerPath = new Set(op.integers?.path ?? []);
  const path = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1] as string, integer: integerPath.has(m[1] as string) }));
  const query = Object.entries(op.integers?.query ?? {});
  if (integerPath.size === 0 && query.length === 0) return undefined;
  return (req, _res, next) => {
    const values = req.pathValues ?? [];
    for (const [i, param] of path.entries()) {
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
    const given = query.length > 0 ? req.query : {};
    for (const [name, kind] of query) {
      const value = given[name];
      if (value === undefined) continue;
      const texts = (Array.isArray(value) ? value : [value]).flatMap((v) => (kind === 'list' ? textOf(v).split(',') : [textOf(v)]));
      if (!texts.every((text) => canonicalInteger.test(text))) {
        return next(
          validationFailed(`request/query/${name} must be ${kind === 'list' ? 'integers' : 'an integer'} written in plain decimal digits`),
        );
      }
    }
    next();
  };
}
