// Invalid traffic for one operation: every parameter and body broken in each way its
// schema refuses, wrong content types, and malformed or insufficient credentials.
import fc from 'fast-check';
import type { Expectation } from './checks';
import { brokenBodies, brokenValues, flatten, typeOf } from './generate';
import type { SentRequest } from './http';
import { toJsonSchema } from './schema';
import { requestProperty } from './property';
import type { Operation, Param, Schema } from './spec';
import { b64, type Inputs, type Run } from './run-state';

/** One kind of broken request, made from a valid one. */
interface Probe {
  label: string;
  expect: Expectation;
  /** The broken request built on valid inputs; undefined when these inputs leave nothing to break. */
  request: (inputs: Inputs) => SentRequest | undefined;
}

/**
 * Each kind of invalid request is a fast-check property over the valid request it breaks
 * ("whatever the rest of the request, this fault is refused"), one sample per kind and
 * per run, so a failure is shrunk to the smallest request that still shows it.
 */
export async function invalidTraffic(run: Run, op: Operation): Promise<void> {
  const param = run.itemParam(op);
  const target = param ? (op.method === 'get' ? (await run.available(param))[0] : run.live(param, true)[0]) : undefined;
  const auth = run.authFor(op, target?.owner);
  const ghost = param && !target ? run.dangling(op.params.find((p) => p.name === param)!.schema) : undefined;
  const valid = run
    .inputs(op, { target, choice: 0 })
    .map((inputs) => (ghost === undefined ? inputs : { ...inputs, pathParams: { ...inputs.pathParams, [param!]: ghost } }));
  const probes = [
    ...authProbes(run, op),
    ...(auth ? [...parameterProbes(run, op, auth), ...bodyProbes(run, op, auth), ...textProbes(run, op, auth)] : []),
  ];
  for (const probe of probes) {
    await requestProperty(run, op, valid, { label: probe.label, expect: probe.expect, numRuns: 1, request: probe.request });
  }
}

function parameterProbes(run: Run, op: Operation, auth: Record<string, string>): Probe[] {
  const probes: Probe[] = [];
  const invalid: Expectation = { kind: 'invalid' };
  const without = (inputs: Inputs, p: Param): Inputs => ({
    ...inputs,
    pathParams: { ...inputs.pathParams },
    query: inputs.query.filter(([q]) => q !== p),
    headers: inputs.headers.filter(([h]) => h !== p),
  });
  for (const p of op.params) {
    for (const broken of brokenValues(flatten(p.schema, run.contract.deref), run.contract.deref)) {
      const text = broken.raw ?? (Array.isArray(broken.value) ? broken.value.map(String).join(',') : String(broken.value));
      if (broken.value === null || (typeof broken.value === 'object' && !Array.isArray(broken.value))) continue;
      if (p.in === 'header' && !/^[\x20-\x7e]*$/.test(text)) continue;
      if (p.in === 'path' && text === '') continue;
      // Parameters travel as text: "12" is a fine integer there, so only text that breaks the schema counts.
      if (acceptsText(run, p, text)) continue;
      const raw = p.in === 'query' && Array.isArray(broken.value) && p.explode ? broken.value : text;
      probes.push({
        label: `${p.in} parameter "${p.name}" ${broken.label}`,
        expect: invalid,
        request: (inputs) => {
          const changed = without(inputs, p);
          if (p.in === 'path') changed.pathParams[p.name] = text;
          else (p.in === 'query' ? changed.query : changed.headers).push([p, raw]);
          return run.build(op, changed, auth);
        },
      });
    }
    if (p.required && p.in !== 'path') {
      probes.push({
        label: `without required ${p.in} parameter "${p.name}"`,
        expect: invalid,
        request: (inputs) => run.build(op, without(inputs, p), auth),
      });
    }
  }
  // Refused by the validator's one setting for every operation (no operation declares
  // this name): sent to one operation the run can call each run (Run.shareOut), and to every
  // operation with no parameter and no body, for which it is the only input to refuse.
  const inputless = (o: Operation) => o.params.length === 0 && !o.body;
  if (inputless(op) || run.shareOut(op, ['an unknown query parameter'], (o) => callable(run)(o) && !inputless(o)).length > 0) {
    probes.push({
      label: 'an unknown query parameter',
      expect: invalid,
      request: (inputs) => run.build(op, inputs, auth, { extraQuery: 'unexpectedParameter=1' }),
    });
  }
  return probes;
}

