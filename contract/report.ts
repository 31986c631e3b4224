// What a person reads: each failure with the exact request that caused it and the seed
// that reproduces the run, then the coverage table, then one closing count line.
import type { Exchange } from './checks';
import type { CoverageRow } from './coverage';
import type { RunResult } from './runner';

const bodyLimit = 2048;

/** Keys and Basic credentials keep only their last four characters. */
export function maskAuthorization(value: string): string {
  // A scheme alone ("Bearer") carries no secret, and reads better whole.
  if (/^[A-Za-z]{1,10}$/.test(value)) return value;
  const match = /^([A-Za-z][A-Za-z0-9-]*)([ \t,]+)(.*)$/s.exec(value);
  const [scheme, gap, secret] = match ? [match[1], match[2], match[3]!] : ['', '', value];
  if (secret.length <= 4) return value;
  return `${scheme ?? ''}${gap ?? ''}…${secret.slice(-4)}`;
}

const truncate = (text: string) => (text.length > bodyLimit ? `${text.slice(0, bodyLimit)}… (${text.length} characters in all)` : text);

const indent = (text: string, by: string) => text.split('\n').join(`\n${by}`);

export function formatFailure(ex: Exchange, reproduce: string): string {
  const lines: string[] = [];
  lines.push(`✗ ${ex.opId} — ${ex.label}`);
  for (const f of ex.failures) lines.push(`    check failed: ${f}`);
  lines.push(`    request:  ${ex.request.method} ${ex.request.path}`);
  for (const [name, value] of Object.entries(ex.request.headers)) {
    const shown = name.toLowerCase() === 'authorization' ? maskAuthorization(value) : value;
    lines.push(`              ${name}: ${JSON.stringify(shown).slice(1, -1)}`);
  }
  if (ex.request.body !== undefined) lines.push(`              ${indent(truncate(ex.request.body), '              ')}`);
  lines.push(`    response: ${ex.response.status}${ex.response.headers['content-type'] ? ` ${ex.response.headers['content-type']}` : ''}`);
  for (const name of ['location', 'allow', 'www-authenticate']) {
    if (ex.response.headers[name]) lines.push(`              ${name}: ${ex.response.headers[name]}`);
  }
  if (ex.response.text) lines.push(`              ${indent(truncate(ex.response.text), '              ')}`);
  lines.push(`    ${reproduce}`);
  return lines.join('\n');
}

function formatCoverage(rows: CoverageRow[]): string {
  const width = (f: (r: CoverageRow) => string) => Math.max(...rows.map((r) => f(r).length));
  const opW = width((r) => r.opId);
  const routeW = width((r) => `${r.method} ${r.path}`);
  const lines = [`${'operation'.padEnd(opW)}  ${'route'.padEnd(routeW)}  status  result`];
  for (const r of rows) {
    const result =
      r.seen > 0
        ? `exercised (${r.seen})`
        : r.unreachable
          ? `unreachable: ${r.unreachable}`
          : 'NOT EXERCISED (a gap: nothing the suite sent reached it)';
    lines.push(`${r.opId.padEnd(opW)}  ${`${r.method} ${r.path}`.padEnd(routeW)}  ${r.status.padEnd(6)}  ${result}`);
  }
  return lines.join('\n');
}

export interface Tally {
  passed: number;
  failed: number;
}

/** Exchanges count one each; a coverage gap counts as one failure. */
export function tally(result: RunResult): Tally {
  const failedExchanges = result.exchanges.filter((e) => e.failures.length > 0).length;
  return { passed: result.exchanges.length - failedExchanges, failed: failedExchanges + result.gaps.length };
}

