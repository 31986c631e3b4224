// Traffic from the spec's JSON Schemas: fast-check arbitraries for valid values, and for
// each schema the ways to break it (a missing required field, a wrong type, a value one
// past each bound, an unknown property, an integer past 2^53-1). Every draw goes through
// one seeded source, so a run is reproduced by its seed.
import fc from 'fast-check';
import { emailBounds } from './schema';
import type { Schema } from './spec';

/** Seeded draws: each call takes the next seed of a small PRNG (mulberry32). */
export class Source {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  draw<T>(arb: fc.Arbitrary<T>): T {
    return fc.sample(arb, { seed: Math.floor(this.next() * 2 ** 31), numRuns: 1 })[0] as T;
  }
  int(below: number): number {
    return Math.floor(this.next() * below);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
}

type Deref = (schema: unknown) => Schema;
/** Lets the caller supply a value for a named field (an id another operation made). */
export type Override = (name: string, schema: Schema) => fc.Arbitrary<unknown> | undefined;

const maxSafe = Number.MAX_SAFE_INTEGER;

/** Merges `allOf` parts into one schema (enough for OpenAPI's usual `allOf: [$ref] + default`). */
export function flatten(schema: unknown, deref: Deref): Schema {
  const s = deref(schema);
  if (!Array.isArray(s.allOf)) return s;
  const merged: Schema = {};
  for (const part of s.allOf) Object.assign(merged, flatten(part, deref));
  for (const [k, v] of Object.entries(s)) if (k !== 'allOf') merged[k] = v;
  if (s.required || merged.required) {
    merged.required = [...new Set([...((merged.required as string[]) ?? []), ...((s.required as string[]) ?? [])])];
  }
  return merged;
}

export const typeOf = (s: Schema): string | undefined =>
  typeof s.type === 'string' ? s.type : s.properties ? 'object' : s.items ? 'array' : undefined;

/**
 * Mostly printable ASCII, sometimes any Unicode code point: names are not only `abc`.
 * Except U+0000, which openapi.yaml refuses in every body string (not every database can
 * store it): a valid request never holds it.
 */
const anyChar = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => c !== '\u0000') },
);
const asciiChar = fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 });

function integers(min: number, max: number): fc.Arbitrary<number> {
  if (min >= -(2 ** 31) && max <= 2 ** 31 - 1) return fc.integer({ min, max });
  return fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number);
}

function bounds(s: Schema, integer: boolean): { min: number; max: number } {
  let min = typeof s.minimum === 'number' ? s.minimum : integer ? -maxSafe : -1e9;
  let max = typeof s.maximum === 'number' ? s.maximum : integer ? maxSafe : 1e9;
  const step = integer ? 1 : 1e-6;
  if (s.exclusiveMinimum === true) min += step;
  if (typeof s.exclusiveMinimum === 'number') min = s.exclusiveMinimum + step;
  if (s.exclusiveMaximum === true) max -= step;
  if (typeof s.exclusiveMaximum === 'number') max = s.exclusiveMaximum - step;
  return { min, max };
}