/** The operations the run has credentials for, among which a shared form may go. */
const callable = (run: Run) => (o: Operation) => run.authFor(o) !== undefined;

const contentTypeForms = ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'none'];
/**
 * The broken bodies (contract/generate.ts, brokenBodies) that no schema is needed to refuse:
 * the body reader's own refusals, before the schema (server: JSON, depth). A field nested
 * too deep is one form, sent in each field of the operation it goes to. A body over the
 * limit is not among them: each operation documents its own 413.
 */
const readerFaults = [
  /^a JSON array instead of an object$/,
  /^JSON nested 40 levels deep$/,
  /^field ".*" nested 40 levels deep$/,
  /^malformed JSON$/,
  /^the JSON literal null$/,
];

function bodyProbes(run: Run, op: Operation, auth: Record<string, string>): Probe[] {
  if (!op.body) return [];
  const { schema, required } = op.body;
  const limit = run.o.bodyLimitBytes;
  const deref = run.contract.deref;
  const probes: Probe[] = [];
  // The kinds of broken body depend on the schema only; each is made afresh from the drawn valid body.
  const sampleBody = run.generate(op).body;
  // A body the reader refuses whatever its schema (malformed JSON, a wrong type at the top,
  // too deep, too large, a wrong or missing Content-Type) is refused by one body reader for
  // every operation: each such kind goes to one operation that takes a body each run
  // (Run.shareOut). What depends on the operation's schema goes to every one.
  const broken = brokenBodies(schema, sampleBody, deref, limit);
  const isGeneric = (label: string) => readerFaults.some((fault) => fault.test(label));
  const takesBody = (o: Operation) => o.body !== undefined && callable(run)(o);
  const generic = new Set(run.shareOut(op, [...readerFaults.map(String), ...contentTypeForms], takesBody));
  const sent = (label: string) => !isGeneric(label) || readerFaults.some((fault) => fault.test(label) && generic.has(String(fault)));
  for (const { label, text } of broken.filter((b) => sent(b.label))) {
    const tooLarge = text.length > limit;
    probes.push({
      label: `a body ${label}`,
      expect: tooLarge && op.responses.has('413') ? { kind: 'status', status: 413 } : { kind: 'invalid' },
      request: (inputs) => {
        const broken = brokenBodies(schema, inputs.body, deref, limit).find((b) => b.label === label);
        return broken && run.build(op, inputs, auth, { rawBody: broken.text });
      },
    });
  }
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml'].filter((t) => generic.has(t))) {
    probes.push({
      label: `a JSON body sent as ${type}`,
      expect: { kind: 'invalid' },
      request: (inputs) => run.build(op, inputs, auth, { rawBody: JSON.stringify(inputs.body ?? {}), contentType: type }),
    });
  }
  if (generic.has('none'))
    probes.push({
      label: 'a JSON body without Content-Type',
      expect: { kind: 'invalid' },
      request: (inputs) => run.build(op, inputs, auth, { rawBody: JSON.stringify(inputs.body ?? {}), contentType: null }),
    });
  if (required) {
    probes.push({
      label: 'no body where one is required',
      expect: { kind: 'invalid' },
      request: (inputs) => run.build(op, { ...inputs, body: undefined }, auth),
    });
  }
  return probes;
}

