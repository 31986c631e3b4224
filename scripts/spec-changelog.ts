// `npm run spec:changelog -- --base <git ref> [--format json]`: what changed in openapi.yaml
// since its version at <ref>, for the consumers of the API: operations added, removed and
// deprecated (with their sunset), and in the operations both versions have, parameters,
// request bodies, responses and their fields added, removed or changed (type, format,
// required) and enum values added or removed. Markdown by default, JSON for tools.
//
// Whether a change is breaking is not decided here: the findings of spec:breaking
// (scripts/spec-breaking.ts, breakingFindings) are put under the entries they are about, and
// one no entry describes is listed as a change of its own, so the changelog is breaking
// exactly when spec:breaking finds a break. The documents are compared with references
// inlined (server/spec.ts), walked with the spec's one walk over its operations.
import { breakingFindings, baseRef, readComparison, versionOf, type Finding, type Place } from './spec-breaking';
import { dereferenced, operationsIn, type SpecOperation } from '../server/spec';

type Json = Record<string, unknown>;

export type ChangeKind =
  | 'operation added'
  | 'operation removed'
  | 'operation deprecated'
  | 'sunset changed'
  | 'parameter added'
  | 'parameter removed'
  | 'parameter changed'
  | 'request body added'
  | 'request body removed'
  | 'request body changed'
  | 'response added'
  | 'response removed'
  | 'field added'
  | 'field removed'
  | 'field changed'
  | 'enum values added'
  | 'enum values removed'
  | 'changed';

/** One entry of the changelog. */
export interface Change {
  /** `GET /pets/{petId}` */
  operation: string;
  operationId?: string;
  kind: ChangeKind;
  /** Inside the operation: a parameter, the request body, or a response (with `status`). */
  in?: 'parameter' | 'request' | 'response';
  /** `query status` */
  parameter?: string;
  status?: string;
  /** The field, from the body (or parameter) down: `status`, `[].tags[]`, `` for the whole. */
  field?: string;
  /** What it is or how it changed: `integer, required`, `string -> integer`, `reserved`. */
  detail?: string;
  /** For a deprecation: the `x-deprecated-sunset` and `x-successor` written with it. */
  sunset?: string;
  successor?: string;
  /** Breaks a client of the base version, as spec:breaking says (its lines in `because`). */
  breaking: boolean;
  /** Breaking, but a correction to the interface accepts it (docs/interface-corrections.yaml). */
  accepted?: boolean;
  because?: string[];
}

export interface Changelog {
  base: string;
  from: string;
  to: string;
  /** Whether spec:breaking finds a break (before a raised major is taken into account). */
  breaking: boolean;
  changes: Change[];
}

/** What a field is, as the changelog compares it. */
interface Field {
  type?: string;
  format?: string;
  required: boolean;
  enum?: unknown[];
}

const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
const typeOf = (s: Json): string | undefined =>
  Array.isArray(s.type) ? (s.type as string[]).join('|') : typeof s.type === 'string' ? s.type : s.properties ? 'object' : undefined;

/** `allOf` parts merged into one schema: properties and required lists together, the first of everything else. */
function merged(schema: Json): Json {
  if (!Array.isArray(schema.allOf)) return schema;
  const out: Json = { ...schema };
  delete out.allOf;
  for (const part of (schema.allOf as Json[]).map(merged)) {
    for (const [k, v] of Object.entries(part)) {
      if (k === 'properties') out.properties = { ...(v as Json), ...(out.properties as Json | undefined) };
      else if (k === 'required') out.required = [...new Set([...((out.required as string[] | undefined) ?? []), ...(v as string[])])];
      else if (out[k] === undefined) out[k] = v;
    }
  }
  return out;
}

