// The run as JUnit XML, which most CI systems read, and as JSON. In JUnit: a test suite
// per operation (and one each for the routing probes, the coverage table and the limits),
// a test case per request with its checks, or per documented (operation, status) pair; a
// failure carries the checks that failed, the request, the response and the command that
// reproduces the run. A pair that cannot be reached is a skipped case with the reason.
import type { Exchange } from './checks';
import { formatFailure, tally } from './report';
import type { CoverageRow } from './coverage';
import type { RunResult } from './runner';

export interface ReportContext {
  /** The suite and its version: `petstore-contract 1.0.0`. */
  tool: string;
  baseUrl: string;
  /** The contract checked: its title and version. */
  spec: { path: string; title: string; version: string };
  startedAt: Date;
  durationMs: number;
  /** `Reproduce with: ...` */
  reproduce: string;
  /** Failures found outside the suite's own checks (Stoplight Prism's), one line each. */
  outside?: string[];
}

/** Text XML 1.0 can carry: no control characters but tab and line ends, no lone surrogates. */
function xmlText(text: string): string {
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

interface Case {
  name: string;
  classname: string;
  seconds: number;
  failure?: { message: string; body: string };
  skipped?: string;
}

const seconds = (ms: number) => (ms / 1000).toFixed(3);

function exchangeCase(ex: Exchange, reproduce: string): Case {
  const name = `${ex.label}: ${ex.request.method} ${ex.request.path} -> ${ex.response.status}`;
  const c: Case = { name, classname: `contract.${ex.opId}`, seconds: ex.response.durationMs / 1000 };
  if (ex.failures.length > 0) c.failure = { message: ex.failures[0]!, body: formatFailure(ex, reproduce) };
  return c;
}

function coverageCase(row: CoverageRow, reproduce: string): Case {
  const c: Case = { name: `${row.method} ${row.path} ${row.status}`, classname: `contract.coverage.${row.opId}`, seconds: 0 };
  if (row.seen === 0 && row.unreachable) c.skipped = `unreachable: ${row.unreachable}`;
  else if (row.seen === 0) {
    const message = `${row.opId} ${row.status} is documented but no request of the run was answered with it, and no reason makes it unreachable`;
    c.failure = { message, body: `${message}\n${reproduce}` };
  }
  return c;
}

function suite(name: string, cases: Case[], timestamp: string): string {
  const failures = cases.filter((c) => c.failure).length;
  const skipped = cases.filter((c) => c.skipped).length;
  const time = cases.reduce((t, c) => t + c.seconds, 0);
  const lines = [
    `  <testsuite name="${xmlText(name)}" tests="${cases.length}" failures="${failures}" errors="0" skipped="${skipped}" time="${time.toFixed(3)}" timestamp="${timestamp}">`,
  ];
  for (const c of cases) {
    const open = `    <testcase name="${xmlText(c.name)}" classname="${xmlText(c.classname)}" time="${c.seconds.toFixed(3)}"`;
    if (c.failure) {
      lines.push(
        `${open}>`,
        `      <failure message="${xmlText(c.failure.message)}" type="conformance">${xmlText(c.failure.body)}</failure>`,
        '    </testcase>',
      );
    } else if (c.skipped) {
      lines.push(`${open}>`, `      <skipped message="${xmlText(c.skipped)}"/>`, '    </testcase>');
    } else lines.push(`${open}/>`);
  }
  lines.push('  </testsuite>');
  return lines.join('\n');
}

export function junitReport(result: RunResult, ctx: ReportContext): string {
  const timestamp = ctx.startedAt.toISOString().replace(/\.\d+Z$/, '');
  const byOp = new Map<string, Case[]>();
  for (const ex of result.exchanges) {
    const list = byOp.get(ex.opId) ?? [];
    list.push(exchangeCase(ex, ctx.reproduce));
    byOp.set(ex.opId, list);
  }
  const suites = [...byOp.entries()].map(([op, cases]) => suite(op, cases, timestamp));
  suites.push(
    suite(
      'coverage of documented (operation, status) pairs',
      result.coverage.map((row) => coverageCase(row, ctx.reproduce)),
      timestamp,
    ),
  );
  if (ctx.outside && ctx.outside.length > 0) {
    suites.push(
      suite(
        'outside validator',
        ctx.outside.map((line) => ({ name: line, classname: 'contract.outside', seconds: 0, failure: { message: line, body: line } })),
        timestamp,
      ),
    );
  }
  const all = suites.join('\n');
  const count = (re: RegExp) => (all.match(re) ?? []).length;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xmlText(`${ctx.tool} against ${ctx.baseUrl}`)}" tests="${count(/<testcase /g)}" failures="${count(/<failure /g)}" errors="0" skipped="${count(/<skipped /g)}" time="${seconds(ctx.durationMs)}">`,
    all,
    '</testsuites>',
    '',
  ].join('\n');
}

/** The same run as JSON: every request with its checks, the coverage table, the limits. */
export function jsonReport(result: RunResult, ctx: ReportContext): string {
  const { passed, failed } = tally(result);
  return `${JSON.stringify(
    {
      tool: ctx.tool,
      baseUrl: ctx.baseUrl,
      spec: ctx.spec,
      seed: result.seed,
      startedAt: ctx.startedAt.toISOString(),
      durationMs: ctx.durationMs,
      passed,
      failed: failed + (ctx.outside?.length ?? 0),
      reproduce: ctx.reproduce,
      failures: result.exchanges.filter((e) => e.failures.length > 0).map((e) => formatFailure(e, ctx.reproduce)),
      gaps: result.gaps,
      outside: ctx.outside ?? [],
      coverage: result.coverage,
      limits: result.limits,
      exchanges: result.exchanges.map((e) => ({
        opId: e.opId,
        label: e.label,
        method: e.request.method,
        path: e.request.path,
        status: e.response.status,
        durationMs: e.response.durationMs,
        failures: e.failures,
      })),
    },
    null,
    2,
  )}\n`;
}

/** A JUnit file for a run that could not check anything (exit 2): one case, one error. */
export function junitCannotCheck(tool: string, message: string): string {
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xmlText(tool)}" tests="1" failures="0" errors="1" skipped="0" time="0">`,
    `  <testsuite name="cannot check" tests="1" failures="0" errors="1" skipped="0" time="0">`,
    `    <testcase name="cannot check" classname="contract" time="0">`,
    `      <error message="${xmlText(message)}" type="cannot-check">${xmlText(message)}</error>`,
    '    </testcase>',
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