/** A valid value for a schema. `ascii` for headers, which carry no arbitrary Unicode. */
export function arbitrary(schema: unknown, deref: Deref, override?: Override, ascii = false, depth = 0): fc.Arbitrary<unknown> {
  const s = flatten(schema, deref);
  if (depth > 8) return fc.constant(null);
  const nullable = (arb: fc.Arbitrary<unknown>) => (s.nullable === true ? fc.option(arb, { nil: null }) : arb);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  if (Array.isArray(s.oneOf) || Array.isArray(s.anyOf)) {
    const parts = (s.oneOf ?? s.anyOf) as unknown[];
    return fc.oneof(...parts.map((p) => arbitrary(p, deref, override, ascii, depth + 1)));
  }
  switch (typeOf(s)) {
    case 'integer': {
      const { min, max } = bounds(s, true);
      return nullable(integers(Math.ceil(min), Math.floor(max)));
    }
    case 'number': {
      const { min, max } = bounds(s, false);
      return nullable(fc.double({ min, max, noNaN: true, noDefaultInfinity: true }));
    }
    case 'boolean':
      return nullable(fc.boolean());
    case 'string':
      return nullable(strings(s, ascii));
    case 'array': {
      const minLength = typeof s.minItems === 'number' ? s.minItems : 0;
      const maxLength = Math.max(minLength, Math.min(typeof s.maxItems === 'number' ? s.maxItems : 5, 5));
      const items = arbitrary(s.items ?? {}, deref, override, ascii, depth + 1);
      return nullable(s.uniqueItems === true ? fc.uniqueArray(items, { minLength, maxLength }) : fc.array(items, { minLength, maxLength }));
    }
    case 'object': {
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      const required = new Set((s.required ?? []) as string[]);
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, propertySchema] of Object.entries(properties)) {
        const p = flatten(propertySchema, deref);
        if (p.readOnly === true) continue;
        model[name] = override?.(name, p) ?? arbitrary(p, deref, override, ascii, depth + 1);
      }
      return nullable(fc.record(model, { requiredKeys: Object.keys(model).filter((k) => required.has(k)) }));
    }
    default:
      return fc.oneof(fc.integer(), fc.string(), fc.boolean());
  }
}

/**
 * The lengths of an email's local part and labels at RFC 5321's bounds: a local part of 64
 * characters and labels of 63, 254 characters in all (64 @ 63 . 63 . 61).
 */
const emailAtBounds = (() => {
  const { localPart, label, address } = emailBounds;
  const labels: number[] = [];
  for (let left = address - localPart - 1; left > 0; left -= label + 1) labels.push(Math.min(label, left));
  return [localPart, ...labels];
})();

/** An address of these lengths (local part, then labels), its local part written with `chars` first. */
const emailOf = ([local = 1, ...labels]: number[], chars = '') =>
  `${(chars + 'a'.repeat(local)).slice(0, local)}@${labels.map((n) => 'b'.repeat(n)).join('.')}`;

/**
 * One past each of RFC 5321's bounds on an email, the rest of the address within them. The
 * local part is written with the characters of `valid`'s: each request has an address of
 * its own, so that a service taking one takes the next alike (a shrinking step) rather than
 * answering 409 for an address it already holds.
 */
function emailsPastBounds(valid: unknown): Broken[] {
  const { localPart, label, address } = emailBounds;
  const own = typeof valid === 'string' ? (valid.split('@')[0] ?? '').replace(/[^A-Za-z0-9]/g, '') : '';
  const longer = [...emailAtBounds];
  longer[longer.length - 1]! += 1;
  return [
    {
      label: `with a local part of ${localPart + 1} characters (RFC 5321: at most ${localPart})`,
      value: emailOf([localPart + 1, 10, 3], own),
    },
    { label: `with a domain label of ${label + 1} characters (RFC 5321: at most ${label})`, value: emailOf([10, label + 1, 3], own) },
    { label: `of ${address + 1} characters, each part within its bound (RFC 5321: at most ${address})`, value: emailOf(longer, own) },
  ];
}

/** Whether a string schema's own bounds and pattern allow a value. */
function allows(s: Schema, value: string): boolean {
  const length = [...value].length;
  if (typeof s.minLength === 'number' && length < s.minLength) return false;
  if (typeof s.maxLength === 'number' && length > s.maxLength) return false;
  return typeof s.pattern !== 'string' || new RegExp(s.pattern, 'u').test(value);
}

