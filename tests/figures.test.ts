// One source for every figure the contract states. openapi.yaml's `info.x-limits` holds
// each limit, window, size and timeout its prose states, as the service has it by default;
// each statement below ties a sentence of the prose (or of the README) to the entry it is
// written from, or to the schema keyword it repeats. The test fails when a figure changes
// in one place only: in the prose, in x-limits, in the configuration's default, or in the
// configuration table (docs/configuration.md); and when the prose states a figure tied to nothing.
import { readFileSync } from 'node:fs';
import { maxHeaderSize } from 'node:http';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parse } from 'yaml';
import { idempotencyRetentionMs } from '../domain/idempotency';
import { repoRoot, serviceNodeFlags } from '../scripts/server-process';
import { configVariables, loadConfig, type Config } from '../server/config';
import { maxPipelined } from '../server/http/pipelining';
import { maxJsonDepth } from '../server/pipeline/body';
import { minBytes } from '../server/pipeline/compress';
import { maxRequestIdLength } from '../server/pipeline/request-id';

type Doc = { info: { 'x-limits': Record<string, unknown> } } & Record<string, unknown>;

/** What the service does by default, by the x-limits entry that states it, and where that default is set. */
const serviceDefaults = (c: Config): Array<[key: string, value: number, where: string]> => [
  ['bodyBytes', c.bodyLimitBytes, 'bodyLimitBytes, server/config.ts'],
  ['headerBytes', maxHeaderSize, "Node's http.maxHeaderSize"],
  ['jsonDepth', maxJsonDepth, 'maxJsonDepth, server/pipeline/body.ts'],
  ['requestIdLength', maxRequestIdLength, 'maxRequestIdLength, server/pipeline/request-id.ts'],
  ['headersTimeoutSeconds', c.headersTimeoutMs / 1000, 'HEADERS_TIMEOUT_MS'],
  ['requestTimeoutSeconds', c.requestTimeoutMs / 1000, 'REQUEST_TIMEOUT_MS'],
  ['requestsPerMinute', c.rateLimitPerMinute, 'RATE_LIMIT_PER_MINUTE'],
  ['requestsPerMinute', c.rateLimitPerAddressPerMinute, 'RATE_LIMIT_PER_ADDRESS_PER_MINUTE'],
  ['connectionsPerAddress', c.maxConnectionsPerAddress, 'MAX_CONNECTIONS_PER_ADDRESS'],
  ['pipelinedRequests', maxPipelined, 'maxPipelined, server/http/pipelining.ts'],
  ['unreadAnswersSeconds', c.sendTimeoutMs / 1000, 'SEND_TIMEOUT_MS'],
  ['failedLoginsPerAccount', c.loginFailuresPerAccount, 'LOGIN_FAILURES_PER_ACCOUNT'],
  ['failedLoginsPerAddress', c.loginFailuresPerAddress, 'LOGIN_FAILURES_PER_ADDRESS'],
  ['failedLoginWindowSeconds', c.loginLockoutMs / 1000, 'LOGIN_LOCKOUT_MINUTES'],
  ['passwordChecksPerAccountPerMinute', c.passwordChecksPerMinute, 'PASSWORD_CHECKS_PER_MINUTE'],
  ['signupsPerAddressPerHour', c.signupsPerAddressPerHour, 'SIGNUPS_PER_ADDRESS_PER_HOUR'],
  ['activeKeysPerAccount', c.bounds.activeApiKeysPerAccount, 'API_KEYS_PER_ACCOUNT'],
  ['queuedMessagesPerAccount', c.bounds.queuedMessagesPerAccount, 'QUEUED_MESSAGES_PER_ACCOUNT'],
  ['idempotencyKeySeconds', idempotencyRetentionMs / 1000, 'idempotencyRetentionMs, domain/idempotency.ts'],
  ['compressedAnswerBytes', minBytes, 'minBytes, server/pipeline/compress.ts'],
];

