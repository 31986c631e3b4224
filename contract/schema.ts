// The suite's one schema toolkit: OpenAPI 3.0 schemas as JSON Schema, and the one ajv
// set-up that reads them, so the response checks and the parameter checks agree on
// what every format means.
import Ajv, { type Options } from 'ajv';
import addFormats from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats';

/**
 * RFC 5321's bounds on an email address, in octets (characters, for the ASCII addresses
 * the format takes): a longer one can receive no mail.
 */
export const emailBounds = { localPart: 64, label: 63, address: 254 } as const;

const dotAtomEmail = fullFormats.email as RegExp;

/** `format: email`: ajv-formats' full rule (a dot-atom local part, a domain name), within RFC 5321's bounds. */
function isEmail(value: string): boolean {
  const at = value.lastIndexOf('@');
  return (
    dotAtomEmail.test(value) &&
    value.length <= emailBounds.address &&
    at <= emailBounds.localPart &&
    value
      .slice(at + 1)
      .split('.')
      .every((label) => label.length <= emailBounds.label)
  );
}

/** OpenAPI 3.0 schemas in ajv's JSON Schema: `nullable` becomes a `null` type (and enum member). */
export function toJsonSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = toJsonSchema(v);
  if (out.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  return out;
}

/**
 * An ajv with JSON Schema's formats and OpenAPI's own. int64 is an integer a JSON number
 * holds exactly (openapi.yaml refuses the others), int32 one in the 32-bit range; an
 * email is within RFC 5321's bounds.
 */
export function createAjv(options: Pick<Options, 'allErrors' | 'coerceTypes'> = {}): Ajv {
  const ajv = new Ajv({ strict: false, validateFormats: true, ...options });
  addFormats(ajv, { mode: 'full' });
  ajv.addFormat('email', isEmail);
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n <= 2 ** 31 - 1 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat('float', { type: 'number', validate: () => true });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/);
  ajv.addFormat('binary', () => true);
  ajv.addFormat('password', () => true);
  return ajv;
}