function strings(s: Schema, ascii: boolean): fc.Arbitrary<string> {
  const minLength = typeof s.minLength === 'number' ? s.minLength : 0;
  const maxLength = Math.max(minLength, Math.min(typeof s.maxLength === 'number' ? s.maxLength : 200, 500));
  const fits = (v: string) => [...v].length >= minLength && [...v].length <= maxLength;
  switch (s.format) {
    case 'date-time':
      return fc
        .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T23:59:59Z'), noInvalidDate: true })
        .map((d) => d.toISOString());
    case 'date':
      return fc
        .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T00:00:00Z'), noInvalidDate: true })
        .map((d) => d.toISOString().slice(0, 10));
    case 'email': {
      // An address at every bound of RFC 5321 at once where the schema allows one, so that
      // a service refusing what it may not is caught; else plain addresses. Letters and
      // digits only: every email validator agrees on these, so a refusal is the server's.
      const [local = 1, ...labels] = emailAtBounds;
      if (allows(s, emailOf(emailAtBounds))) {
        return fc
          .tuple(
            fc.stringMatching(new RegExp(`^[a-z][a-z0-9]{${local - 1}}$`)),
            ...labels.map((n) => fc.stringMatching(new RegExp(`^[a-z]{${n}}$`))),
          )
          .map(([first, ...rest]) => `${first}@${rest.join('.')}`);
      }
      return fc
        .tuple(fc.stringMatching(/^[a-z][a-z0-9]{5,20}$/), fc.constantFrom('example.com', 'example.org', 'mail.example.net'))
        .map(([name, domain]) => `${name}@${domain}`)
        .filter(fits);
    }
    case 'uuid':
      return fc.uuid();
    case 'uri':
      return fc.webUrl();
  }
  if (typeof s.pattern === 'string') return fc.stringMatching(new RegExp(s.pattern)).filter(fits);
  return fc.string({ unit: ascii ? asciiChar : anyChar, minLength, maxLength });
}

/** The least an object schema allows: its required fields only, numbers at their minimum. */
export function leastOf(schema: unknown, deref: Deref): Schema {
  const s = flatten(schema, deref);
  if (typeOf(s) !== 'object') return s;
  const required = new Set((s.required ?? []) as string[]);
  const properties: Record<string, Schema> = {};
  for (const [name, p] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
    if (!required.has(name)) continue;
    const f = flatten(p, deref);
    const numeric = typeOf(f) === 'integer' || typeOf(f) === 'number';
    properties[name] = numeric && typeof f.minimum === 'number' ? { ...f, maximum: f.minimum } : f;
  }
  return { ...s, properties };
}

/** A request body or parameter value that breaks the schema, and why. */
export interface Broken {
  label: string;
  /** The value to send; JSON-encoded unless `raw` is set. */
  value?: unknown;
  /** Exact JSON text, for what JSON.stringify cannot say (integers past 2^53-1). */
  raw?: string;
}

/** Values that break one (flattened) scalar or array schema; `valid`, a value it takes, when there is one. */
export function brokenValues(s: Schema, deref: Deref, valid?: unknown): Broken[] {
  const out: Broken[] = [];
  const type = typeOf(s);
  const wrong: Record<string, unknown[]> = {
    integer: ['12', true, 1.5],
    number: ['12', true],
    string: [12345, true],
    boolean: ['true', 1],
    array: [{ not: 'an array' }, 'text'],
    object: [['not', 'an', 'object'], 'text'],
  };
  for (const value of type ? (wrong[type] ?? []) : []) out.push({ label: `wrong type (${JSON.stringify(value)})`, value });
  if (type && s.nullable !== true) out.push({ label: 'null', value: null });
  if (Array.isArray(s.enum)) {
    const candidate = type === 'boolean' ? !s.enum[0] : type === 'integer' || type === 'number' ? 987654321 : 'not-a-member';
    if (!s.enum.includes(candidate)) out.push({ label: `not in the enum (${JSON.stringify(candidate)})`, value: candidate });
  }
  if (type === 'integer' || type === 'number') {
    if (typeof s.minimum === 'number') out.push({ label: `below minimum ${s.minimum}`, value: s.minimum - 1 });
    if (typeof s.maximum === 'number') {
      const over = BigInt(Math.floor(s.maximum)) + 1n;
      out.push(
        over > BigInt(maxSafe)
          ? { label: `past maximum ${s.maximum} (beyond 2^53-1)`, raw: over.toString() }
          : { label: `past maximum ${s.maximum}`, value: Number(over) },
      );
    }
    if (type === 'integer') out.push({ label: 'an integer past 2^53-1', raw: '9007199254740993' });
  }
  if (type === 'string') {
    if (typeof s.minLength === 'number' && s.minLength > 0) {
      out.push({ label: `shorter than minLength ${s.minLength}`, value: 'x'.repeat(s.minLength - 1) });
    }
    if (typeof s.maxLength === 'number') {
      out.push({ label: `longer than maxLength ${s.maxLength}`, value: 'x'.repeat(s.maxLength + 1) });
    }
    if (typeof s.pattern === 'string') {
      const re = new RegExp(s.pattern);
      const miss = ['!', ' ', 'x y', '\u00e9\u00e9\u00e9'].find((c) => !re.test(c));
      if (miss !== undefined) out.push({ label: `not matching ${s.pattern}`, value: miss });
    }
    if (s.format === 'date-time') out.push({ label: 'not a date-time', value: '2026-13-45T25:61:00Z' });
    if (s.format === 'date') out.push({ label: 'not a date', value: '2026-13-45' });
    if (s.format === 'email') out.push({ label: 'not an email', value: 'not-an-email' }, ...emailsPastBounds(valid));
    if (s.format === 'uuid') out.push({ label: 'not a uuid', value: 'not-a-uuid' });
  }
  if (type === 'array') {
    if (typeof s.maxItems === 'number') {
      const item = flatten(s.items ?? {}, deref);
      const one = typeOf(item) === 'integer' ? (typeof item.minimum === 'number' ? item.minimum : 1) : 'x';
      out.push({ label: `more than maxItems ${s.maxItems}`, value: Array.from({ length: s.maxItems + 1 }, () => one) });
    }
    if (typeof s.minItems === 'number' && s.minItems > 0) out.push({ label: `fewer than minItems ${s.minItems}`, value: [] });
  }
  return out;
}

