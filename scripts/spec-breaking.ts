// `npm run spec:breaking -- --base <git ref>`: fails when openapi.yaml, compared with its
// version at <ref>, breaks clients written against that version, and names each break.
// A raised major `info.version` says the break is deliberate: the changes are listed and
// the check passes.
//
// The comparison is Optic's breaking-changes ruleset (@useoptic/standard-rulesets), run
// on both documents dereferenced by @apidevtools/json-schema-ref-parser. Optic does not
// treat a format replaced by another (int64 -> int32) as a break; that check is ours,
// read from Optic's own changelog of the two documents. Nor does it see what a request
// may carry narrowed behind allOf/oneOf/anyOf (an enum value removed from a shared enum),
// by a bound (maxLength, maximum, ...), or by a request field or query parameter removed
// where the service refuses unknown ones: requestNarrowing walks the requests.
//
// `npm run spec:changelog` (scripts/spec-changelog.ts) marks its entries breaking with the
// same findings (breakingFindings), read the same way from git (readComparison).
//
// A break that restores the interface we were given is not a break to refuse: each such
// correction is an entry of docs/interface-corrections.yaml, and only the exact change it
// names (one schema's `required` list, or one property's `pattern`, from `was` to `now`)
// is accepted, and only by the change that adds the entry (an entry the file already held
// at <ref> accepts nothing). A pattern entry writes down a rule the service already
// applied, or refuses only what could never work (an address no mail can reach), so no
// request a client could rely on is refused.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import $RefParser from '@apidevtools/json-schema-ref-parser';
import { ChangeType, OpenAPITraverser, factsToChangelog, type IChange, type IFact } from '@useoptic/openapi-utilities';
import { RuleRunner } from '@useoptic/rulesets-base';
import { BreakingChangesRuleset } from '@useoptic/standard-rulesets';
import { parse } from 'yaml';
import * as z from 'zod';
import { operationsIn, type SpecOperation } from '../server/spec';

type Document = Record<string, unknown>;

/** Where the accepted corrections are listed, relative to the repository. */
export const correctionsFile = 'docs/interface-corrections.yaml';

const correctionBase = {
  /** A schema of `components.schemas`. */
  schema: z.string().min(1),
  /** The text of the break it accepts, as the check names it (`cannot make required response property`). */
  rule: z.string().min(1),
  why: z.string().min(1),
  /** What the interface states, which the correction restores (or that it does not speak of the schema). */
  interface: z.string().min(1),
};
const Correction = z.union([
  z.strictObject({
    ...correctionBase,
    /** The schema's `required` list before the correction and after it (the interface's). */
    required: z.strictObject({ was: z.array(z.string()), now: z.array(z.string()) }),
  }),
  z.strictObject({
    ...correctionBase,
    /** A property of the schema whose `pattern` the correction sets. */
    property: z.string().min(1),
    /** Its pattern before (null: none) and after: a rule the service already applied, written down. */
    pattern: z.strictObject({ was: z.string().nullable(), now: z.string().min(1) }),
  }),
]);
export type Correction = z.infer<typeof Correction>;

/** The entries of a docs/interface-corrections.yaml, checked; none when there is no file. */
export function parseCorrections(text: string | undefined): Correction[] {
  return text === undefined ? [] : z.array(Correction).parse(parse(text) ?? []);
}

/** The entries of `now` that `was` does not hold: the corrections a change adds. */
export function addedCorrections(was: readonly Correction[], now: readonly Correction[]): Correction[] {
  const key = (c: Correction) =>
    JSON.stringify(
      'required' in c
        ? [c.schema, c.rule, [...c.required.was].sort(), [...c.required.now].sort()]
        : [c.schema, c.rule, c.property, c.pattern.was, c.pattern.now],
    );
  const old = new Set(was.map(key));
  return now.filter((c) => !old.has(key(c)));
}

