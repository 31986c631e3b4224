import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Router } from 'express';
import { parse, stringify } from 'yaml';

export type OpenApiDocument = {
  paths: Record<string, Record<string, { operationId?: string } & Record<string, unknown>>>;
} & Record<string, unknown>;

export const specPath = join(__dirname, '..', 'openapi.yaml');

export function loadSpec(path: string = specPath): OpenApiDocument {
  return parse(readFileSync(path, 'utf8')) as OpenApiDocument;
}

/** /openapi.yaml and /openapi.json: the contract this instance serves, with no key needed. */
export function specRouter(spec: OpenApiDocument): Router {
  const router = Router({ caseSensitive: true, strict: true });
  const json = JSON.stringify(spec, null, 2);
  const yamlText = stringify(spec);
  router.get('/openapi.json', (_req, res) => void res.type('application/json').send(json));
  router.get('/openapi.yaml', (_req, res) => void res.type('application/yaml').send(yamlText));
  return router;
}
