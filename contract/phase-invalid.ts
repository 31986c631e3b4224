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
  const probes = [...authProbes(run, op), ...(auth ? [...parameterProbes(run, op, auth), ...bodyProbes(run, op, auth)] : [])];
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
  probes.push({
    label: 'an unknown query parameter',
    expect: invalid,
    request: (inputs) => run.build(op, inputs, auth, { extraQuery: 'unexpectedParameter=1' }),
  });
  return probes;
}

function bodyProbes(run: Run, op: Operation, auth: Record<string, string>): Probe[] {
  if (!op.body) return [];
  const { schema, required } = op.body;
  const limit = run.o.bodyLimitBytes;
  const deref = run.contract.deref;
  const probes: Probe[] = [];
  // The kinds of broken body depend on the schema only; each is made afresh from the drawn valid body.
  const sampleBody = run.generate(op).body;
  for (const { label, text } of brokenBodies(schema, sampleBody, deref, limit)) {
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
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
    probes.push({
      label: `a JSON body sent as ${type}`,
      expect: { kind: 'invalid' },
      request: (inputs) => run.build(op, inputs, auth, { rawBody: JSON.stringify(inputs.body ?? {}), contentType: type }),
    });
  }
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

/** Whether an Authorization value is a password login (`Basic` base64 of `user:password`), which a service may count as failed. */
export function isPasswordLogin(value: string | undefined): boolean {
  const match = /^Basic\s+([A-Za-z0-9+/]+={0,2})$/i.exec(value ?? '');
  return !!match?.[1] && Buffer.from(match[1], 'base64').toString('utf8').includes(':');
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
      ['"Bearer <key> <extra>"', `Bearer ${key} extra`],
      ['"Bearer,<key>"', `Bearer,${key}`],
      ['a tab between scheme and key', `Bearer\t${key}`],
      ['a well-formed key that does not exist', `Bearer ${unknown}`],
    ];
    for (const [label, value] of forms) probe(label, value === undefined ? {} : { Authorization: value }, 401);
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
    ];
    for (const [label, value] of forms) probe(label, value === undefined ? {} : { Authorization: value }, 401);
  }
  return probes;
}
