// The coverage table: each documented (operation, status) pair, exercised or
// unreachable with a reason.
import type { Operation } from './spec';
import { undeclared, unknownPath, type Run } from './run-state';

export interface CoverageRow {
  opId: string;
  method: string;
  path: string;
  status: string;
  seen: number;
  /** Why the pair cannot be reached in this run; undefined with seen 0 is a gap. */
  unreachable?: string;
}

export function coverage(run: Run): CoverageRow[] {
  const seen = new Map<string, number>();
  for (const ex of run.exchanges) {
    const key = `${ex.opId} ${ex.response.status}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  const rows: CoverageRow[] = [];
  for (const op of run.contract.operations) {
    for (const status of op.responses.keys()) {
      if (status === 'default') continue;
      const count = [...seen.entries()]
        .filter(([k]) => {
          const [id, s] = [k.slice(0, k.lastIndexOf(' ')), k.slice(k.lastIndexOf(' ') + 1)];
          return id === op.id && (s === status || (status.endsWith('XX') && s[0] === status[0]));
        })
        .reduce((n, [, c]) => n + c, 0);
      rows.push({
        opId: op.id,
        method: op.method.toUpperCase(),
        path: op.path,
        status,
        seen: count,
        unreachable: count > 0 ? undefined : reason(run, op, status),
      });
    }
  }
  rows.push({ opId: undeclared, method: '*', path: '(every path)', status: '405', seen: seen.get(`${undeclared} 405`) ?? 0 });
  rows.push({ opId: unknownPath, method: 'GET', path: '(not in the spec)', status: '404', seen: seen.get(`${unknownPath} 404`) ?? 0 });
  return rows;
}

export function reason(run: Run, op: Operation, status: string): string | undefined {
  if (status === '429') return run.o.rateLimitedClient || run.spentRateLimit ? undefined : (run.rateLimitNote ?? run.o.rateLimitReason);
  const keys = run.stated.activeKeysPerAccount;
  if (status === '409' && keys && !run.o.limits && op === run.accountOperations().issuer)
    return `reaching the bound of ${keys} active keys takes ${keys} password checks of one account: run with --limits`;
  if (status === '410' && op.deprecated) return "answered only after the operation's x-deprecated-sunset";
  // Framing answers (openapi.yaml, "Order of checks"): the HTTP server's, before routing.
  if (status === '408') return 'answered by the HTTP server to a request that stalls past its timeout; the suite sends whole requests';
  if (status === '431') return 'answered by the HTTP server to headers over 16 KiB; the suite sends small headers';
  if (status === '413' && !op.body)
    return 'answered before routing to a declared Content-Length over the limit; this operation takes no body';
  if (status === '503') return 'needs the database to be unreachable; the suite does not inject faults';
  if (status.startsWith('5')) return "needs a fault on the service's side; the suite does not inject faults";
  if (op.role && !run.admin && status !== '401' && status !== '403')
    return `needs a key with the ${op.role} role (PETSTORE_ADMIN_KEY or --admin-key-file)`;
  // A business-rule conflict can hinge on state only an admin makes (a completed order).
  const roles = run.contract.operations.filter((o) => o.role).map((o) => o.role);
  if (!run.admin && roles.length > 0 && (status === '409' || status === '422')) {
    return `may need state that only operations for the ${roles[0]} role make (no admin key)`;
  }
  return run.skipped.get(op.id) && !['400', '401', '403'].includes(status) ? run.skipped.get(op.id) : undefined;
}