/** The unreachable pairs by reason, one line each: what the default output says of the table. */
function coverageSummary(rows: CoverageRow[]): string[] {
  const exercised = rows.filter((r) => r.seen > 0).length;
  const unreachable = rows.filter((r) => r.seen === 0 && r.unreachable);
  const gaps = rows.filter((r) => r.seen === 0 && !r.unreachable).length;
  const out = [
    `Coverage: ${rows.length} documented (operation, status) pairs, ${exercised} exercised, ${unreachable.length} unreachable, ${gaps} not exercised` +
      ' (the table: --verbose, and the reports)',
  ];
  const byReason = new Map<string, Set<string>>();
  for (const r of unreachable) byReason.set(r.unreachable!, (byReason.get(r.unreachable!) ?? new Set()).add(r.status));
  const counts = new Map<string, number>();
  for (const r of unreachable) counts.set(r.unreachable!, (counts.get(r.unreachable!) ?? 0) + 1);
  for (const [why, statuses] of [...byReason].sort((a, b) => counts.get(b[0])! - counts.get(a[0])!)) {
    const line = `  ${String(counts.get(why)).padStart(3)} × ${[...statuses].sort().join('/')}: ${why}`;
    out.push(line.length > 160 ? `${line.slice(0, 157)}...` : line);
  }
  return out;
}

export interface ReportOptions {
  /** The whole coverage table and every failure in full, rather than a screen's worth. */
  verbose?: boolean;
  /** Failures another validator found (Stoplight Prism's), counted in the closing line. */
  outside?: number;
  /** The JUnit file written, whose counts the output relates to its own. */
  junit?: string;
}

export function formatReport(result: RunResult, reproduce: string, options: ReportOptions = {}): string {
  const { verbose = false, outside = 0 } = options;
  const fullFailures = verbose ? 40 : 3;
  const oneLiners = verbose ? Infinity : 10;
  const out: string[] = [];
  const failed = result.exchanges.filter((e) => e.failures.length > 0);
  if (failed.length > 0) {
    out.push(`Failures (${failed.length}):`, '');
    for (const ex of failed.slice(0, fullFailures)) out.push(formatFailure(ex, reproduce), '');
    if (failed.length > fullFailures) {
      const rest = failed.slice(fullFailures);
      out.push(`… and ${rest.length} more (one line each; all in full in the reports, or reproduce the run):`);
      for (const ex of rest.slice(0, oneLiners)) {
        out.push(`✗ ${ex.opId} — ${ex.label}: ${ex.request.method} ${ex.request.path} → ${ex.response.status}: ${ex.failures[0]}`);
      }
      if (rest.length > oneLiners) out.push(`… ${rest.length - oneLiners} more in the reports`);
      out.push('');
    }
  }
  for (const gap of result.gaps) {
    out.push(
      `✗ coverage: ${gap.opId} ${gap.status} (${gap.method} ${gap.path}) was documented but never answered, and no reason makes it unreachable`,
    );
  }
  if (result.gaps.length > 0) out.push(`    ${reproduce}`, '');
  if (verbose) out.push('Coverage of documented (operation, status) pairs:', formatCoverage(result.coverage), '');
  else out.push(...coverageSummary(result.coverage), '');
  const byStatus = new Map<number, number>();
  for (const ex of result.exchanges) byStatus.set(ex.response.status, (byStatus.get(ex.response.status) ?? 0) + 1);
  const statuses = [...byStatus.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  out.push(`${result.exchanges.length} requests (${statuses}); seed ${result.seed}`);
  const { passed, failed: failedCount } = tally(result);
  const unreachable = result.coverage.filter((r) => r.seen === 0 && r.unreachable).length;
  // The closing line counts requests; the JUnit file has a case for each documented pair as well.
  if (options.junit) {
    out.push(
      `${options.junit}: ${result.exchanges.length + result.coverage.length + outside} test cases, the ${result.exchanges.length} requests` +
        ` and the ${result.coverage.length} documented pairs${outside ? ` and ${outside} outside findings` : ''}; ${unreachable} skipped (the unreachable pairs)`,
    );
  }
  out.push(`${passed} passed, ${failedCount + outside} failed`);
  return out.join('\n');
}