interface Source {
  name: string;
  value: (doc: Doc, config: Config) => number;
}
/** An x-limits entry, in the unit the sentence uses (`per` 1024 for KiB, 60 for minutes). */
const limit = (key: string, per = 1): Source => ({
  name: `x-limits.${key}${per === 1 ? '' : ` / ${per}`}`,
  value: (doc) => Number(doc.info['x-limits'][key]) / per,
});
/** A schema keyword the sentence repeats, by its JSON pointer; `read` takes the figure out of a pattern. */
const schema = (pointer: string, read: (v: unknown) => number = Number): Source => ({
  name: pointer,
  value: (doc) =>
    read(
      pointer
        .split('/')
        .slice(1)
        .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key.replaceAll('~1', '/')], doc),
    ),
});
const repeatCount = (pattern: unknown) => Number(/\{(\d+)\}/.exec(String(pattern))?.[1]);

/**
 * Where the prose states each figure: a phrase with the figure in its groups (commas are
 * thousands separators). Each phrase must be found, and every figure in it must be its source's.
 */
const statements: Array<{ source: Source; spec?: RegExp[]; readme?: RegExp[] }> = [
  { source: limit('bodyBytes', 1024), spec: [/\bbod(?:y|ies) (?:is )?over (\d+) KiB/], readme: [/bodies are limited to (\d+) KiB/] },
  { source: limit('bodyBytes'), spec: [/larger than (\d+) bytes/] },
  { source: limit('headerBytes', 1024), spec: [/headers together are over (\d+) KiB/] },
  { source: limit('jsonDepth'), spec: [/nested deeper than (\d+) levels/] },
  { source: limit('requestIdLength'), spec: [/sent one of 1 to (\d+) characters/] },
  { source: limit('headersTimeoutSeconds'), spec: [/headers within (\d+) s of their first byte/] },
  { source: limit('requestTimeoutSeconds'), spec: [/whole request within (\d+) s\b/] },
  { source: limit('requestsPerMinute'), spec: [/(\d+) requests a minute each by default/, /q=(\d+); w=60;/] },
  { source: limit('connectionsPerAddress'), spec: [/may hold (\d+) open connections/], readme: [/capped per address \((\d+)\)/] },
  { source: limit('pipelinedRequests'), spec: [/may have up to (\d+) requests sent ahead/] },
  { source: limit('unreadAnswersSeconds'), spec: [/takes none of its answers for\s+(\d+) s\b/] },
  { source: limit('failedLoginsPerAccount'), spec: [/after (\d+) failed HTTP Basic logins to one account/] },
  { source: limit('failedLoginsPerAddress'), spec: [/, or (\d+) from one address \(to any account\)/] },
  { source: limit('failedLoginWindowSeconds', 60), spec: [/in a window of (\d+) minutes/] },
  { source: limit('passwordChecksPerAccountPerMinute'), spec: [/checked at most (\d+) times a minute/] },
  { source: limit('signupsPerAddressPerHour'), spec: [/may create (\d+) accounts an hour/] },
  {
    source: limit('activeKeysPerAccount'),
    spec: [/(\d+) active API keys/, /at most (\d+) active keys/, /active API keys \((\d+) by default\)/, /keys \(at most (\d+)\)/],
  },
  {
    source: limit('queuedMessagesPerAccount'),
    spec: [
      /(\d+) messages not yet delivered/,
      /not yet delivered \((\d+) by default\)/,
      /has (\d+) messages not delivered yet \(at most (\d+)\)/,
    ],
  },
  { source: limit('idempotencyKeySeconds', 3600), spec: [/Kept per account for (\d+) hours/] },
  { source: limit('compressedAnswerBytes'), spec: [/JSON answers of at least ([\d,]+) bytes/] },
  { source: limit('compressedAnswerBytes', 1024), readme: [/JSON answers of (\d+) KB or more/] },
  { source: schema('/components/parameters/Limit/schema/default'), spec: [/`limit` \(default (\d+), 1 to \d+/] },
  { source: schema('/components/parameters/Limit/schema/maximum'), spec: [/`limit` \(default \d+, 1 to (\d+)/, /Page size, 1 to (\d+)/] },
  {
    source: schema('/paths/~1pets/get/parameters/2/schema/maxItems'),
    spec: [/a comma-separated list of up to (\d+) ids/, /\(`ids=1,2,3`\), at most (\d+)/],
  },
  { source: schema('/components/schemas/InventoryUpdate/properties/quantity/maximum'), spec: [/stock never goes above ([\d,]+)/] },
  { source: schema('/components/schemas/NewOrder/properties/quantity/default'), spec: [/`quantity` \(default (\d+)\)/] },
  { source: schema('/components/parameters/IdempotencyKey/schema/maxLength'), spec: [/1 to (\d+) printable ASCII characters/] },
  {
    source: schema('/components/schemas/CreatedApiKey/properties/key/pattern', repeatCount),
    spec: [/followed by (\d+) base64url characters/],
  },
  { source: schema('/components/schemas/MessageId/pattern', repeatCount), spec: [/`msg_` and (\d+) hex digits/] },
  {
    source: schema('/components/schemas/NewAccount/properties/email/pattern', (p) => Number(/\{1,(\d+)\}@/.exec(String(p))?.[1])),
    spec: [/dots between them\) of at most (\d+) characters/],
  },
  {
    source: schema('/components/schemas/NewAccount/properties/email/pattern', (p) => Number(/\{0,(\d+)\}/.exec(String(p))?.[1]) + 2),
    spec: [/inner hyphens\) of at most (\d+) characters each/],
  },
  {
    source: schema('/components/schemas/NewAccount/properties/email/maxLength'),
    spec: [/characters each; (\d+) characters in all/, /with an email of at most (\d+) characters/],
  },
  {
    source: { name: 'SHUTDOWN_DELAY_MS / 1000', value: (_doc, c) => c.shutdownDelayMs / 1000 },
    readme: [/`SHUTDOWN_DELAY_MS` \((\d+) s\)/],
  },
];

