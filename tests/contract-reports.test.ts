// The contract suite's reports for CI: its JUnit XML is read by a real JUnit reader,
// junitparser (Debian's python3-junitparser: bash scripts/ensure-junitparser.sh), and what
// that reader finds is what the run found: every request a case, each failure with its
// request, response and the command that reproduces it, unreachable pairs skipped.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ResponseValidator, type Exchange } from '../contract/checks';
import { HttpClient } from '../contract/http';
import { jsonReport, junitCannotCheck, junitReport, type ReportContext } from '../contract/junit';
import { formatReport, tally } from '../contract/report';
import { runSuite, type RunResult } from '../contract/runner';
import { loadContract } from '../contract/spec';
import { repoRoot } from '../scripts/server-process';
import { admin, customer, setupApp } from './helpers';
import { describeOnDebian } from './platform';

jest.setTimeout(240_000);

interface Read {
  tests: number;
  failures: number;
  errors: number;
  skipped: number;
  suites: Array<{
    name: string;
    tests: number;
    failures: number;
    cases: Array<{ name: string; classname: string; result: string; message: string | null; text: string | null }>;
  }>;
}

let dir: string;

/** What junitparser reads in a JUnit file. */
function readJunit(xml: string): Read {
  const file = join(dir, `report-${Date.now()}.xml`);
  writeFileSync(file, xml);
  return JSON.parse(execFileSync('/usr/bin/python3', [join(repoRoot, 'scripts/junit-summary.py'), file], { encoding: 'utf8' })) as Read;
}

const context = (reproduce: string): ReportContext => ({
  tool: 'petstore-contract test',
  baseUrl: 'http://127.0.0.1:1',
  spec: { path: 'openapi.yaml', title: 'Pet Store Service', version: '1.0.0' },
  startedAt: new Date(),
  durationMs: 1234,
  reproduce,
});