type Schema = { required?: string[]; properties?: Record<string, { pattern?: string }> };
const schemaOf = (doc: Document, name: string): Schema | undefined =>
  (doc.components as { schemas?: Record<string, Schema> } | undefined)?.schemas?.[name];
const sameSet = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');

/**
 * `before` with every correction that this change makes applied to it, and the corrections
 * applied. A correction applies only when `before`'s list is exactly its `was` and `after`'s
 * exactly its `now`: once made it never applies again, and any other change to the same
 * list (one more field dropped, say) is compared as usual.
 */
function corrected(before: Document, after: Document, corrections: readonly Correction[]): { base: Document; applied: Correction[] } {
  const base = structuredClone(before);
  const applied: Correction[] = [];
  for (const c of corrections) {
    const was = schemaOf(base, c.schema);
    const now = schemaOf(after, c.schema);
    if (!was || !now) continue;
    if ('required' in c) {
      if (!sameSet(was.required ?? [], c.required.was) || !sameSet(now.required ?? [], c.required.now)) continue;
      if (c.required.now.length > 0) was.required = [...c.required.now];
      else delete was.required;
    } else {
      const property = was.properties?.[c.property];
      if (!property || (property.pattern ?? null) !== c.pattern.was || now.properties?.[c.property]?.pattern !== c.pattern.now) continue;
      property.pattern = c.pattern.now;
    }
    applied.push(c);
  }
  return { base, applied };
}

const factsOf = (doc: Document): IFact[] => {
  const traverser = new OpenAPITraverser();
  traverser.traverse(doc as never);
  return [...traverser.facts()];
};

const formatOf = (value: unknown): string | undefined => {
  const v = value as { flatSchema?: { format?: string }; schema?: { format?: string } } | undefined;
  return v?.flatSchema?.format ?? v?.schema?.format;
};

/**
 * Where a break is, for the changelog to put it under its entry: the operation, the part of
 * it (a parameter, the request body, a response), and the field's property names.
 */
export interface Place {
  method: string;
  path: string;
  in?: 'parameter' | 'request' | 'response';
  /** `query status` */
  parameter?: string;
  status?: string;
  field?: string[];
}

/** One break (or note): the line spec:breaking prints, and its place. */
export interface Finding {
  line: string;
  at: Place;
}

/** The property names of a JSON Schema trail: ['items', 'tags', 'allOf', '0'] -> ['tags']. */
const fieldOf = (trail: readonly unknown[]): string[] =>
  trail
    .map(String)
    .filter((k) => !['items', 'allOf', 'oneOf', 'anyOf', 'properties', 'additionalProperties'].includes(k) && !/^\d+$/.test(k));

/** The place Optic records for a change; the operation alone when it records none. */
function placeOf(change: IChange | undefined, where: string): Place {
  const at = change?.location?.conceptualLocation as
    | {
        method?: string;
        path?: string;
        inRequest?: { query?: string; header?: string; path?: string; cookie?: string; body?: unknown };
        inResponse?: { statusCode?: string };
        jsonSchemaTrail?: string[];
      }
    | undefined;
  const [method = '', path = ''] = where.split(' ');
  const place: Place = { method: (at?.method ?? method).toUpperCase(), path: at?.path ?? path };
  const request = at?.inRequest;
  const parameter = (['query', 'header', 'path', 'cookie'] as const).find((k) => request?.[k] !== undefined);
  if (parameter) Object.assign(place, { in: 'parameter', parameter: `${parameter} ${String(request?.[parameter])}` });
  else if (request?.body !== undefined) place.in = 'request';
  else if (at?.inResponse) Object.assign(place, { in: 'response', status: at.inResponse.statusCode });
  if (at?.jsonSchemaTrail) place.field = fieldOf(at.jsonSchemaTrail);
  return place;
}