/**
 * What reads as a limit, window, size or timeout: a number with a unit, with what it
 * counts, or after a bound ("at most 20", "1 to 100", "20 by default").
 */
const figureLike = [
  /\b(\d[\d,]*) ?(?:KiB|MiB|GiB|bytes?|ms|s|seconds?|minutes?|hours?|days?|weeks?)\b/g,
  /\b(\d[\d,]*) (?:[\w-]+ ){0,3}?(?:times|requests|accounts|logins|keys|messages|connections|levels|characters|digits|ids|items)\b/gi,
  /\b(?:at most|up to|over|above|below|under|more than|fewer than|deeper than|longer than|larger than|default|within) (\d[\d,]*)/gi,
  /\b(\d[\d,]*),? by default\b/g,
  /\b\d[\d,]* to (\d[\d,]*)/g,
];
/** Figures the prose writes that are no bound of the service, each with why. */
const notLimits: Array<[RegExp, string]> = [
  [/retry in 42 seconds/, 'a wait in an example of rate_limited'],
  [/1 to 2\^53-1/, "Id's maximum, written as the power of two it is"],
];

/** Every description and summary, and every string in an example (messages), as one line each. */
function proseOf(doc: unknown): string[] {
  const out: string[] = [];
  const walk = (node: unknown, key: string, inExample: boolean) => {
    if (typeof node === 'string') {
      if (inExample || key === 'description' || key === 'summary') out.push(node.replace(/\s+/g, ' '));
    } else if (Array.isArray(node)) node.forEach((item) => walk(item, key, inExample));
    else if (node && typeof node === 'object')
      for (const [k, v] of Object.entries(node)) walk(v, k, inExample || k === 'example' || k === 'examples');
  };
  walk(doc, '', false);
  return out;
}