/**
 * Text no database stores as it is, in every text input the operation names: U+0000 and
 * bytes that are not UTF-8 (0xFF, and a surrogate encoded as UTF-8 would were it a
 * character) in path, query and header parameters, as percent-escapes in the URL and as
 * raw bytes in a header; U+0000 and a lone surrogate escape in each string of the body.
 * Refused wherever the schema or the spec's rule for bodies refuses it; in any case never
 * a 5xx (checked on every answer).
 */
function textProbes(run: Run, op: Operation, auth: Record<string, string>): Probe[] {
  const probes: Probe[] = [];
  // Stands for a parameter's value while the request is built, then replaced by the escapes.
  const marker = 'contract-text-marker';
  const inUrl: Array<[label: string, escaped: string, decoded: string | undefined]> = [
    ['U+0000', '%00', '\u0000'],
    ['the byte 0xFF, which is not UTF-8', '%FF', undefined],
    ['an encoded surrogate (ED A0 80)', '%ED%A0%80', undefined],
  ];
  // What a server may make of a malformed escape: refuse it, or keep the escape as text.
  const refuses = (p: Param, escaped: string, decoded: string | undefined) =>
    !acceptsText(run, p, escaped) && (decoded === undefined || !acceptsText(run, p, decoded));
  // A parameter that holds no text (a number, a boolean, a list of them) refuses every
  // escape by its type, which its wrong-type probes check for every operation; what the
  // escapes add there is the URL's percent-decoding, one step for all operations. Each
  // escape goes to one operation with such a parameter in the path, and one with one in the
  // query, each run (Run.shareOut), in each of those parameters.
  const sharedIn = (where: 'path' | 'query') =>
    new Set(
      run.shareOut(
        op,
        inUrl.map(([label]) => label),
        (o) => callable(run)(o) && o.params.some((p) => p.in === where && holdsNoText(run, p)),
      ),
    );
  const shared = { path: sharedIn('path'), query: sharedIn('query') };
  for (const p of op.params) {
    if (p.in === 'header') {
      const values: Array<[string, string, string[]]> = [
        ['U+0000', 'a\u0000b', ['a\u0000b', 'a b']],
        ['bytes that are not UTF-8 (0xFF 0xFE)', 'a\xff\xfeb', ['a\xff\xfeb', 'a\ufffd\ufffdb']],
      ];
      for (const [label, value, readings] of values) {
        // RFC 9110 lets a recipient replace a NUL in a field with a space instead of refusing it.
        const refused = readings.every((text) => !acceptsText(run, p, text));
        probes.push({
          label: `header parameter "${p.name}" holding ${label}`,
          expect: refused ? { kind: 'invalid' } : { kind: 'not-status', status: 500 },
          request: (inputs) => ({
            ...run.build(op, { ...inputs, headers: [...inputs.headers.filter(([h]) => h !== p), [p, value]] }, auth),
            raw: true,
          }),
        });
      }
      continue;
    }
    for (const [label, escaped, decoded] of inUrl) {
      if ((p.in === 'path' || p.in === 'query') && holdsNoText(run, p) && !shared[p.in].has(label)) continue;
      probes.push({
        label: `${p.in} parameter "${p.name}" holding ${label} (${escaped})`,
        expect: refuses(p, escaped, decoded) ? { kind: 'invalid' } : { kind: 'not-status', status: 500 },
        request: (inputs) => {
          const changed: Inputs = { ...inputs, pathParams: { ...inputs.pathParams }, query: inputs.query.filter(([q]) => q !== p) };
          if (p.in === 'path') changed.pathParams[p.name] = marker;
          else changed.query.push([p, marker]);
          const request = run.build(op, changed, auth);
          return { ...request, path: request.path.replace(marker, escaped) };
        },
      });
    }
  }
  // The body reader refuses these in any string of a body, whatever the schema (the
  // spec's rule for bodies): each form goes to one operation with a string field each run
  // (Run.shareOut), in each of its string fields.
  const forms: Array<[string, string]> = [
    ['U+0000 (\\u0000)', '\\u0000'],
    ['a lone surrogate escape (\\ud800)', '\\ud800'],
  ];
  const textFields = (o: Operation) =>
    run.fields(o.body?.schema ?? {}).filter(([, field]) => typeOf(field) === 'string' && field.readOnly !== true);
  const inBody = run.shareOut(op, forms, (o) => o.body !== undefined && callable(run)(o) && textFields(o).length > 0);
  for (const [name] of op.body ? textFields(op) : []) {
    for (const [label, escape] of inBody) {
      probes.push({
        label: `body field "${name}" holding ${label}`,
        expect: { kind: 'invalid' },
        request: (inputs) => {
          if (!inputs.body || typeof inputs.body !== 'object' || Array.isArray(inputs.body)) return undefined;
          const text = JSON.stringify({ ...inputs.body, [name]: marker }).replace(`"${marker}"`, `"a${escape}b"`);
          return run.build(op, inputs, auth, { rawBody: text });
        },
      });
    }
  }
  return probes;
}