const bigPlaceholder = '"__contract_raw_value__"';

/** Encodes a body with one field replaced by exact JSON text. */
function withRaw(body: Record<string, unknown>, field: string, raw: string): string {
  return JSON.stringify({ ...body, [field]: '__contract_raw_value__' }).replace(bigPlaceholder, raw);
}

/** Every way the suite breaks a JSON body that the schema describes, starting from a valid one. */
export function brokenBodies(schema: unknown, valid: unknown, deref: Deref, limitBytes: number): Array<{ label: string; text: string }> {
  const s = flatten(schema, deref);
  const out: Array<{ label: string; text: string }> = [];
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
  if (typeOf(s) === 'object' && valid && typeof valid === 'object' && !Array.isArray(valid)) {
    const body = valid as Record<string, unknown>;
    const properties = (s.properties ?? {}) as Record<string, unknown>;
    for (const name of (s.required ?? []) as string[]) {
      const { [name]: _dropped, ...rest } = body;
      out.push({ label: `without required field "${name}"`, text: JSON.stringify(rest) });
    }
    if (s.additionalProperties === false) {
      if (!('id' in properties)) out.push({ label: 'with an "id" it does not declare', text: JSON.stringify({ ...body, id: 1 }) });
      out.push({ label: 'with an unknown property', text: JSON.stringify({ ...body, unexpectedProperty: 'x' }) });
    }
    for (const [name, propertySchema] of Object.entries(properties)) {
      const p = flatten(propertySchema, deref);
      if (p.readOnly === true) continue;
      for (const broken of brokenValues(p, deref, body[name])) {
        out.push({
          label: `field "${name}" ${broken.label}`,
          text: broken.raw !== undefined ? withRaw(body, name, broken.raw) : JSON.stringify({ ...body, [name]: broken.value }),
        });
      }
      out.push({ label: `field "${name}" nested 40 levels deep`, text: withRaw(body, name, nested(40)) });
    }
    out.push({ label: 'a JSON array instead of an object', text: JSON.stringify([body]) });
  }
  out.push({ label: 'JSON nested 40 levels deep', text: nested(40) });
  out.push({ label: 'malformed JSON', text: '{"unterminated": ' });
  out.push({ label: 'the JSON literal null', text: 'null' });
  const padding = 'x'.repeat(limitBytes + 1024);
  out.push({ label: `a body over ${limitBytes} bytes`, text: JSON.stringify({ padding }) });
  return out;
}