/** Where a change sits: `GET /pets query ids`, `POST /pets 201 application/json categoryId`. */
function whereOf(change: IChange): string {
  const [, path, method, ...rest] = change.location.conceptualPath;
  return [`${String(method).toUpperCase()} ${String(path)}`, ...rest.filter((part) => part !== 'responses' && part !== 'parameters')].join(
    ' ',
  );
}

/**
 * Every change to `before` that breaks a client of it, one line each (`breaks`), and the
 * new values of response enums (`notes`): Optic counts those as breaks, but openapi.yaml's
 * enums (Error.code first) grow with the service, and a client must treat a value it does
 * not know by the response's status, so they are listed, not refused. `accepted` names
 * the breaks that `corrections` accept: the comparison is made against `before` with the
 * corrections applied, and a break it no longer finds is accepted only when its text is
 * a correction's rule naming a field that correction drops; anything else stays a break.
 */
export async function breakingChanges(
  before: Document,
  after: Document,
  corrections: readonly Correction[] = [],
): Promise<{ breaks: string[]; notes: string[]; accepted: string[] }> {
  const found = await breakingFindings(before, after, corrections);
  const lines = (list: Finding[]) => list.map((f) => f.line);
  return { breaks: lines(found.breaks), notes: lines(found.notes), accepted: lines(found.accepted) };
}

/** breakingChanges with each line's place: what spec:breaking and spec:changelog both read. */
export async function breakingFindings(
  before: Document,
  after: Document,
  corrections: readonly Correction[] = [],
): Promise<{ breaks: Finding[]; notes: Finding[]; accepted: Finding[] }> {
  const { base, applied } = corrected(before, after, corrections);
  if (applied.length === 0) return { ...(await compare(before, after)), accepted: [] };
  const [plain, fixed] = await Promise.all([compare(before, after), compare(base, after)]);
  const gone = plain.breaks.filter((f) => !fixed.breaks.some((g) => g.line === f.line));
  const accepts = ({ line }: Finding) =>
    applied.some((c) =>
      'required' in c
        ? line.includes(c.rule) && c.required.was.some((name) => !c.required.now.includes(name) && line.includes(`'${name}'`))
        : line.includes(` ${c.property}: ${c.rule}`),
    );
  return { breaks: [...fixed.breaks, ...gone.filter((f) => !accepts(f))], notes: fixed.notes, accepted: gone.filter(accepts) };
}

type Found = { where: string; what: string; at: Place };

async function compare(before: Document, after: Document): Promise<{ breaks: Finding[]; notes: Finding[] }> {
  const [from, to] = await Promise.all([
    $RefParser.dereference<Document>(structuredClone(before) as never),
    $RefParser.dereference<Document>(structuredClone(after) as never),
  ]);
  const currentFacts = factsOf(from);
  const nextFacts = factsOf(to);
  const changelog = factsToChangelog(currentFacts, nextFacts);
  const results = await new RuleRunner([new BreakingChangesRuleset()]).runRulesWithFacts({
    context: {},
    currentFacts,
    nextFacts,
    changelog,
    currentJsonLike: from as never,
    nextJsonLike: to as never,
  });

  const found: Found[] = [];
  for (const result of results) {
    if (result.passed || result.exempted) continue;
    const where = result.where ?? '';
    found.push({
      where,
      what: (result.error ?? result.name ?? 'breaking change').replace(/ This is a breaking change\.?$/, ''),
      at: placeOf((result as { change?: IChange }).change, where),
    });
  }
  for (const change of changelog) {
    if (change.changeType !== ChangeType.Changed) continue;
    const was = formatOf(change.changed.before);
    const now = formatOf(change.changed.after);
    // Adding a format to a bounded integer (`minimum`/`maximum` inside int32) refuses
    // nothing it accepted, so only a format replaced by another counts.
    if (was !== undefined && now !== undefined && was !== now) {
      const where = whereOf(change);
      found.push({ where, what: `format changed from ${was ?? 'none'} to ${now ?? 'none'}`, at: placeOf(change, where) });
    }
  }
  // What a request may carry, narrowed where Optic does not look: an enum value removed
  // behind allOf / oneOf / anyOf (a shared enum under a description, say), and bounds.
  const optic = found.map((f) => `${f.where}: ${f.what}`);
  for (const n of requestNarrowing(from, to)) {
    const value = /^cannot remove enum option '(.*)'$/.exec(n.what)?.[1];
    const [method, path] = n.where.split(' ');
    const field = n.where.split(' ').pop();
    const seen =
      value !== undefined &&
      optic.some((l) => l.startsWith(`${method} ${path} `) && l.includes(`${field}:`) && l.includes(`enum option '${value}'`));
    if (!seen) found.push(n);
  }
  // A removed operation or status takes its fields with it: name only the removal.
  const removals = found.filter((f) => /cannot remove an operation|must not remove response status code/.test(f.what)).map((f) => f.where);
  const named = found.filter((f) => !removals.some((where) => f.where !== where && f.where.startsWith(`${where} `)));
  const lines = new Map<string, Finding>();
  for (const f of named) {
    const line = `${f.where}: ${f.what}`;
    if (!lines.has(line)) lines.set(line, { line, at: f.at });
  }
  const added = (f: Finding) => /cannot add enum options? /.test(f.line);
  const all = [...lines.values()];
  return { breaks: all.filter((f) => !added(f)), notes: all.filter(added) };
}

