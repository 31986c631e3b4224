// The run: set up callers, then walk the operations of the spec in dependency order
// (an operation runs once the operations that make the ids it needs have run), sending
// valid traffic generated from the schemas and, for each operation, every kind of
// invalid request (phase-valid.ts, phase-invalid.ts); then delete what the run made,
// probe undeclared methods and unknown paths (phase-cleanup.ts), and tally which
// documented (operation, status) pairs were seen (coverage.ts). The state the phases
// share is a Run (run-state.ts).
import type { Exchange } from './checks';
import { coverage, type CoverageRow } from './coverage';
import { arbitrary } from './generate';
import { deletePhase, leftAsFound, rateLimitPhase, routingPhase, spendRateLimitPhase } from './phase-cleanup';
import { exercise } from './phase-valid';
import { isSuccess, Run, type RunOptions } from './run-state';

/** Nothing can be checked (no answer, a key refused, no customer): the run stops, exit code 2. */
export class CannotCheck extends Error {}

export interface RunResult {
  seed: number;
  exchanges: Exchange[];
  coverage: CoverageRow[];
  gaps: CoverageRow[];
  /** What the run did about the service's limits: waits, failed logins spent, what it left. */
  limits: LimitsReport;
}

export interface LimitsReport {
  waitedMs: number;
  failedLoginBudget: number;
  failedLoginsSent: number;
  /** Requests with password credentials the budget kept the run from sending. */
  withheld: string[];
  /** Each request limit as the last answer left it. */
  partitions: Array<{ name: string; quota: number; windowSeconds: number; remaining: number }>;
}

export async function runSuite(options: RunOptions): Promise<RunResult> {
  const run = new Run(options);
  await setUp(run);
  const ordered = run.order();
  run.log(`Valid and invalid traffic for ${ordered.length} operations`);
  for (const op of ordered) await exercise(run, op);
  run.log('Deleting what the run made');
  await deletePhase(run);
  run.log('Undeclared methods and unknown paths');
  await routingPhase(run);
  if (run.o.rateLimitedClient) {
    run.log('Rate limit, on the rate-limited instance');
    await rateLimitPhase(run, run.o.rateLimitedClient);
  } else if (run.o.limits) {
    await spendRateLimitPhase(run);
  } else {
    run.rateLimitNote = 'reaching it means spending the request limit and waiting out its window: run with --limits';
  }
  await leftAsFound(run);
  const rows = coverage(run);
  return {
    seed: run.o.seed,
    exchanges: run.exchanges,
    coverage: rows,
    gaps: rows.filter((r) => r.seen === 0 && !r.unreachable),
    limits: {
      waitedMs: run.waitedForRateLimitMs + run.waitedAfter429Ms,
      failedLoginBudget: run.logins.budget,
      failedLoginsSent: run.logins.sent,
      withheld: run.logins.withheld,
      partitions: run.rateLimits
        .all()
        .map((p) => ({ name: p.name, quota: p.quota, windowSeconds: p.windowSeconds, remaining: p.remaining })),
    },
  };
}

/** The callers: the suite's own account (signed up, with a key), the customer's key, the admin's. */
async function setUp(run: Run): Promise<void> {
  const { signUp, issuer } = run.accountOperations();
  if (signUp?.body) {
    const body = run.source.draw(arbitrary(signUp.body.schema, run.contract.deref)) as Record<string, unknown>;
    const request = run.build(signUp, { pathParams: {}, query: [], headers: [], body }, {});
    run.firstRequests.set(signUp.id, request);
    // A body the schema allows (its email at RFC 5321's bounds where the schema allows
    // that, generate.ts): whatever else may refuse it, its input may not.
    const ex = await run.send(signUp, "sign-up of the suite's own account", { kind: 'valid', refused: 400 }, request);
    const fields = run.fields(signUp.body.schema);
    const email = fields.find(([, s]) => s.format === 'email')?.[0];
    const pass = fields.find(([n]) => /pass/i.test(n))?.[0];
    if (isSuccess(ex.response.status) && email && pass) run.basic = { email: String(body[email]), password: String(body[pass]) };
  }
  if (issuer && run.basic) {
    const key = await run.issueKey(issuer, run.basic, "a key for the suite's own account");
    if (key) run.signedUp = { header: `Bearer ${key}` };
  }
  run.customer = run.o.customerKey ? { header: `Bearer ${run.o.customerKey}` } : run.signedUp;
  if (!run.customer.header) {
    const last = run.exchanges[run.exchanges.length - 1];
    const why = last
      ? `${last.request.method} ${last.request.path} answered ${last.response.status} ${last.response.text.slice(0, 200)}`
      : 'the spec has no public sign-up and key issuer';
    throw new CannotCheck(`no customer key: set PETSTORE_KEY or pass --key-file (the suite's own sign-up did not give one: ${why})`);
  }
  let adminKey = run.o.adminKey;
  if (!adminKey && run.o.adminCredentials && issuer) {
    adminKey = await run.issueKey(issuer, run.o.adminCredentials, 'a key for the admin account');
  }
  const roles = new Set(run.contract.operations.map((op) => op.role).filter((r): r is string => !!r));
  if (adminKey) run.admin = { header: `Bearer ${adminKey}`, role: [...roles][0] };
}