/** The README configuration table's defaults: the first value in backticks, unless the cell starts "(unset". */
function readmeDefaults(readme: string): Array<[name: string, value: string | undefined]> {
  return [...readme.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \|/gm)]
    .filter((m) => configVariables.includes(m[1]!) && !m[2]!.trim().startsWith('(unset'))
    .map((m) => [m[1]!, /^`([^`]*)`/.exec(m[2]!.trim())?.[1]]);
}

/**
 * Every disagreement between the prose (`spec`, `readme`), x-limits, the configuration's
 * defaults (the configuration read from `env`; `{}` is the defaults as they are) and the
 * README's table, in words.
 */
function disagreements({ spec, readme, env = {} }: { spec: string; readme: string; env?: Record<string, string> }): string[] {
  const doc = parse(spec) as Doc;
  const config = loadConfig(env);
  const limits = doc.info['x-limits'];
  const out: string[] = [];

  const defaults = serviceDefaults(config);
  for (const [key, value, where] of defaults) {
    if (limits[key] !== value) out.push(`x-limits.${key} is ${String(limits[key])}; the service's default (${where}) is ${value}`);
  }
  for (const key of Object.keys(limits)) {
    if (!defaults.some(([k]) => k === key)) out.push(`x-limits.${key} is tied to none of the service's defaults`);
  }

  for (const [name, value] of readmeDefaults(readme)) {
    let same: boolean;
    try {
      same = value !== undefined && isDeepStrictEqual(loadConfig({ ...env, [name]: value }), config);
    } catch {
      same = false;
    }
    if (!same) out.push(`docs/configuration.md's table gives ${name} the default ${String(value)}, which is not the configuration's`);
  }

  const texts = { spec: proseOf(doc), readme: [readme.replace(/\s+/g, ' ')] };
  const tied: Array<{ text: string; from: number; to: number }> = [];
  for (const { source, ...where } of statements) {
    const expected = source.value(doc, config);
    for (const file of ['spec', 'readme'] as const) {
      for (const phrase of where[file] ?? []) {
        const found = texts[file].flatMap((text) => [...text.matchAll(new RegExp(phrase, 'g'))].map((m) => ({ m, text })));
        if (found.length === 0)
          out.push(`${file === 'spec' ? 'openapi.yaml' : 'README.md or docs/configuration.md'} no longer says ${phrase} (${source.name})`);
        for (const { m, text } of found) {
          tied.push({ text, from: m.index, to: m.index + m[0].length });
          const stated = m.slice(1).map((g) => Number(g.replaceAll(',', '')));
          if (stated.some((n) => n !== expected)) out.push(`"${m[0]}" states ${stated.join(' and ')}; ${source.name} is ${expected}`);
        }
      }
    }
  }
  for (const [phrase] of notLimits) {
    for (const text of texts.spec)
      for (const m of text.matchAll(new RegExp(phrase, 'g'))) tied.push({ text, from: m.index, to: m.index + m[0].length });
  }

  for (const text of texts.spec) {
    for (const pattern of figureLike) {
      for (const m of text.matchAll(pattern)) {
        const at = m.index + m[0].lastIndexOf(m[1]!);
        if (Number(m[1]!.replaceAll(',', '')) === 0) continue; // nothing is bounded at 0
        if (!tied.some((t) => t.text === text && t.from <= at && at < t.to)) {
          out.push(`openapi.yaml states a figure tied to nothing: "${m[0]}" in "…${text.slice(Math.max(0, at - 60), at + 40)}…"`);
        }
      }
    }
  }
  return [...new Set(out)];
}

const spec = readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8');
// The README's prose and docs/configuration.md (the configuration table), read as one text.
const readme = ['README.md', 'docs/configuration.md'].map((file) => readFileSync(join(repoRoot, file), 'utf8')).join('\n');

describe('the figures openapi.yaml and the README state', () => {
  it('agree with x-limits, the configuration defaults and the README configuration table', () => {
    expect(disagreements({ spec, readme })).toEqual([]);
  });

  it('are found: every statement and every README default is read', () => {
    expect(readmeDefaults(readme).map(([name]) => name)).toEqual(
      expect.arrayContaining(['PASSWORD_CHECKS_PER_MINUTE', 'LOGIN_LOCKOUT_MINUTES', 'SHUTDOWN_DELAY_MS', 'DATABASE_TIMEOUT_MS']),
    );
    const described = (parse(spec) as Doc).info['x-limits'];
    expect(Object.keys(described).filter((key) => !statements.some((s) => s.source.name.startsWith(`x-limits.${key}`)))).toEqual([]);
  });
});

