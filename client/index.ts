// A typed client for this service: openapi-fetch over the types `npm run generate`
// writes from openapi.yaml into client/openapi.ts (with openapi-typescript; a field with
// a default is optional in a request there), so every path, parameter, body and
// documented response, errors included, is checked by the consumer's compiler.
// Published as the package @petstore/client (client/package.json, client/build.mjs): no
// Node built-ins here, so the same code runs in Node and in a browser, and imports carry
// their extensions, so a `nodenext` project compiles it.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './openapi.js';

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

/** The `Authorization` header of HTTP Basic, for `POST /api-keys`: `email:password` as UTF-8, in base64 (RFC 7617). */
export function basicAuth(email: string, password: string): string {
  // btoa takes one character per byte, so the UTF-8 bytes go in as such characters.
  let bytes = '';
  for (const byte of new TextEncoder().encode(`${email}:${password}`)) bytes += String.fromCharCode(byte);
  return `Basic ${btoa(bytes)}`;
}