describeOnDebian("Debian's python3-junitparser (scripts/ensure-junitparser.sh)", 'the JUnit report, as junitparser reads it', () => {
  let result: RunResult;
  const reproduce = 'Reproduce with: npx petstore-contract --seed 42 --base-url http://127.0.0.1:1';

  beforeAll(() => {
    execFileSync('bash', [join(repoRoot, 'scripts/ensure-junitparser.sh')], { stdio: 'inherit' });
    dir = mkdtempSync(join(tmpdir(), 'petstore-junit-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeAll(async () => {
    // A service whose health answer breaks its documented shape (the server's own response
    // validation off, as on a deployment that skips it).
    const contract = loadContract();
    const t = setupApp({
      env: { VALIDATE_RESPONSES: 'false' },
      handlers: { getHealth: () => ({ status: 200, body: { status: 'ok', note: '<&>"\u00e9' } as never }) },
    });
    const server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      result = await runSuite({
        client,
        contract,
        validator: new ResponseValidator(contract),
        seed: 42,
        runs: 1,
        customerKey: (await customer(t.app)).key,
        adminKey: (await admin(t)).key,
        bodyLimitBytes: 65536,
        rateLimitReason: 'not probed in this test',
        // As --limits: the request limit is looked at, and found too large to spend.
        limits: true,
      });
    } finally {
      client.close();
      server.close();
    }
  });

  it("holds every request and every documented pair, with the run's counts", () => {
    const read = readJunit(junitReport(result, context(reproduce)));
    const failedExchanges = result.exchanges.filter((e) => e.failures.length > 0);
    expect(failedExchanges.length).toBeGreaterThan(0);
    const unreachable = result.coverage.filter((r) => r.seen === 0 && r.unreachable).length;
    expect(read).toMatchObject({
      tests: result.exchanges.length + result.coverage.length,
      failures: failedExchanges.length + result.gaps.length,
      errors: 0,
      skipped: unreachable,
    });
    const cases = read.suites.flatMap((s) => s.cases);
    expect(cases.filter((c) => c.result === 'passed')).toHaveLength(
      tally(result).passed + result.coverage.length - unreachable - result.gaps.length,
    );
    // Per operation, as the suites' own counts say.
    for (const suite of read.suites) {
      expect({ name: suite.name, tests: suite.tests, failures: suite.failures }).toEqual({
        name: suite.name,
        tests: suite.cases.length,
        failures: suite.cases.filter((c) => c.result === 'failure').length,
      });
    }
  });

  it("says in its output how its closing count relates to the JUnit file's, and keeps the table for --verbose", () => {
    const read = readJunit(junitReport(result, context(reproduce)));
    const text = formatReport(result, reproduce, { junit: 'reports/contract.xml' });
    const { passed, failed } = tally(result);
    expect(text.split('\n').slice(-2)).toEqual([
      `reports/contract.xml: ${read.tests} test cases, the ${result.exchanges.length} requests and the ${result.coverage.length} ` +
        `documented pairs; ${read.skipped} skipped (the unreachable pairs)`,
      `${passed} passed, ${failed} failed`,
    ]);
    expect(text).toMatch(/^Coverage: \d+ documented \(operation, status\) pairs, \d+ exercised, \d+ unreachable, \d+ not exercised/m);
    expect(text).not.toContain('Coverage of documented (operation, status) pairs:');
    expect(formatReport(result, reproduce, { verbose: true })).toContain('Coverage of documented (operation, status) pairs:');
  });

  it('gives each failure the check, the request, the response and the command that reproduces it', () => {
    const read = readJunit(junitReport(result, context(reproduce)));
    const health = read.suites.find((s) => s.name === 'getHealth')!;
    const failed = health.cases.filter((c) => c.result === 'failure');
    expect(failed.length).toBeGreaterThan(0);
    for (const c of failed) {
      expect(c.classname).toBe('contract.getHealth');
      expect(c.name).toMatch(/GET \/healthz -> 200$/);
      expect(c.message).toMatch(/does not match the documented schema.*must NOT have additional properties "note"/);
      expect(c.text).toContain('request:  GET /healthz');
      expect(c.text).toContain('response: 200 application/json');
      expect(c.text).toContain('"note":"<&>\\"é"');
      expect(c.text).toContain(reproduce);
    }
    const skipped = read.suites.flatMap((s) => s.cases).filter((c) => c.result === 'skipped');
    // The test's service allows 100000 requests a minute: too many to spend for its 429.
    expect(skipped.map((c) => c.message)).toContain(
      'unreachable: the "address" limit (100000 a 60 s window) is more than a run spends (2000 requests, a window of 90 s)',
    );
  });

  it('carries text XML cannot hold (control characters, a lone surrogate) as escapes, and keys as their last four characters', () => {
    const odd = 'a\u0001b\ud800c\u001b[31m';
    const ex = result.exchanges.find((e) => e.failures.length > 0)!;
    const strange: Exchange = {
      ...ex,
      label: `a label with ${odd}`,
      failures: [`a failure with ${odd}`],
      request: { ...ex.request, headers: { ...ex.request.headers, Authorization: 'Bearer ps_live_abcdefghijklmnopqrstuvwxyz0123456789' } },
    };
    const read = readJunit(junitReport({ ...result, exchanges: [strange] }, context(reproduce)));
    const c = read.suites.flatMap((s) => s.cases).find((x) => x.result === 'failure')!;
    expect(c.message).toBe('a failure with a\\u{1}b\\u{d800}c\\u{1b}[31m');
    expect(c.text).toContain('Authorization: Bearer …6789');
    expect(c.text).not.toContain('abcdefghijklmnopqrstuvwxyz');
  });

  it('has a JSON twin with the same counts, the failures and the limits the run kept to', () => {
    const json = JSON.parse(jsonReport(result, context(reproduce)));
    const { passed, failed } = tally(result);
    expect(json).toMatchObject({ seed: 42, passed, failed, reproduce });
    expect(json.exchanges).toHaveLength(result.exchanges.length);
    expect(json.failures[0]).toContain(reproduce);
    expect(json.limits).toMatchObject({ failedLoginBudget: 10 });
    expect(json.limits.failedLoginsSent).toBeLessThanOrEqual(10);
  });

  it('says "cannot check" as one error case', () => {
    const read = readJunit(junitCannotCheck('petstore-contract test', 'no answer from http://127.0.0.1:1: connect ECONNREFUSED'));
    expect(read).toMatchObject({ tests: 1, failures: 0, errors: 1 });
    expect(read.suites[0]!.cases[0]).toMatchObject({ result: 'error', message: 'no answer from http://127.0.0.1:1: connect ECONNREFUSED' });
  });
});
