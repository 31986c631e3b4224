// The service's own probes, answered at the front of the chain (see probes).
import Ajv, { type ValidateFunction } from 'ajv';
import type { RequestHandler } from 'express';
import type { AppContext, HandlerTable } from '../../handlers/types';
import type { OpenApiDocument } from '../spec';

type Response = { content?: Record<string, { schema?: object }> };

const servicePaths: Record<string, 'getHealth' | 'getReadiness'> = { '/healthz': 'getHealth', '/readyz': 'getReadiness' };

/**
 * Probes are polled often and must stay cheap while a client is being limited, so
 * `GET` or `HEAD /healthz` and `/readyz`, exactly so (no query, no trailing slash),
 * answer here, before deprecation, rate limit, body reading and validation: those
 * take no key, no parameters and no body, and their responses are constants of the
 * spec, so skipping that work changes no answer. Anything else on these paths (a
 * query, another method) takes the full chain and gets the validator's answer.
 */
export function probes(spec: OpenApiDocument, table: HandlerTable, ctx: AppContext, validateResponses: boolean): RequestHandler {
  // Their answers are still checked against the spec, as the validator checks every other.
  // The spec itself is checked by `npm run generate` (scripts/spec-check.ts). `spec` has its
  // references inlined (server/spec.ts, dereferenced), so each schema compiles alone.
  const ajv = new Ajv({ strict: false, validateSchema: false, meta: false });
  const conforms = new Map<string, ValidateFunction>();
  for (const [path, operation] of Object.entries(servicePaths)) {
    const responses = spec.paths[path]?.get?.responses as Record<string, Response> | undefined;
    const schema = responses?.['200']?.content?.['application/json']?.schema;
    // A spec without the probe (a test's variant) leaves that path to the full chain.
    if (!schema) continue;
    conforms.set(operation, ajv.compile(schema));
  }

  // Only the probes themselves take the async path: every other request passes by
  // without a promise.
  const answer = async (
    operation: 'getHealth' | 'getReadiness',
    conformsTo: ValidateFunction,
    url: string,
    res: Parameters<RequestHandler>[1],
  ) => {
    const input = { params: {}, query: {}, headers: {}, body: undefined, url } as never;
    const result = (await table[operation](input, ctx)) as { status: number; body?: unknown };
    if (validateResponses && (result.status !== 200 || !conformsTo(result.body))) {
      throw new Error(`The ${operation} response does not match openapi.yaml`);
    }
    res.status(result.status).json(result.body);
  };
  return (req, res, next) => {
    const operation = servicePaths[req.url];
    const conformsTo = operation && conforms.get(operation);
    if (!operation || !conformsTo || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
    // Returned, so that a drain waits for it (server/app.ts, inOneLayer).
    return answer(operation, conformsTo, req.url, res).catch(next);
  };
}
