import { readFileSync } from 'node:fs';
import { Router } from 'express';
import { specYamlFile } from '../files';
import type { OpenApiDocument } from '../spec';
import { precompressed } from './precompressed';

/** openapi.yaml as written, comments and all (`npm run build` copies it beside dist/). */
export function loadSpecYaml(): string {
  return readFileSync(specYamlFile, 'utf8');
}

/**
 * /openapi.yaml and /openapi.json: the contract this instance serves, with no key needed.
 * `readYaml` gives openapi.yaml itself; a spec given in code (tests) is served as its JSON
 * text, which is YAML too. Both are read and compressed on first request, not at start-up,
 * and served in br, gzip or neither, with an ETag (pages/precompressed.ts).
 */
export function specRouter(spec: OpenApiDocument, readYaml?: () => string): Router {
  const router = Router({ caseSensitive: true, strict: true });
  let json: string | undefined;
  // Minified: what a client parses, a third smaller than indented (docs/performance.md, "Bytes on the wire").
  const jsonText = () => (json ??= JSON.stringify(spec));
  router.get('/openapi.json', precompressed({ type: 'application/json; charset=utf-8', read: jsonText }));
  router.get('/openapi.yaml', precompressed({ type: 'application/yaml; charset=utf-8', read: readYaml ?? jsonText }));
  return router;
}