/** Every field of a schema by its path (`` the value itself, `name`, `[].status`), down to where a schema contains itself. */
function fieldsOf(schema: unknown, required = true): Map<string, Field> {
  const fields = new Map<string, Field>();
  const walk = (node: unknown, path: string, isRequired: boolean, above: Set<unknown>) => {
    if (!node || typeof node !== 'object' || above.has(node)) return;
    const s = merged(node as Json);
    const ancestors = new Set(above).add(node);
    const field: Field = { required: isRequired };
    const type = typeOf(s);
    if (type !== undefined) field.type = type;
    if (typeof s.format === 'string') field.format = s.format;
    if (Array.isArray(s.enum)) field.enum = s.enum;
    fields.set(path, field);
    const names = new Set((s.required as string[] | undefined) ?? []);
    for (const [name, child] of Object.entries((s.properties ?? {}) as Json))
      walk(child, path ? `${path}.${name}` : name, names.has(name), ancestors);
    if (s.items) walk(s.items, `${path}[]`, true, ancestors);
    for (const k of ['oneOf', 'anyOf'] as const)
      ((s[k] ?? []) as unknown[]).forEach((part, i) => walk(part, `${path} (${k} ${i + 1})`, isRequired, ancestors));
  };
  walk(schema, '', required, new Set());
  return fields;
}

const describeField = (f: Field) =>
  [f.format ? `${f.type ?? 'any'} (${f.format})` : f.type, f.required ? 'required' : 'optional'].filter(Boolean).join(', ');

/** Whether field `path` sits inside field `other`. */
const inside = (path: string, other: string) =>
  other !== '' && (path.startsWith(`${other}.`) || path.startsWith(`${other}[]`) || path.startsWith(`${other} (`));

/** The changes between two fields maps, under one place of an operation. */
function fieldChanges(was: Map<string, Field>, now: Map<string, Field>, place: Omit<Change, 'kind' | 'breaking'>): Change[] {
  const out: Change[] = [];
  const entry = (kind: ChangeKind, field: string, detail?: string): Change => ({
    ...place,
    kind,
    field,
    ...(detail !== undefined && { detail }),
    breaking: false,
  });
  for (const [path, a] of was) {
    const b = now.get(path);
    if (!b) {
      // A field removed takes the fields under it along: name only the field.
      if (![...was.keys()].some((other) => inside(path, other) && !now.has(other))) out.push(entry('field removed', path));
      continue;
    }
    const changed: string[] = [];
    if (a.type !== b.type) changed.push(`type ${a.type ?? 'any'} -> ${b.type ?? 'any'}`);
    if (a.format !== b.format) changed.push(`format ${a.format ?? 'none'} -> ${b.format ?? 'none'}`);
    if (a.required !== b.required) changed.push(b.required ? 'now required' : 'now optional');
    if (changed.length > 0) out.push(entry('field changed', path, changed.join(', ')));
    const added = (b.enum ?? []).filter((v) => a.enum && !a.enum.some((w) => JSON.stringify(w) === JSON.stringify(v)));
    const removed = (a.enum ?? []).filter((v) => !b.enum?.some((w) => JSON.stringify(w) === JSON.stringify(v)));
    if (added.length > 0) out.push(entry('enum values added', path, added.map(show).join(', ')));
    if (removed.length > 0) out.push(entry('enum values removed', path, removed.map(show).join(', ')));
  }
  for (const [path, b] of now) {
    if (was.has(path)) continue;
    if (![...now.keys()].some((other) => inside(path, other) && !was.has(other))) out.push(entry('field added', path, describeField(b)));
  }
  return out;
}

type Parameter = { name: string; in: string; required?: boolean; schema?: Json };
const parametersOf = ({ item, operation }: SpecOperation) =>
  new Map(
    [...((item.parameters ?? []) as Parameter[]), ...((operation.parameters ?? []) as Parameter[])].map((p) => [`${p.in} ${p.name}`, p]),
  );
const jsonOf = (holder: unknown): Json | undefined =>
  (holder as { content?: Record<string, { schema?: Json }> } | undefined)?.content?.['application/json']?.schema;
/** An extension's value as written; a YAML date (2027-06-30) may arrive as a Date. */
const text = (v: unknown) =>
  v instanceof Date ? v.toISOString().slice(0, 10) : typeof v === 'string' ? v : v === undefined ? undefined : JSON.stringify(v);

