// A typed client for this service: openapi-fetch over the types `npm run generate`
// writes from openapi.yaml into client/openapi.ts (with openapi-typescript; a field with
// a default is optional in a request there), so every path, parameter, body and
// documented response, errors included, is checked by the consumer's compiler.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './openapi';

export type { components, paths };
export type Schemas = components['schemas'];
/** The Error body every failure carries; `code` is the closed enum of openapi.yaml. */
export type ApiError = Schemas['Error'];

export type PetStoreClient = Client<paths>;

/**
 * `baseUrl` is where the service answers (`http://localhost:3000`). Pass `apiKey` for
 * the operations that need `Authorization: Bearer <key>`; sign-up and key creation do
 * not (key creation takes HTTP Basic, given per call).
 */
export function createPetStoreClient(baseUrl: string, options: { apiKey?: string } & Omit<ClientOptions, 'baseUrl'> = {}): PetStoreClient {
  const { apiKey, headers, ...rest } = options;
  return createClient<paths>({
    baseUrl,
    ...rest,
    headers: { ...(apiKey !== undefined && { Authorization: `Bearer ${apiKey}` }), ...(headers as Record<string, string> | undefined) },
  });
}

/** The `Authorization` header of HTTP Basic, for `POST /api-keys`. */
export function basicAuth(email: string, password: string): string {
  return `Basic ${Buffer.from(`${email}:${password}`, 'utf8').toString('base64')}`;
}
