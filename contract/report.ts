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

/** `outside`: failures another validator found (Stoplight Prism's), counted in the closing line. */
export function formatReport(result: RunResult, reproduce: string, fullFailures = 40, outside = 0): string {
  const out: string[] = [];
  const failed = result.exchanges.filter((e) => e.failures.length > 0);
  if (failed.length > 0) {
    out.push(`Failures (${failed.length}):`, '');
    for (const ex of failed.slice(0, fullFailures)) out.push(formatFailure(ex, reproduce), '');
    if (failed.length > fullFailures) {
      out.push(`… and ${failed.length - fullFailures} more (one line each; reproduce the run to see them in full):`);
      for (const ex of failed.slice(fullFailures)) {
        out.push(`✗ ${ex.opId} — ${ex.label}: ${ex.request.method} ${ex.request.path} → ${ex.response.status}: ${ex.failures[0]}`);
      }
      out.push('');
    }
  }
  for (const gap of result.gaps) {
    out.push(
      `✗ coverage: ${gap.opId} ${gap.status} (${gap.method} ${gap.path}) was documented but never answered, and no reason makes it unreachable`,
    );
  }
  if (result.gaps.length > 0) out.push(`    ${reproduce}`, '');
  out.push('Coverage of documented (operation, status) pairs:', formatCoverage(result.coverage), '');
  const byStatus = new Map<number, number>();
  for (const ex of result.exchanges) byStatus.set(ex.response.status, (byStatus.get(ex.response.status) ?? 0) + 1);
  const statuses = [...byStatus.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  out.push(`${result.exchanges.length} requests (${statuses}); seed ${result.seed}`);
  const { passed, failed: failedCount } = tally(result);
  out.push(`${passed} passed, ${failedCount + outside} failed`);
  return out.join('\n');
}
