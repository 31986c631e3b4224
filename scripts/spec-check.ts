// `npm run generate` checks openapi.yaml against the OpenAPI schema of its version before
// it writes anything, naming what is wrong: a document that is not valid OpenAPI never
// reaches generated/. The service does not check it again at each start: that compiles
// the whole OpenAPI meta-schema, about a fifth of a start.
import { OpenAPISchemaValidator } from 'express-openapi-validator/dist/framework/openapi.schema.validator';

/** Throws, naming what is wrong, when `spec` breaks the OpenAPI schema of its version. */
export function checkSpec(spec: Record<string, unknown>): void {
  const validator = new OpenAPISchemaValidator({ version: String(spec.openapi), validateApiSpec: true });
  const errors = validator.validate(structuredClone(spec) as never).errors ?? [];
  if (errors.length > 0) {
    const list = errors.slice(0, 10).map((e) => `  ${e.instancePath || '/'}: ${e.message ?? 'invalid'}`);
    throw new Error(`The OpenAPI document is not valid OpenAPI ${String(spec.openapi)}:\n${list.join('\n')}`);
  }
}