/** Whether a parameter's values are numbers or booleans (or lists of them): no text at all. */
function holdsNoText(run: Run, p: Param): boolean {
  const schema = inline(run, p.schema);
  const type = typeOf(schema) === 'array' ? typeOf(flatten(schema.items ?? {}, run.contract.deref)) : typeOf(schema);
  return type === 'integer' || type === 'number' || type === 'boolean';
}

/** Whether a parameter's schema accepts this text, read the way a server coerces it. */
function acceptsText(run: Run, p: Param, text: string): boolean {
  const schema = inline(run, p.schema);
  const value = typeOf(schema) === 'array' && !p.explode ? text.split(',') : text;
  let fn = run.textValidators.get(p);
  if (!fn) {
    fn = run.coercing.compile({ type: 'object', properties: { v: schema } });
    run.textValidators.set(p, fn);
  }
  return fn({ v: value });
}

/** A schema with its `$ref`s replaced by what they name (parameter schemas are small). */
export function inline(run: Run, schema: unknown, depth = 0): Schema {
  if (depth > 16 || !schema || typeof schema !== 'object') return schema as Schema;
  const s = run.contract.deref(schema);
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    out[k] = Array.isArray(v)
      ? v.map((x) => (x && typeof x === 'object' ? inline(run, x, depth + 1) : x))
      : v && typeof v === 'object' && k !== 'enum' && k !== 'example'
        ? inline(run, v, depth + 1)
        : v;
  }
  return toJsonSchema(out) as Schema;
}

/** The base64 of these parts, text as UTF-8 and numbers as bytes. */
const b64bytes = (...parts: Array<string | Buffer | number[]>) =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)))).toString('base64');

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Whether an Authorization value is a password login (`Basic` base64 of `user:password`),
 * which a service may count as failed: not when the credentials are not UTF-8 or hold
 * U+0000, which the spec refuses before any login is counted.
 */
export function isPasswordLogin(value: string | undefined): boolean {
  const match = /^Basic\s+([A-Za-z0-9+/]+={0,2})$/i.exec(value ?? '');
  if (!match?.[1]) return false;
  let text: string;
  try {
    text = utf8.decode(Buffer.from(match[1], 'base64'));
  } catch {
    return false;
  }
  return text.includes(':') && !text.includes('\u0000');
}

/**
 * Every malformed Authorization form is 401; a customer on an admin operation is 403.
 * Wrong passwords are failed logins, which the service limits per address (and per
 * account): they come out of the run's budget (Run.takeLogin), each with an account name
 * of its own, so that the run leaves no lockout behind.
 */
