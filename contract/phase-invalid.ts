// Invalid traffic for one operation: every parameter and body broken in each way its
// schema refuses, wrong content types, and malformed or insufficient credentials.
import fc from 'fast-check';
import type { Expectation } from './checks';
import { brokenBodies, brokenValues, flatten, typeOf } from './generate';
import type { SentRequest } from './http';
import { toJsonSchema } from './schema';
import type { Operation, Param, Schema } from './spec';
import { b64, type Inputs, type Run } from './runner';

export async function invalidTraffic(run: Run, op: Operation): Promise<void> {
  const param = run.itemParam(op);
  const target = param ? (op.method === 'get' ? (await run.available(param))[0] : run.live(param, true)[0]) : undefined;
  const auth = run.authFor(op, target?.owner);
  const inputs = run.generate(op, { target });
  if (param && !target) {
    const schema = op.params.find((p) => p.name === param)!.schema;
    inputs.pathParams[param] = run.dangling(schema);
  }
  await authProbes(run, op, inputs);
  if (!auth) return;
  const send = (label: string, expect: Expectation, request: SentRequest) => run.send(op, label, expect, request);

  for (const p of op.params) {
    for (const broken of brokenValues(flatten(p.schema, run.contract.deref), run.contract.deref)) {
      const text = broken.raw ?? (Array.isArray(broken.value) ? broken.value.map(String).join(',') : String(broken.value));
      if (broken.value === null || (typeof broken.value === 'object' && !Array.isArray(broken.value))) continue;
      if (p.in === 'header' && !/^[\x20-\x7e]*$/.test(text)) continue;
      if (p.in === 'path' && text === '') continue;
      // Parameters travel as text: "12" is a fine integer there, so only text that breaks the schema counts.
      if (acceptsText(run, p, text)) continue;
      const changed: Inputs = { ...inputs, pathParams: { ...inputs.pathParams }, query: inputs.query.filter(([q]) => q !== p), headers: inputs.headers.filter(([h]) => h !== p) };
      const raw = p.in === 'query' && Array.isArray(broken.value) && p.explode ? broken.value : text;
      if (p.in === 'path') changed.pathParams[p.name] = text;
      else (p.in === 'query' ? changed.query : changed.headers).push([p, raw]);
      await send(`${p.in} parameter "${p.name}" ${broken.label}`, { kind: 'invalid' }, run.build(op, changed, auth));
    }
    if (p.required && p.in !== 'path') {
      const without: Inputs = { ...inputs, query: inputs.query.filter(([q]) => q !== p), headers: inputs.headers.filter(([h]) => h !== p) };
      await send(`without required ${p.in} parameter "${p.name}"`, { kind: 'invalid' }, run.build(op, without, auth));
    }
  }
  await send('an unknown query parameter', { kind: 'invalid' }, run.build(op, inputs, auth, { extraQuery: 'unexpectedParameter=1' }));

  if (!op.body) return;
  const limit = run.o.bodyLimitBytes;
  for (const broken of brokenBodies(op.body.schema, inputs.body, run.contract.deref, limit)) {
    const tooLarge = broken.text.length > limit;
    const expect: Expectation = tooLarge && op.responses.has('413') ? { kind: 'status', status: 413 } : { kind: 'invalid' };
    await send(`a body ${broken.label}`, expect, run.build(op, inputs, auth, { rawBody: broken.text }));
  }
  const text = JSON.stringify(inputs.body ?? {});
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
    await send(`a JSON body sent as ${type}`, { kind: 'invalid' }, run.build(op, inputs, auth, { rawBody: text, contentType: type }));
  }
  await send('a JSON body without Content-Type', { kind: 'invalid' }, run.build(op, inputs, auth, { rawBody: text, contentType: null }));
  if (op.body.required) {
    await send('no body where one is required', { kind: 'invalid' }, run.build(op, { ...inputs, body: undefined }, auth));
  }
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
    out[k] = Array.isArray(v) ? v.map((x) => (x && typeof x === 'object' ? inline(run, x, depth + 1) : x)) : v && typeof v === 'object' && k !== 'enum' && k !== 'example' ? inline(run, v, depth + 1) : v;
  }
  return toJsonSchema(out) as Schema;
}

/** Every malformed Authorization form is 401; a customer on an admin operation is 403. */
async function authProbes(run: Run, op: Operation, inputs: Inputs): Promise<void> {
  const probe = (label: string, headers: Record<string, string>, status: number) =>
    run.send(op, label, { kind: 'status', status }, run.build(op, inputs, headers));
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
      ['Basic credentials where a Bearer key is needed', `Basic ${b64('someone@example.com:some password')}`],
      ['"Bearer <key> <extra>"', `Bearer ${key} extra`],
      ['"Bearer,<key>"', `Bearer,${key}`],
      ['a tab between scheme and key', `Bearer\t${key}`],
      ['a well-formed key that does not exist', `Bearer ${unknown}`],
    ];
    for (const [label, value] of forms) await probe(label, value === undefined ? {} : { Authorization: value }, 401);
    if (op.role && run.customer.header && run.customer !== run.admin) {
      await probe(`a customer key on an operation for ${op.role}s`, { Authorization: run.customer.header }, 403);
    }
  } else if (op.security === 'basic') {
    const email = run.basic?.email ?? 'someone@example.com';
    const forms: Array<[string, string | undefined]> = [
      ['no Authorization header', undefined],
      ['a wrong password', `Basic ${b64(`${email}:not the password`)}`],
      ['an unknown account', `Basic ${b64('nobody-at-all@example.com:some password')}`],
      ['Basic credentials without a colon', `Basic ${b64(email)}`],
      ['Basic credentials that are not base64', 'Basic !!!not-base64!!!'],
      ['"Basic" without credentials', 'Basic'],
      ['a Bearer key where Basic is needed', run.customer.header ?? 'Bearer ps_live_unknown'],
    ];
    for (const [label, value] of forms) await probe(label, value === undefined ? {} : { Authorization: value }, 401);
  }
}
