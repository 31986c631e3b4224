// express-openapi-validator 5.6 finds a request's operation by compiling the
// path-to-regexp pattern of every route it scans, on every request (lookupRoute in
// dist/middlewares/openapi.metadata.js; upstream, cdimascio/express-openapi-validator
// pull request 1217 caches them). Those patterns are the spec's paths, fixed at
// start-up, so each is compiled once here and the same matcher is handed back: the
// same scan in the same order, the same matches, without the compiling.
import { dirname } from 'node:path';

type Compiled = { regexp: RegExp; keys: Array<{ name: string }> };
type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => Compiled;

// The spec has a few dozen paths; anything beyond this is compiled as before, uncached.
const maxEntries = 512;
let installed = false;

/** Idempotent: wraps the validator's own copy of path-to-regexp's `pathToRegexp`. */
export function cacheValidatorRouteMatchers(): void {
  if (installed) return;
  installed = true;
  const validatorDir = dirname(require.resolve('express-openapi-validator'));
  // The validator's own copy, found at run time: a static import would load ours.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const module = require(require.resolve('path-to-regexp', { paths: [validatorDir] })) as { pathToRegexp: PathToRegexp };
  const compile = module.pathToRegexp;
  const cache = new Map<string, Compiled>();
  module.pathToRegexp = (path, options = {}) => {
    const { sensitive, strict, ...rest } = options;
    // Only the call the validator makes (a string and these two flags) is cached.
    if (typeof path !== 'string' || Object.keys(rest).length > 0) return compile(path, options);
    const key = `${sensitive ? 1 : 0}${strict ? 1 : 0}${path}`;
    let compiled = cache.get(key);
    if (!compiled) {
      compiled = compile(path, options);
      // No g or y flag: a shared RegExp keeps no state between exec calls.
      if (cache.size < maxEntries && !compiled.regexp.global && !compiled.regexp.sticky) cache.set(key, compiled);
    }
    return compiled;
  };
}
