// What a schema of the contract accepts, decided in one place: the settings
// express-openapi-validator checks requests and responses with (server/app.ts), and Ajv
// instances made from those same settings for what is checked outside a request: the
// examples of openapi.yaml (`npm run generate`, scripts/spec-check.ts) and the mock's
// answers (server/pipeline/mock.ts). One schema, one verdict, wherever it is asked.
import type { ValidateFunction } from 'ajv';
import { createRequestAjv, createResponseAjv } from 'express-openapi-validator/dist/framework/ajv';
import { OpenApiValidator } from 'express-openapi-validator/dist/openapi.validator';
import type { OpenApiDocument } from '../spec';
import { isStorableDateTime } from './body';

/** The validator's settings that decide what a value must be: formats, unknown query parameters, nothing removed. */
export function schemaSettings(validateResponses = true) {
  return {
    validateRequests: { allowUnknownQueryParameters: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : false,
    validateFormats: true,
    ajvFormats: { mode: 'full' },
    formats: { 'date-time': { type: 'string', validate: isStorableDateTime } },
  } as const;
}

export interface SchemaChecks {
  /** The check of a request's value against `schema`, as the validator makes it for a request. */
  request(schema: object): ValidateFunction;
  /** The same for a response (writeOnly refused, readOnly allowed, no defaults filled in). */
  response(schema: object): ValidateFunction;
}

/**
 * Ajv as the validator builds it for `doc` (a document with its references inlined,
 * server/spec.ts `dereferenced`): its own normalisation of `schemaSettings()` gives the
 * Ajv options, so a setting changed there changes both.
 */
export function schemaChecks(doc: OpenApiDocument): SchemaChecks {
  const { ajvOpts } = new OpenApiValidator({ apiSpec: doc, ...schemaSettings() } as never);
  const request = createRequestAjv(doc as never, ajvOpts.request);
  const response = createResponseAjv(doc as never, ajvOpts.response);
  return { request: (schema) => request.compile(schema), response: (schema) => response.compile(schema) };
}

/** Ajv's errors in a line: `/0/id must be >= 1; /name must NOT have fewer than 1 characters`. */
export function describeErrors(check: ValidateFunction): string {
  return (check.errors ?? [])
    .slice(0, 5)
    .map((e) => {
      const extra = (e.params as { additionalProperty?: string }).additionalProperty;
      return `${e.instancePath || '/'} ${e.message ?? 'is not valid'}${extra === undefined ? '' : ` (${extra})`}`;
    })
    .join('; ');
}