type Json = Record<string, unknown>;

/**
 * One schema as a client's request meets it: `allOf` parts merged, each bound the
 * strictest of its parts, each enum the values every part allows.
 */
function merged(schema: unknown): Json {
  const s = (schema ?? {}) as Json;
  if (!Array.isArray(s.allOf)) return s;
  const out: Json = { ...s };
  delete out.allOf;
  for (const part of (s.allOf as unknown[]).map(merged)) {
    for (const [k, v] of Object.entries(part)) {
      const mine = out[k];
      if (mine === undefined) out[k] = v;
      else if (k === 'enum' && Array.isArray(mine) && Array.isArray(v))
        out[k] = mine.filter((x) => v.some((y) => JSON.stringify(y) === JSON.stringify(x)));
      else if (['maxLength', 'maximum', 'maxItems', 'maxProperties'].includes(k) && typeof mine === 'number' && typeof v === 'number')
        out[k] = Math.min(mine, v);
      else if (['minLength', 'minimum', 'minItems', 'minProperties'].includes(k) && typeof mine === 'number' && typeof v === 'number')
        out[k] = Math.max(mine, v);
      else if (k === 'properties') out[k] = { ...(v as Json), ...(mine as Json) };
      else if (k === 'required' && Array.isArray(mine) && Array.isArray(v))
        out[k] = [...new Set([...(mine as unknown[]), ...(v as unknown[])])];
    }
  }
  return out;
}