function authProbes(run: Run, op: Operation): Probe[] {
  const probes: Probe[] = [];
  const probe = (label: string, headers: Record<string, string>, status: number) => {
    if (isPasswordLogin(headers.Authorization) && !run.takeLogin(`${op.id}: ${label}`, op)) return;
    probes.push({ label, expect: { kind: 'status', status }, request: (inputs) => run.build(op, inputs, headers) });
  };
  const someone = () => `${run.source.draw(fc.stringMatching(/^[a-z]{12}$/))}@example.com`;
  if (op.security === 'bearer') {
    const key = (run.customer.header ?? run.admin?.header ?? 'Bearer placeholder-key').replace(/^Bearer /, '');
    // Same prefix and length as a real key. One draw whatever the key looks like, so the
    // server's random keys do not shift the seeded sequence.
    const prefix = /^[A-Za-z]+_(?:[A-Za-z]+_)?/.exec(key)?.[0] ?? '';
    const tail = run.source.draw(fc.stringMatching(/^[A-Za-z0-9]{64}$/));
    const unknown = prefix + tail.slice(0, Math.max(16, key.length - prefix.length));
    const forms: Array<[string, string | undefined]> = [
      ['no Authorization header', undefined],
      ['Authorization "Bearer" without a key', 'Bearer'],
      ['Authorization "Bearer " with an empty key', 'Bearer '],
      ['a key without the Bearer scheme', key],
      ['the key under another scheme (Token)', `Token ${key}`],
      ['the key under the Basic scheme', `Basic ${key}`],
      ['Basic credentials where a Bearer key is needed', `Basic ${b64(`${someone()}:some password`)}`],
      ['Basic credentials holding U+0000 where a Bearer key is needed', `Basic ${b64('a\u0000b@example.com:some password')}`],
      ['a key holding bytes that are not UTF-8 (0xFF 0xFE)', `Bearer ${key}\xff\xfe`],
      ['"Bearer <key> <extra>"', `Bearer ${key} extra`],
      ['"Bearer,<key>"', `Bearer,${key}`],
      ['a tab between scheme and key', `Bearer\t${key}`],
      ['a well-formed key that does not exist', `Bearer ${unknown}`],
    ];
    for (const [label, value] of run.shareOut(op, forms, (o) => o.security === 'bearer', { keepFirst: true }))
      probe(label, value === undefined ? {} : { Authorization: value }, 401);
    if (op.role && run.customer.header && run.customer !== run.admin) {
      probe(`a customer key on an operation for ${op.role}s`, { Authorization: run.customer.header }, 403);
    }
  } else if (op.security === 'basic') {
    const email = run.basic?.email ?? 'someone@example.com';
    const forms: Array<[string, string | undefined]> = [
      ['no Authorization header', undefined],
      ['a wrong password', `Basic ${b64(`${email}:not the password`)}`],
      ['an unknown account', `Basic ${b64(`${someone()}:some password`)}`],
      ['Basic credentials without a colon', `Basic ${b64(email)}`],
      ['Basic credentials that are not base64', 'Basic !!!not-base64!!!'],
      ['"Basic" without credentials', 'Basic'],
      ['a Bearer key where Basic is needed', run.customer.header ?? 'Bearer ps_live_unknown'],
      // Text no database stores as it is: refused before any account is looked up. Each names
      // an account of its own, so none counts against the suite's account's password checks.
      ['U+0000 in the Basic email', `Basic ${b64bytes(`a\u0000${someone()}:some password`)}`],
      ['U+0000 in the Basic password', `Basic ${b64bytes(`${someone()}:not\u0000the password`)}`],
      ['a Basic email with a byte that is not UTF-8 (0xFF)', `Basic ${b64bytes(Buffer.from('a'), [0xff], `${someone()}:some password`)}`],
      ['a Basic password with an encoded surrogate (ED A0 80)', `Basic ${b64bytes(`${someone()}:some password`, [0xed, 0xa0, 0x80])}`],
    ];
    for (const [label, value] of forms) probe(label, value === undefined ? {} : { Authorization: value }, 401);
  }
  return probes;
}
