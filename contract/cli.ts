// petstore-contract --base-url URL [--key-file FILE] [--admin-key-file FILE] [--junit FILE] [--json FILE] [--seed N] [--runs N] [--spec PATH]
// (keys from PETSTORE_KEY and PETSTORE_ADMIN_KEY, or the files: never from the command line)
//
// Tells whether a running service honours the contract. Exit codes: 0 it conforms, 1 it
// does not (each failure printed, and in the reports), 2 nothing could be checked (a
// usage error, no answer from the URL, a key refused), said in one line on stderr.
// The package's bin runs this against any URL; the service's repository runs it through
// scripts/test-contract.ts, which can also start the service itself (`npm run test:contract`).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import pkg from './package.json';
import { ResponseValidator, type Exchange } from './checks';
import { HttpClient } from './http';
import { jsonReport, junitCannotCheck, junitReport, type ReportContext } from './junit';
import { statedLimits } from './limits';
import { formatFailure, formatReport } from './report';
import type { RunOptions } from './run-state';
import { CannotCheck, runSuite } from './runner';
import { defaultSpecPath, loadContract, type Contract } from './spec';

type Values = Record<string, string | boolean | undefined>;

/** What to test, and anything that goes with it (a proxy in front, services to stop). */
export interface Target {
  baseUrl: string;
  /** The client the traffic goes through, when not straight to baseUrl. */
  client?: HttpClient;
  options?: Partial<RunOptions>;
  onExchange?: (ex: Exchange) => void;
  /** Failures found by another validator than the suite's, read once the run is over. */
  outside?: () => string[];
  /** What the target printed, shown when requests got no answer. */
  output?: () => string;
  stop(): Promise<void>;
}

/** The program the suite runs as: the package's bin, or the repository's `npm run test:contract`. */
export interface Program {
  /** How a person runs it, for the usage and the command that repeats a run. */
  name: string;
  usage?: string;
  options?: NonNullable<ParseArgsConfig['options']>;
  /** What to test when --base-url is not given; without it, --base-url is required. */
  local?: (values: Values, contract: Contract) => Promise<Target>;
  /** Wraps the target (a validating proxy in front of it). */
  around?: (values: Values, target: Target, specPath: string) => Promise<Target>;
}

export const tool = `${pkg.name} ${pkg.version}`;

const usage = (program: Program) => `Usage: ${program.name} --base-url URL [options]

  --base-url URL    the service to check (traffic goes only there)
  --key-file FILE   a file holding a customer's API key there (or the variable PETSTORE_KEY);
                    without either, the key of the account the suite signs up
  --admin-key-file FILE
                    a file holding a key of the role x-required-role operations need (or the
                    variable PETSTORE_ADMIN_KEY), so that they are covered beyond 401 and 403
  --junit FILE      write JUnit XML there (a test case per request and per documented status),
                    and the JSON report beside it (FILE with .json)
  --json FILE       write the JSON report there
  --seed N          repeat a run (every run prints its seed)
  --runs N          resources made per create operation and samples per read (default 3)
  --spec PATH       the contract to check against (default: the openapi.yaml the suite carries)
  --body-limit N    bytes above which a body must be refused with 413 (default: the spec's)
  --limits          also spend the request limit (to see each operation's 429, then wait out
                    its window) and the keys one account may hold (the key issuer's 409);
                    without it a run stays inside every limit and waits out no window
  --every-operation send what one step of the service answers for every operation (malformed
                    credentials, bodies its reader refuses, an unknown query parameter, escapes
                    in numbers) to every operation; without it each goes to one a run, so that
                    a run fits in the request limit's minute
  --verbose, -v     print every request and its answer, one line each, and the coverage table
  --version         print the suite's version and the contract's
${program.usage ?? ''}
Keys are never taken on the command line, which process lists and CI logs show.
Exit codes: 0 conforms, 1 conformance failures, 2 cannot check (one line on stderr).`;