const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/** Where `after` accepts less than `before` in one request schema, one change each. */
function narrowed(before: unknown, after: unknown, where: string, at: Place, out: Found[], seen: Set<unknown>): void {
  if (!before || !after || typeof before !== 'object' || typeof after !== 'object' || seen.has(before)) return;
  seen.add(before);
  const push = (what: string) => out.push({ where, what, at });
  const a = merged(before);
  const b = merged(after);
  const num = (s: Json, k: string) => (typeof s[k] === 'number' ? s[k] : undefined);
  if (Array.isArray(b.enum)) {
    if (Array.isArray(a.enum)) {
      for (const value of a.enum) {
        if (!b.enum.some((x) => JSON.stringify(x) === JSON.stringify(value))) push(`cannot remove enum option '${show(value)}'`);
      }
    } else push(`cannot restrict to the enum ${JSON.stringify(b.enum)}`);
  }
  for (const k of ['maxLength', 'maximum', 'maxItems', 'maxProperties']) {
    const was = num(a, k);
    const now = num(b, k);
    if (now !== undefined && (was === undefined || now < was)) push(`cannot narrow ${k} from ${was ?? 'none'} to ${now}`);
  }
  for (const k of ['minLength', 'minimum', 'minItems', 'minProperties']) {
    const was = num(a, k);
    const now = num(b, k);
    if (now !== undefined && (was === undefined || now > was)) push(`cannot narrow ${k} from ${was ?? 'none'} to ${now}`);
  }
  for (const [k, bound] of [
    ['exclusiveMaximum', 'maximum'],
    ['exclusiveMinimum', 'minimum'],
  ] as const) {
    if (b[k] === true && a[k] !== true && num(a, bound) === num(b, bound) && num(b, bound) !== undefined)
      push(`cannot make ${bound} ${num(b, bound)} exclusive`);
  }
  if (typeof b.pattern === 'string' && b.pattern !== a.pattern)
    push(`cannot change pattern from ${show(a.pattern ?? 'none')} to ${b.pattern}`);
  const props = (s: Json) => (s.properties ?? {}) as Json;
  const field = at.field ?? [];
  for (const [name, schema] of Object.entries(props(a))) {
    // The service refuses an unknown property: a client still sending this one gets a 400.
    if (!(name in props(b)) && b.additionalProperties === false) {
      out.push({
        where: `${where} ${name}`,
        what: `cannot remove request property '${name}' (unknown properties are refused)`,
        at: { ...at, field: [...field, name] },
      });
      continue;
    }
    narrowed(schema, props(b)[name], `${where} ${name}`, { ...at, field: [...field, name] }, out, seen);
  }
  if (a.items && b.items) narrowed(a.items, b.items, `${where}[]`, at, out, seen);
  for (const k of ['oneOf', 'anyOf']) {
    const [x, y] = [a[k], b[k]];
    if (Array.isArray(x) && Array.isArray(y)) x.forEach((part, i) => narrowed(part, y[i], `${where} ${k}[${i}]`, at, out, seen));
  }
}

