// A real Prometheus (Debian's package: scripts/ensure-prometheus.sh) scrapes the built
// service on 127.0.0.1 and, after a request to every operation of the spec, its HTTP API
// answers with each operation by name; the example alert rules of docs/prometheus/ load
// and evaluate on that data, pass `promtool check rules` and their own `promtool test
// rules`; and `promtool check metrics` lints the exposition. `npm run test:prometheus`.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { operationsOf, loadSpec } from '../../server/spec';
import { eventually, repoRoot, startServer, type ServerProcess } from '../../scripts/server-process';
import { freePort } from '../exposition';
import { describeOnDebian } from '../platform';
import { password } from '../helpers';

const prometheusBin = '/usr/bin/prometheus';
const promtool = '/usr/bin/promtool';
const rules = join(repoRoot, 'docs', 'prometheus');

// prom-client's own default metrics, named before Prometheus's lint rule for gauges; the
// service's metrics must pass it.
const promClientGaugesNamedTotal = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** promtool reading `input` on stdin; resolves with its exit code and output. */
function promtoolWith(args: string[], input?: string, cwd = repoRoot): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(promtool, args, { cwd }, (error, stdout, stderr) => {
      const code = error ? ((error as { code?: unknown }).code as number) : 0;
      if (typeof code !== 'number') return reject(error ?? new Error('promtool failed'));
      resolve({ code, output: `${stdout}${stderr}` });
    });
    child.stdin?.end(input ?? '');
  });
}

interface Prometheus {
  url: string;
  child: ChildProcess;
  query(expr: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
}

async function startPrometheus(dir: string, target: string): Promise<Prometheus> {
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      '  evaluation_interval: 1s',
      'rule_files:',
      `  - ${join(rules, 'alerts.yml')}`,
      'scrape_configs:',
      '  - job_name: petstore',
      '    static_configs:',
      `      - targets: ['${target}']`,
    ].join('\n'),
  );
  const child = spawn(
    prometheusBin,
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${log}`);
    return (
      (await fetch(`${url}/-/ready`).then(
        (r) => r.ok,
        () => false,
      )) || undefined
    );
  }, 30_000);
  const query = async (expr: string) => {
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as {
      status: string;
      data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
    };
    if (body.status !== 'success') throw new Error(`query ${expr} failed: ${JSON.stringify(body)}`);
    return body.data.result;
  };
  return { url, child, query };
}

describeOnDebian("Debian's prometheus package (scripts/ensure-prometheus.sh)", 'a real Prometheus scraping the service', () => {
  let dir: string;
  let server: ServerProcess;
  let prometheus: Prometheus;
  let metricsPort: number;

  beforeAll(async () => {
    if (!existsSync(prometheusBin) || !existsSync(promtool)) {
      throw new Error(
        `${prometheusBin} and ${promtool} are missing: run \`bash scripts/ensure-prometheus.sh\` (Debian's prometheus package)`,
      );
    }
    dir = mkdtempSync(join(tmpdir(), 'petstore-prometheus-'));
    metricsPort = await freePort();
    server = await startServer({ DATABASE_PATH: join(dir, 'petstore.db'), METRICS_PORT: String(metricsPort) });
    prometheus = await startPrometheus(dir, `127.0.0.1:${metricsPort}`);
  }, 60_000);

  afterAll(async () => {
    if (prometheus && prometheus.child.exitCode === null) {
      const exited = new Promise((r) => prometheus.child.once('exit', r));
      prometheus.child.kill('SIGTERM');
      await exited;
    }
    if (server) expect(await server.stop()).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('sees every operation of the spec by name once each was called', async () => {
    const base = server.url;
    const email = 'prometheus@example.com';
    const signUp = await fetch(`${base}/accounts`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    expect(signUp.status).toBe(201);
    const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
    const { key } = (await (await fetch(`${base}/api-keys`, { method: 'POST', headers: { Authorization: basic } })).json()) as {
      key: string;
    };

    // One request per operation, path parameters 1, an empty JSON body where one is taken:
    // whatever each answers (200, 400, 403, 404...), it is counted under its operationId.
    const operations = operationsOf(loadSpec());
    for (const op of Object.values(operations)) {
      const method = op.method.toUpperCase();
      const hasBody = ['POST', 'PUT', 'PATCH'].includes(method);
      const res = await fetch(`${base}${op.path.replace(/\{\w+\}/g, '1')}`, {
        method,
        headers: {
          Authorization: op.security === 'basic' ? basic : `Bearer ${key}`,
          ...(hasBody && { 'Content-Type': 'application/json' }),
        },
        ...(hasBody && { body: '{}' }),
      });
      await res.arrayBuffer();
    }

    const ids = Object.keys(operations).sort();
    const seen = await eventually(async () => {
      const result = await prometheus.query('count by (operation) (http_server_request_duration_seconds_count{job="petstore"})');
      const names = result.map((r) => r.metric.operation).sort();
      return ids.every((id) => names.includes(id)) ? names : undefined;
    }, 20_000);
    expect(seen).toEqual(expect.arrayContaining(ids));
    expect(ids.length).toBeGreaterThan(20);

    const deprecated = await prometheus.query('petstore_deprecated_calls_total{job="petstore"}');
    expect(deprecated.map((r) => r.metric.operation)).toEqual(['getPetById']);
    expect(Number(deprecated[0]?.value[1])).toBeGreaterThanOrEqual(1);
    // p99 by operation, as the example alert computes it (a rate needs a second scrape).
    const p99 = await eventually(async () => {
      const result = await prometheus.query(
        'histogram_quantile(0.99, sum by (operation, le) (rate(http_server_request_duration_seconds_bucket{job="petstore"}[1m])))',
      );
      return result.length >= ids.length ? result : undefined;
    }, 20_000);
    expect(p99.map((r) => r.metric.operation)).toEqual(expect.arrayContaining(ids));

    // The example alert rules load and evaluate on these series without error.
    const rulesState = await eventually(async () => {
      const res = (await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as {
        data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> };
      };
      const all = res.data.groups.flatMap((g) => g.rules);
      return all.length > 0 && all.every((r) => r.health !== 'unknown') ? all : undefined;
    }, 20_000);
    expect(rulesState.map((r) => [r.name, r.health, r.lastError ?? ''])).toEqual(rulesState.map((r) => [r.name, 'ok', '']));
    expect(rulesState).toHaveLength(5);
  }, 90_000);

  it('passes `promtool check metrics`, prom-client’s own default names aside', async () => {
    const exposition = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const { output } = await promtoolWith(['check', 'metrics'], exposition);
    const problems = output
      .split('\n')
      .filter(Boolean)
      .filter((line) => !promClientGaugesNamedTotal.some((name) => line.startsWith(`${name} `)));
    expect(problems).toEqual([]);
    // The lint does run: a gauge named like a counter is reported.
    const bad = await promtoolWith(['check', 'metrics'], '# HELP x_total made up\n# TYPE x_total gauge\nx_total 1\n');
    expect(bad.output).toMatch(/x_total non-counter metrics should not have "_total" suffix/);
  });

  it('has example alert rules that promtool checks and whose own tests pass', async () => {
    const check = await promtoolWith(['check', 'rules', 'alerts.yml'], undefined, rules);
    expect(check).toEqual({ code: 0, output: expect.stringContaining('SUCCESS: 5 rules found') as string });
    const test = await promtoolWith(['test', 'rules', 'alerts-test.yml'], undefined, rules);
    expect(test).toEqual({ code: 0, output: expect.stringContaining('SUCCESS') as string });
  });
});
