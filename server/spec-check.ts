// The served document is checked against the OpenAPI schema before the app is built,
// and a start on a document that fails the check stops there, naming the errors.
//
// express-openapi-validator 5.6 would check it too (validateApiSpec), but only once its
// middleware initialises, after the service is listening, and its OpenAPISchemaValidator
// compiles the whole OpenAPI meta-schema in its constructor, even when told not to check:
// about a fifth of a start (docs/performance.md). Here that compile waits until a check
// needs it, and a document whose exact content passed before (a marker per content hash
// under node_modules/.cache/petstore-spec, beside the parsed copies of server/spec.ts) is
// not checked again. An edited openapi.yaml has another hash, so it is always checked.
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { cacheFolder, writeCacheFile } from './start-cache.cjs';
import type { OpenApiDocument } from './spec';

type Errors = Array<{ instancePath?: string; message?: string }>;
interface SchemaValidator {
  validate(doc: unknown): { errors: Errors };
}
type SchemaValidatorClass = new (opts: { version: string; validateApiSpec: boolean }) => SchemaValidator;

const cacheDir = cacheFolder('petstore-spec');
let original: SchemaValidatorClass | undefined;

/** Idempotent: the validator's OpenAPISchemaValidator compiles only when it validates. */
function deferMetaSchemaCompile(): SchemaValidatorClass {
  if (original) return original;
  const validatorDir = dirname(require.resolve('express-openapi-validator'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const module = require(join(validatorDir, 'framework', 'openapi.schema.validator')) as { OpenAPISchemaValidator: SchemaValidatorClass };
  const Eager = module.OpenAPISchemaValidator;
  original = Eager;
  module.OpenAPISchemaValidator = class LazySchemaValidator implements SchemaValidator {
    private compiled?: SchemaValidator;
    constructor(private readonly opts: { version: string; validateApiSpec: boolean }) {}
    validate(doc: unknown) {
      this.compiled ??= new Eager(this.opts);
      return this.compiled.validate(doc);
    }
  };
  return Eager;
}

/** Throws, naming what is wrong, when `spec` breaks the OpenAPI schema of its version. */
export function checkSpec(spec: OpenApiDocument): void {
  const Eager = deferMetaSchemaCompile();
  const text = JSON.stringify(spec);
  const marker = join(cacheDir, `${createHash('sha256').update(text).digest('hex')}.valid`);
  if (existsSync(marker)) return;
  const { errors } = new Eager({ version: String(spec.openapi), validateApiSpec: true }).validate(JSON.parse(text));
  if (errors.length > 0) {
    const list = errors.slice(0, 10).map((e) => `  ${e.instancePath || '/'}: ${e.message ?? 'invalid'}`);
    throw new Error(`The OpenAPI document is not valid OpenAPI ${String(spec.openapi)}:\n${list.join('\n')}`);
  }
  writeCacheFile(marker, '');
}