describe('a figure changed in one place only', () => {
  const once = (text: string, from: string, to: string) => {
    expect(text.split(from)).toHaveLength(2);
    return text.replace(from, () => to);
  };

  it('in the prose: the sentence is named with the entry it contradicts', () => {
    const changed = once(
      spec,
      'is checked at most 30 times a minute by default, successful',
      'is checked at most 10 times a minute by default, successful',
    );
    expect(disagreements({ spec: changed, readme })).toEqual([
      '"checked at most 10 times a minute" states 10; x-limits.passwordChecksPerAccountPerMinute is 30',
    ]);
  });

  it('in x-limits: the service and every sentence written from it disagree', () => {
    const changed = once(spec, 'activeKeysPerAccount: 20', 'activeKeysPerAccount: 25');
    const found = disagreements({ spec: changed, readme });
    expect(found[0]).toBe("x-limits.activeKeysPerAccount is 25; the service's default (API_KEYS_PER_ACCOUNT) is 20");
    expect(found).toContain('"at most 20 active keys" states 20; x-limits.activeKeysPerAccount is 25');
    expect(found).toContain('"keys (at most 20)" states 20; x-limits.activeKeysPerAccount is 25');
  });

  it("in the configuration's default: x-limits and the README disagree with it", () => {
    expect(disagreements({ spec, readme, env: { LOGIN_LOCKOUT_MINUTES: '20' } })).toEqual([
      "x-limits.failedLoginWindowSeconds is 900; the service's default (LOGIN_LOCKOUT_MINUTES) is 1200",
      "docs/configuration.md's table gives LOGIN_LOCKOUT_MINUTES the default 15, which is not the configuration's",
    ]);
  });

  it("in docs/configuration.md's table or the README's prose", () => {
    const table = once(readme, '| `SIGNUPS_PER_ADDRESS_PER_HOUR` | `10` |', '| `SIGNUPS_PER_ADDRESS_PER_HOUR` | `12` |');
    expect(disagreements({ spec, readme: table })).toEqual([
      "docs/configuration.md's table gives SIGNUPS_PER_ADDRESS_PER_HOUR the default 12, which is not the configuration's",
    ]);
    const prose = once(readme, 'limited to 64 KiB', 'limited to 32 KiB');
    expect(disagreements({ spec, readme: prose })).toEqual(['"bodies are limited to 32 KiB" states 32; x-limits.bodyBytes / 1024 is 64']);
  });

  it('in a schema the prose repeats', () => {
    const changed = once(spec, "pattern: '^msg_[a-f0-9]{24}$'", "pattern: '^msg_[a-f0-9]{32}$'");
    expect(disagreements({ spec: changed, readme })).toEqual([
      '"`msg_` and 24 hex digits" states 24; /components/schemas/MessageId/pattern is 32',
    ]);
  });

  it('a new figure tied to nothing, or a statement reworded away', () => {
    const added = once(spec, 'Kept per account for 24 hours.', 'Kept per account for 24 hours, and at most 50 per account.');
    expect(disagreements({ spec: added, readme })).toEqual([expect.stringContaining('a figure tied to nothing: "at most 50"')]);
    const reworded = once(spec, 'Kept per account for 24 hours.', 'Kept per account for a day.');
    expect(disagreements({ spec: reworded, readme })).toEqual([
      'openapi.yaml no longer says /Kept per account for (\\d+) hours/ (x-limits.idempotencyKeySeconds / 3600)',
    ]);
  });
});

describe('the node flags the service runs with (docs/performance.md, "Memory")', () => {
  it("are the same in npm start, the image's ENTRYPOINT and the tests' and drills' starts", () => {
    const start = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start;
    const entrypoint = /^ENTRYPOINT (.*)$/m.exec(readFileSync(join(repoRoot, 'Containerfile'), 'utf8'))?.[1] ?? '[]';
    expect(start).toBe(['node', ...serviceNodeFlags, 'scripts/start.mjs'].join(' '));
    expect(JSON.parse(entrypoint)).toEqual(['node', ...serviceNodeFlags, 'dist/server/main.js']);
  });
});