/** The changes to operations between two documents (references inlined), none marked breaking yet. */
function walk(before: Json, after: Json): Change[] {
  const changes: Change[] = [];
  const was = new Map([...operationsIn(before)].map((o) => [`${o.method.toUpperCase()} ${o.path}`, o]));
  const now = new Map([...operationsIn(after)].map((o) => [`${o.method.toUpperCase()} ${o.path}`, o]));
  const idOf = (o: SpecOperation) => (typeof o.operation.operationId === 'string' ? { operationId: o.operation.operationId } : {});

  for (const [name, b] of now) {
    const a = was.get(name);
    const op = { operation: name, ...idOf(b) };
    const deprecation = () => ({
      ...(text(b.operation['x-deprecated-sunset']) && { sunset: text(b.operation['x-deprecated-sunset']) }),
      ...(text(b.operation['x-successor']) && { successor: text(b.operation['x-successor']) }),
    });
    if (!a) {
      const summary = typeof b.operation.summary === 'string' ? { detail: b.operation.summary } : {};
      changes.push({ ...op, kind: 'operation added', ...summary, breaking: false });
      if (b.operation.deprecated === true) changes.push({ ...op, kind: 'operation deprecated', ...deprecation(), breaking: false });
      continue;
    }
    if (b.operation.deprecated === true && a.operation.deprecated !== true)
      changes.push({ ...op, kind: 'operation deprecated', ...deprecation(), breaking: false });
    else if (b.operation.deprecated === true && text(a.operation['x-deprecated-sunset']) !== text(b.operation['x-deprecated-sunset']))
      changes.push({
        ...op,
        kind: 'sunset changed',
        detail: `${text(a.operation['x-deprecated-sunset']) ?? 'none'} -> ${text(b.operation['x-deprecated-sunset']) ?? 'none'}`,
        ...deprecation(),
        breaking: false,
      });

    const pa = parametersOf(a);
    const pb = parametersOf(b);
    for (const [key, p] of pb) {
      const place = { ...op, in: 'parameter' as const, parameter: key };
      const q = pa.get(key);
      const schema = fieldsOf(p.schema, p.required === true);
      if (!q)
        changes.push({ ...place, kind: 'parameter added', detail: describeField(schema.get('') ?? { required: false }), breaking: false });
      else
        for (const c of fieldChanges(fieldsOf(q.schema, q.required === true), schema, place))
          changes.push(c.kind === 'field changed' && c.field === '' ? { ...c, kind: 'parameter changed' } : c);
    }
    for (const key of pa.keys())
      if (!pb.has(key)) changes.push({ ...op, in: 'parameter', parameter: key, kind: 'parameter removed', breaking: false });

    const ra = a.operation.requestBody as Json | undefined;
    const rb = b.operation.requestBody as Json | undefined;
    const request = { ...op, in: 'request' as const };
    if (rb && !ra)
      changes.push({ ...request, kind: 'request body added', detail: rb.required === true ? 'required' : 'optional', breaking: false });
    else if (ra && !rb) changes.push({ ...request, kind: 'request body removed', breaking: false });
    else if (ra && rb) {
      if ((ra.required === true) !== (rb.required === true))
        changes.push({
          ...request,
          kind: 'request body changed',
          detail: rb.required === true ? 'now required' : 'now optional',
          breaking: false,
        });
      changes.push(...fieldChanges(fieldsOf(jsonOf(ra)), fieldsOf(jsonOf(rb)), request));
    }

    const sa = (a.operation.responses ?? {}) as Json;
    const sb = (b.operation.responses ?? {}) as Json;
    for (const status of Object.keys(sb)) {
      const place = { ...op, in: 'response' as const, status };
      if (!(status in sa)) changes.push({ ...place, kind: 'response added', breaking: false });
      else changes.push(...fieldChanges(fieldsOf(jsonOf(sa[status])), fieldsOf(jsonOf(sb[status])), place));
    }
    for (const status of Object.keys(sa))
      if (!(status in sb)) changes.push({ ...op, in: 'response', status, kind: 'response removed', breaking: false });
  }
  for (const [name, a] of was)
    if (!now.has(name)) changes.push({ operation: name, ...idOf(a), kind: 'operation removed', breaking: false });
  return changes;
}