/** Request parameters and bodies of each operation both documents have, compared with `narrowed`. */
function requestNarrowing(before: Document, after: Document): Found[] {
  const out: Found[] = [];
  const inAfter = new Map([...operationsIn(after)].map((b) => [`${b.method} ${b.path}`, b]));
  const params = ({ item, operation }: SpecOperation) => [
    ...((item.parameters ?? []) as Json[]),
    ...((operation.parameters ?? []) as Json[]),
  ];
  const body = ({ operation }: SpecOperation) =>
    ((operation.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json']?.schema;
  for (const a of operationsIn(before)) {
    const b = inAfter.get(`${a.method} ${a.path}`);
    if (!b) continue;
    const name = `${a.method.toUpperCase()} ${a.path}`;
    const op = { method: a.method.toUpperCase(), path: a.path };
    const inB = params(b);
    for (const p of params(a)) {
      const q = inB.find((x) => x.name === p.name && x.in === p.in);
      const where = `${name} ${String(p.in)} parameter ${String(p.name)}`;
      const at: Place = { ...op, in: 'parameter', parameter: `${String(p.in)} ${String(p.name)}` };
      if (q) narrowed(p.schema, q.schema, where, at, out, new Set());
      // The service refuses an unknown query parameter: a client still sending this one gets a 400.
      else if (p.in === 'query')
        out.push({ where, what: `cannot remove query parameter '${String(p.name)}' (unknown query parameters are refused)`, at });
    }
    narrowed(body(a), body(b), `${name} request body`, { ...op, in: 'request', field: [] }, out, new Set());
  }
  return out;
}

export const versionOf = (doc: Document) => String((doc.info as { version?: string } | undefined)?.version ?? '0');
const major = (doc: Document) => Number(versionOf(doc).split('.')[0]);

/** What the two documents are: openapi.yaml at `ref` (git) and in the working tree, with the corrections added since. */
export interface Comparison {
  before: Document;
  after: Document;
  corrections: Correction[];
}

/** The --base REF a command was given, or exit 2 with its usage. */
export function baseRef(usage: string): string {
  const args = process.argv.slice(2);
  const at = args.indexOf('--base');
  const ref = at >= 0 ? args[at + 1] : undefined;
  if (ref && !ref.startsWith('--')) return ref;
  console.error(usage);
  process.exit(2);
}

/**
 * When `ref` names nothing in the repository (a release tag a clone does not have, say):
 * what it could name instead, the tags and branches there are, and a commit that is
 * always there.
 */
function refsHere(ref: string, root: string): string {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return undefined;
    }
  };
  if (git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`) !== undefined) return '';
  const list = (text: string | undefined) => (text ? text.split('\n').slice(0, 8).join(', ') : 'none');
  const tags = list(git('tag', '--list', '--sort=-creatordate'));
  const branches = list(git('for-each-ref', '--format=%(refname:short)', 'refs/heads', 'refs/remotes'));
  return `\n${ref} is no tag, branch or commit here. Tags: ${tags}. Branches: ${branches}. The last commit is HEAD, the one before it HEAD~1.`;
}

/**
 * openapi.yaml as it was at git ref `ref` (`git show`) beside the working tree's, in
 * `root`, the repository whose history is compared, and the corrections to the interface
 * that this change adds. Exit 2, naming why, when the file cannot be read at `ref`.
 */
export function readComparison(ref: string, root: string): Comparison {
  const show = (path: string) =>
    execFileSync('git', ['show', `${ref}:${path}`], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let previous: string;
  try {
    previous = show('openapi.yaml');
  } catch (error) {
    console.error(
      `Cannot read openapi.yaml at ${ref}: ${String((error as { stderr?: string }).stderr ?? error).trim()}${refsHere(ref, root)}`,
    );
    process.exit(2);
  }
  const before = parse(previous) as Document;
  const after = parse(readFileSync(join(root, 'openapi.yaml'), 'utf8')) as Document;
  const correctionsNow = existsSync(join(root, correctionsFile)) ? readFileSync(join(root, correctionsFile), 'utf8') : undefined;
  let correctionsThen: string | undefined;
  try {
    correctionsThen = show(correctionsFile);
  } catch {
    correctionsThen = undefined; // no such file at <ref>: every entry is new
  }
  return { before, after, corrections: addedCorrections(parseCorrections(correctionsThen), parseCorrections(correctionsNow)) };
}

async function main(): Promise<void> {
  const ref = baseRef('Usage: npm run spec:breaking -- --base <git ref>   (compares openapi.yaml with its version at <ref>)');
  // npm runs scripts in the package folder: the repository whose history is compared.
  const { before, after, corrections } = readComparison(ref, process.cwd());
  const { breaks, notes, accepted } = await breakingChanges(before, after, corrections);
  if (accepted.length > 0) {
    console.log(`${accepted.length} change(s) against ${ref} accepted as corrections to the interface (${correctionsFile}):`);
    for (const line of accepted) console.log(`  - ${line}`);
  }
  if (notes.length > 0) {
    console.log(`${notes.length} response enum(s) with new values against ${ref} (clients treat unknown values by status):`);
    for (const line of notes.slice(0, 20)) console.log(`  - ${line}`);
  }
  if (breaks.length === 0) {
    console.log(`openapi.yaml keeps every promise of its version at ${ref}`);
    return;
  }
  const raised = major(after) > major(before);
  console.error(`${breaks.length} breaking change(s) against ${ref}:`);
  for (const line of breaks) console.error(`  - ${line}`);
  if (raised) {
    console.log(`info.version's major was raised (${versionOf(before)} -> ${versionOf(after)}): allowed.`);
    return;
  }
  console.error('Keep the old behaviour beside the new (add, do not change or remove), or raise the major of info.version.');
  process.exit(1);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