const options = {
  'base-url': { type: 'string' },
  // Refused with a word on what to use instead (keysOf).
  key: { type: 'string' },
  'admin-key': { type: 'string' },
  'key-file': { type: 'string' },
  'admin-key-file': { type: 'string' },
  junit: { type: 'string' },
  json: { type: 'string' },
  seed: { type: 'string' },
  runs: { type: 'string' },
  spec: { type: 'string' },
  'body-limit': { type: 'string' },
  limits: { type: 'boolean' },
  'every-operation': { type: 'boolean' },
  verbose: { type: 'boolean', short: 'v' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function bodyLimitOf(contract: Contract): number | undefined {
  const info = contract.doc.info as { description?: unknown } | undefined;
  const stated = statedLimits(info).bodyBytes;
  if (stated) return stated;
  const match = /bodies over (\d+)\s*KiB/i.exec(String(info?.description ?? ''));
  return match ? Number(match[1]) * 1024 : undefined;
}

function write(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

/** A key the run uses, and where it came from, to name in a message. */
interface GivenKey {
  key: string;
  from: string;
}

/**
 * The keys, from PETSTORE_KEY / PETSTORE_ADMIN_KEY or a file (--key-file / --admin-key-file,
 * which win): never from the command line, where every process list shows them and CI logs
 * too (npm echoes the command it runs). A string is why they cannot be read.
 */
function keysOf(values: Values, env: NodeJS.ProcessEnv): { customer?: GivenKey; admin?: GivenKey } | string {
  const keys: { customer?: GivenKey; admin?: GivenKey } = {};
  for (const [role, option, variable] of [
    ['customer', 'key', 'PETSTORE_KEY'],
    ['admin', 'admin-key', 'PETSTORE_ADMIN_KEY'],
  ] as const) {
    if (values[option] !== undefined) {
      return `--${option} is not taken: a key on the command line is in every process list, and in CI logs (npm echoes the command); set ${variable} or pass --${option}-file FILE`;
    }
    const file = values[`${option}-file`] as string | undefined;
    if (file !== undefined) {
      let key: string;
      try {
        key = readFileSync(file, 'utf8').trim();
      } catch (error) {
        return `cannot read --${option}-file ${file}: ${error instanceof Error ? error.message : String(error)}`;
      }
      if (!key) return `--${option}-file ${file} is empty`;
      keys[role] = { key, from: `--${option}-file ${file}` };
    } else if (env[variable]?.trim()) {
      keys[role] = { key: env[variable].trim(), from: variable };
    }
  }
  return keys;
}

/**
 * Before any traffic: the URL answers, and the keys given are taken (a GET that needs a
 * key and nothing else; for the admin key, one that needs its role when there is one).
 */
async function preflight(
  client: HttpClient,
  contract: Contract,
  baseUrl: string,
  keys: { customer?: GivenKey; admin?: GivenKey },
): Promise<void> {
  const plain = (role: boolean) =>
    contract.operations.find(
      (op) =>
        op.method === 'get' && op.security === 'bearer' && !!op.role === role && !op.params.some((p) => p.required || p.in === 'path'),
    );
  const ask = async (path: string, key?: string) => {
    try {
      return await client.send({
        method: 'GET',
        path,
        headers: { Accept: 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
      });
    } catch (error) {
      throw new CannotCheck(`no answer from ${baseUrl}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  const said = (res: { status: number; json?: unknown }) => {
    const message = (res.json as { message?: unknown } | undefined)?.message;
    return typeof message === 'string' ? `${res.status}: ${message}` : String(res.status);
  };
  const probe = plain(false) ?? plain(true);
  const { customer, admin } = keys;
  const answer = await ask(probe?.path ?? contract.paths[0] ?? '/', customer?.key);
  if (customer && probe && answer.status === 401) throw new CannotCheck(`${baseUrl} refused the key of ${customer.from} (${said(answer)})`);
  if (admin && probe) {
    const roleProbe = plain(true);
    const res = await ask((roleProbe ?? probe).path, admin.key);
    if (res.status === 401) throw new CannotCheck(`${baseUrl} refused the key of ${admin.from} (${said(res)})`);
    if (roleProbe && res.status === 403) {
      throw new CannotCheck(
        `the key of ${admin.from} is not a key of the ${roleProbe.role} role: GET ${roleProbe.path} answered ${said(res)}`,
      );
    }
  }
}

export async function main(argv: string[], program: Program): Promise<number> {
  // Where "cannot check" is written as well, once the options are read.
  const reports: { junit?: string } = {};
  const cannotCheck = (message: string) => {
    console.error(`${program.name}: cannot check: ${message}`);
    if (reports.junit) write(reports.junit, junitCannotCheck(tool, message));
    return 2;
  };
  let values: Values;
  try {
    values = parseArgs({ args: argv, options: { ...options, ...program.options }, allowPositionals: false }).values;
  } catch (error) {
    return cannotCheck(`${error instanceof Error ? error.message : String(error)} (see --help)`);
  }
  const junitFile = values.junit as string | undefined;
  reports.junit = junitFile;
  if (values.help) {
    console.log(usage(program));
    return 0;
  }
  const specPath = (values.spec as string | undefined) ?? defaultSpecPath;
  let contract: Contract;
  try {
    contract = loadContract(specPath);
  } catch (error) {
    return cannotCheck(`cannot read the contract ${specPath}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const info = contract.doc.info as { title?: string; version?: string } | undefined;
  if (values.version) {
    console.log(`${tool} (contract: ${info?.title ?? '?'} ${info?.version ?? '?'}, ${specPath})`);
    return 0;
  }
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
  const runs = values.runs !== undefined ? Number(values.runs) : 3;
  if (!Number.isInteger(seed) || seed < 0) return cannotCheck('--seed must be a non-negative integer');
  if (!Number.isInteger(runs) || runs < 1 || runs > 50) return cannotCheck('--runs must be an integer from 1 to 50');
  const remote = values['base-url'] as string | undefined;
  if (!remote && !program.local) return cannotCheck('--base-url is required (see --help)');
  if (remote) {
    try {
      if (!/^https?:$/.test(new URL(remote).protocol)) throw new Error('not http');
    } catch {
      return cannotCheck(`--base-url ${remote} is not an http:// or https:// URL`);
    }
  }
  const keys = keysOf(values, process.env);
  if (typeof keys === 'string') return cannotCheck(keys);
  // A local run makes its own accounts: keys for some other service are not for it.
  if (!remote && (values['key-file'] || values['admin-key-file'])) return cannotCheck('--key-file and --admin-key-file go with --base-url');
  const bodyLimitBytes = values['body-limit'] !== undefined ? Number(values['body-limit']) : bodyLimitOf(contract);
  if (bodyLimitBytes === undefined || !Number.isInteger(bodyLimitBytes) || bodyLimitBytes < 1) {
    return cannotCheck('the spec states no body limit (info.x-limits.bodyBytes, or "bodies over N KiB"): pass --body-limit');
  }

  const repeat = [`--seed ${seed}`];
  if (runs !== 3) repeat.push(`--runs ${runs}`);
  if (values.limits) repeat.push('--limits');
  if (values['every-operation']) repeat.push('--every-operation');
  if (values.spec) repeat.push(`--spec ${String(values.spec)}`);
  for (const [name, config] of Object.entries(program.options ?? {})) {
    if (config.type === 'boolean' && values[name]) repeat.push(`--${name}`);
  }
  // The keys as this run had them: the files named, the variables set again by whoever repeats it.
  if (remote)
    repeat.push(`--base-url ${remote}`, ...[keys.customer, keys.admin].filter((k) => k?.from.startsWith('--')).map((k) => k!.from));
  const reproduce = `Reproduce with: ${program.name} ${repeat.join(' ')}`;

  const startedAt = new Date();
  let target: Target | undefined;
  const clients: HttpClient[] = [];
  const onSignal = () => void (target?.stop() ?? Promise.resolve()).then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    if (remote) {
      target = {
        baseUrl: remote,
        options: { customerKey: keys.customer?.key, adminKey: keys.admin?.key },
        stop: async () => {},
      };
    } else {
      target = await program.local!(values, contract);
    }
    const direct = new HttpClient(target.baseUrl);
    clients.push(direct);
    await preflight(direct, contract, target.baseUrl, remote ? keys : {});
    if (program.around) target = await program.around(values, target, specPath);
    const client = target.client ?? direct;
    if (client !== direct) clients.push(client);
    console.log(
      `Contract: ${specPath} (${info?.title ?? '?'} ${info?.version ?? '?'}, ${contract.operations.length} operations); seed ${seed}; runs ${runs}`,
    );
    const used = remote ? [keys.customer, keys.admin].filter((k) => k !== undefined) : [];
    console.log(
      `Checking ${target.baseUrl} with ${tool}${used.length ? `; keys from ${used.map((k) => `${k.from} (…${k.key.slice(-4)})`).join(' and ')}` : ''}`,
    );
    let streamed = 0;
    const result = await runSuite({
      rateLimitReason: "the service's rate limit was not reached by this run's traffic",
      ...target.options,
      limits: values.limits === true || target.options?.limits === true,
      everyOperation: values['every-operation'] === true || target.options?.everyOperation === true,
      seed,
      runs,
      bodyLimitBytes,
      client,
      contract,
      validator: new ResponseValidator(contract),
      log: (line) => console.log(line),
      // The first failures are printed as they happen, for a run that is stopped early.
      onExchange: (ex) => {
        if (values.verbose) {
          const body = ex.request.body === undefined ? '' : ` ${ex.request.body.slice(0, 160)}`;
          console.log(
            `  ${ex.response.status} ${ex.opId} [${ex.label}] ${ex.request.method} ${ex.request.path}${body} -> ${ex.response.text.slice(0, 160)}`,
          );
        }
        if (ex.failures.length > 0 && streamed++ < 3) console.log(`\n${formatFailure(ex, reproduce)}\n`);
        target?.onExchange?.(ex);
      },
    });
    const durationMs = Date.now() - startedAt.getTime();
    const outside = target.outside?.() ?? [];
    console.log(`\nFinished in ${(durationMs / 1000).toFixed(1)} s.\n`);
    if (result.exchanges.some((e) => e.response.status === 0) && target.output)
      console.log(`\nThe service printed:\n${target.output() || '(nothing)'}`);
    if (outside.length > 0) {
      console.log(`\nAnother validator found ${outside.length} violation(s):`);
      for (const line of outside.slice(0, 50)) console.log(`  ${line}`);
    }
    const ctx: ReportContext = {
      tool,
      baseUrl: target.baseUrl,
      spec: { path: specPath, title: info?.title ?? '', version: info?.version ?? '' },
      startedAt,
      durationMs,
      reproduce,
      outside,
    };
    if (junitFile) {
      write(junitFile, junitReport(result, ctx));
      write(junitFile.replace(/(\.xml)?$/i, '.json'), jsonReport(result, ctx));
    }
    if (values.json) write(values.json as string, jsonReport(result, ctx));
    // The count line closes the output, as CI systems read it.
    console.log(formatReport(result, reproduce, { verbose: values.verbose === true, outside: outside.length, junit: junitFile }));
    const failed = result.exchanges.some((e) => e.failures.length > 0) || result.gaps.length > 0 || outside.length > 0;
    return failed ? 1 : 0;
  } catch (error) {
    if (error instanceof CannotCheck) return cannotCheck(error.message);
    throw error;
  } finally {
    for (const c of clients) c.close();
    await target?.stop();
  }
}

if (require.main === module) {
  main(process.argv.slice(2), { name: 'petstore-contract' }).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? (error.stack ?? error.message) : error);
      process.exit(2);
    },
  );
}