/** The property names of a changelog path: `[].tags[] (oneOf 1).name` -> ['tags', 'name']. */
const namesOf = (field: string | undefined) =>
  (field ?? '')
    .replace(/ \((oneOf|anyOf) \d+\)/g, '')
    .split(/\.|\[\]/)
    .filter(Boolean);

/** How well entry `c` describes finding `f` (0: not at all). */
function fit(c: Change, f: Finding): number {
  const at: Place = f.at;
  if (c.operation !== `${at.method} ${at.path}`) return 0;
  if (!at.in) return c.in === undefined ? 3 : 1;
  if (c.in !== at.in) return 0;
  if (at.parameter !== undefined && c.parameter !== at.parameter) return 0;
  if (at.status !== undefined && c.status !== at.status) return 0;
  const mine = namesOf(c.field).join('.');
  const theirs = (at.field ?? []).join('.');
  let score = mine === theirs ? 4 : theirs.startsWith(`${mine}.`) || mine === '' ? 2 : 0;
  if (score === 0) return 0;
  if (/enum option/.test(f.line) === c.kind.startsWith('enum')) score++;
  if (/remove/.test(f.line) === /removed/.test(c.kind)) score++;
  return score;
}

/** The changelog of `before` -> `after`, each change marked as spec:breaking's findings say. */
export async function changelog(
  before: Json,
  after: Json,
  options: { base: string; corrections?: Parameters<typeof breakingFindings>[2] },
): Promise<Changelog> {
  const changes = walk(dereferenced(before), dereferenced(after));
  const found = await breakingFindings(before, after, options.corrections ?? []);
  const place = (f: Finding, how: 'break' | 'accepted') => {
    let best: Change | undefined;
    let score = 0;
    for (const c of changes) {
      const s = fit(c, f);
      if (s > score) [best, score] = [c, s];
    }
    if (!best) {
      const at = f.at;
      best = {
        operation: `${at.method} ${at.path}`,
        kind: 'changed',
        ...(at.in && { in: at.in }),
        ...(at.parameter !== undefined && { parameter: at.parameter }),
        ...(at.status !== undefined && { status: at.status }),
        ...(at.field && { field: at.field.join('.') }),
        detail: f.line.slice(f.line.indexOf(': ') + 2),
        breaking: false,
      };
      changes.push(best);
    }
    best.because = [...(best.because ?? []), f.line];
    if (how === 'break') best.breaking = true;
    else best.accepted = true;
  };
  for (const f of found.breaks) place(f, 'break');
  for (const f of found.accepted) place(f, 'accepted');
  // An entry is accepted only when nothing but a correction makes it breaking.
  for (const c of changes) {
    if (!c.accepted) continue;
    if (c.breaking) delete c.accepted;
    else c.breaking = true;
  }
  return { base: options.base, from: versionOf(before), to: versionOf(after), breaking: found.breaks.length > 0, changes };
}

/** Inline code, fenced so that a backtick inside (a pattern) stays inside. */
const code = (s: string) => (s.includes('`') ? `\`\` ${s} \`\`` : `\`${s}\``);
const plain = (s: string) => s.replaceAll('`', '\\`');

/** One entry as a line; `statuses` when the same change is in several responses of the operation. */
function line(c: Change, statuses: string[]): string {
  const mark = c.accepted ? '**breaking** (a correction to the interface) ' : c.breaking ? '**breaking** ' : '';
  const [where = '', name = ''] = c.parameter?.split(' ') ?? [];
  const at =
    c.in === 'parameter'
      ? `${where} parameter ${code(name)}`
      : c.in === 'request'
        ? 'request body'
        : c.in === 'response'
          ? `response${statuses.length > 1 ? 's' : ''} ${statuses.join(', ')}`
          : 'operation';
  const field = c.field ? ` field ${code(c.field)}` : '';
  const detail = c.detail ? `: ${plain(c.detail)}` : '';
  const verb = c.kind.split(' ').pop() as string;
  if (c.kind === 'enum values added' || c.kind === 'enum values removed')
    return `${mark}${at}${field}: enum values ${verb}: ${(c.detail ?? '').split(', ').map(code).join(', ')}`;
  if (c.kind === 'sunset changed') return `${mark}sunset changed${detail}`;
  return `${mark}${at}${field} ${verb}${detail}`;
}

