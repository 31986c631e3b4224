import { readFileSync } from 'node:fs';
import { Router } from 'express';
import { specYamlFile } from '../files';
import type { OpenApiDocument } from '../spec';

/** openapi.yaml as written, comments and all (`npm run build` copies it beside dist/). */
export function loadSpecYaml(): string {
  return readFileSync(specYamlFile, 'utf8');
}

/**
 * /openapi.yaml and /openapi.json: the contract this instance serves, with no key needed.
 * `readYaml` gives openapi.yaml itself; a spec given in code (tests) is served as its JSON
 * text, which is YAML too. Both are read on first request, not at start-up.
 */
export function specRouter(spec: OpenApiDocument, readYaml?: () => string): Router {
  const router = Router({ caseSensitive: true, strict: true });
  let json: string | undefined;
  let yamlText: string | undefined;
  const jsonText = () => (json ??= JSON.stringify(spec, null, 2));
  router.get('/openapi.json', (_req, res) => void res.type('application/json').send(jsonText()));
  router.get('/openapi.yaml', (_req, res) => void res.type('application/yaml').send((yamlText ??= readYaml ? readYaml() : jsonText())));
  return router;
}
