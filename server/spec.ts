import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Router } from 'express';
import { parse, stringify } from 'yaml';

export type OpenApiDocument = {
  paths: Record<string, Record<string, { operationId?: string } & Record<string, unknown>>>;
} & Record<string, unknown>;

export const specPath = join(__dirname, '..', 'openapi.yaml');

// Parsing the YAML took about a third of a second of every start; its JSON, keyed by a
// hash of the file's text, parses in under a millisecond. A changed file has another
// hash, so a stale copy is never read; a missing or unwritable cache only costs time.
const cacheDir = join(__dirname, '..', 'node_modules', '.cache', 'petstore-spec');

export function loadSpec(path: string = specPath): OpenApiDocument {
  const text = readFileSync(path, 'utf8');
  const cached = join(cacheDir, `${createHash('sha256').update(text).digest('hex')}.json`);
  try {
    return JSON.parse(readFileSync(cached, 'utf8')) as OpenApiDocument;
  } catch {
    // Not cached yet (or unreadable): parse the YAML.
  }
  const spec = parse(text) as OpenApiDocument;
  const json = JSON.stringify(spec);
  // Only a document that JSON holds exactly (no dates or other YAML-only values) is cached.
  if (isDeepStrictEqual(JSON.parse(json), spec)) {
    try {
      mkdirSync(cacheDir, { recursive: true });
      const partial = `${cached}.${process.pid}.tmp`;
      writeFileSync(partial, json);
      renameSync(partial, cached);
    } catch {
      // A read-only checkout: parse again next time.
    }
  }
  return spec;
}

/** /openapi.yaml and /openapi.json: the contract this instance serves, with no key needed. */
export function specRouter(spec: OpenApiDocument): Router {
  const router = Router({ caseSensitive: true, strict: true });
  // Rendered on first request, not at start-up (YAML rendering is slow).
  let json: string | undefined;
  let yamlText: string | undefined;
  router.get('/openapi.json', (_req, res) => void res.type('application/json').send((json ??= JSON.stringify(spec, null, 2))));
  router.get('/openapi.yaml', (_req, res) => void res.type('application/yaml').send((yamlText ??= stringify(spec))));
  return router;
}