const title = (c: Change) => `${code(c.operation)}${c.operationId ? ` (${code(c.operationId)})` : ''}`;

/** The changelog as Markdown, for the consumers reading a release. */
export function markdown(log: Changelog): string {
  const out = [`# API changes since ${log.base}`, ''];
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const breaking = log.changes.filter((c) => c.breaking && !c.accepted).length;
  const accepted = log.changes.filter((c) => c.accepted).length;
  out.push(
    `\`openapi.yaml\` ${log.from} at \`${log.base}\` -> ${log.to} now. ` +
      (breaking > 0 ? `**${count(breaking, 'breaking change')}**` : 'No breaking changes') +
      (accepted > 0 ? ` (and ${count(accepted, 'correction')} to the interface a client may notice)` : '') +
      ', by the rules of `npm run spec:breaking`.',
    '',
  );
  const of = (kind: ChangeKind) => log.changes.filter((c) => c.kind === kind);
  const section = (heading: string, items: string[]) => {
    if (items.length > 0) out.push(`## ${heading}`, '', ...items.map((i) => `- ${i}`), '');
  };
  section(
    'Added operations',
    of('operation added').map((c) => `${title(c)}${c.detail ? `: ${plain(c.detail)}` : ''}`),
  );
  section(
    'Removed operations',
    of('operation removed').map((c) => `${c.breaking ? '**breaking** ' : ''}${title(c)}`),
  );
  section(
    'Deprecated operations',
    of('operation deprecated').map(
      (c) =>
        `${title(c)}: ${c.sunset ? `works until its sunset, ${c.sunset}` : 'no sunset set'}${c.successor ? `; use ${code(c.successor)}` : ''}`,
    ),
  );
  const rest = log.changes.filter((c) => !['operation added', 'operation removed', 'operation deprecated'].includes(c.kind));
  const operations = [...new Set(rest.map((c) => c.operation))];
  if (operations.length > 0) out.push('## Changed operations', '');
  for (const operation of operations) {
    // The same change in several responses (a shared Error, say) is one line naming them.
    const lines = new Map<string, { change: Change; statuses: string[] }>();
    for (const c of rest.filter((c) => c.operation === operation)) {
      const key = JSON.stringify({ ...c, status: undefined, because: undefined });
      const seen = lines.get(key);
      if (seen) seen.statuses.push(c.status ?? '');
      else lines.set(key, { change: c, statuses: c.status === undefined ? [] : [c.status] });
    }
    const first = lines.values().next().value as { change: Change };
    out.push(`### ${title(first.change)}`, '', ...[...lines.values()].map(({ change, statuses }) => `- ${line(change, statuses)}`), '');
  }
  if (log.changes.length === 0) out.push('No operation changed.', '');
  return out.join('\n');
}

async function main(): Promise<void> {
  const ref = baseRef('Usage: npm run spec:changelog -- --base <git ref> [--format markdown|json]');
  const at = process.argv.indexOf('--format');
  const format = at >= 0 ? process.argv[at + 1] : 'markdown';
  if (format !== 'markdown' && format !== 'json') {
    console.error(`--format is markdown (the default) or json, not ${String(format)}`);
    process.exit(2);
  }
  // npm runs scripts in the package folder: the repository whose history is compared.
  const { before, after, corrections } = readComparison(ref, process.cwd());
  const log = await changelog(before, after, { base: ref, corrections });
  process.stdout.write(format === 'json' ? `${JSON.stringify(log, null, 2)}\n` : markdown(log));
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
