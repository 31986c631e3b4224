// npm run test:contract [-- --base-url URL --key KEY [--admin-key KEY]] [--seed N] [--runs N] [--spec PATH] [--via-prism]
//
// Without --base-url it starts this project's server on 127.0.0.1 with a fresh database
// (and a second one with a tiny rate limit, where 429 is reachable), makes an admin with
// `npm run account:create`, and tests them. Exits 1 on any failure.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ResponseValidator } from './checks';
import { HttpClient } from './http';
import { formatFailure, formatReport } from './report';
import { runSuite, type RunOptions } from './runner';
import { PrismRoutedClient, responseViolations, startPrism, type PrismProxy } from './prism';
import { createAdmin, startService, type LocalService } from './server';
import { defaultSpecPath, loadContract } from './spec';

const usage = `Usage: npm run test:contract -- [--base-url URL --key KEY [--admin-key KEY]] [--seed N] [--runs N] [--spec PATH]

  (no --base-url)   start this project's server on 127.0.0.1 with a fresh database and test it
  --base-url URL    test a running deployment instead
  --key KEY         a customer's API key for that deployment (required with --base-url)
  --admin-key KEY   an admin's key, so that admin operations are covered beyond 401/403
  --seed N          reproduce a run (every run prints its seed)
  --runs N          resources made per create operation and samples per read (default 3)
  --spec PATH       the contract to test against (default: this project's openapi.yaml)
  --verbose, -v     print every request and its answer, one line each
  --body-limit N    bytes above which a body must be refused with 413 (default: the limit the spec's info.description states)
  --via-prism       send the traffic through Stoplight Prism (prism proxy), and fail on any
                    response violation it reports as well`;

function bodyLimitFromSpec(description: unknown): number | undefined {
  const match = /bodies over (\d+)\s*KiB/i.exec(String(description ?? ''));
  return match ? Number(match[1]) * 1024 : undefined;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      key: { type: 'string' },
      'admin-key': { type: 'string' },
      seed: { type: 'string' },
      runs: { type: 'string' },
      spec: { type: 'string' },
      'body-limit': { type: 'string' },
      verbose: { type: 'boolean', short: 'v' },
      'via-prism': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
  const runs = values.runs !== undefined ? Number(values.runs) : 3;
  if (!Number.isInteger(seed) || seed < 0 || !Number.isInteger(runs) || runs < 1 || runs > 50) {
    console.error(`--seed must be a non-negative integer and --runs 1 to 50.\n\n${usage}`);
    return 2;
  }
  const remote = values['base-url'];
  if (remote && !values.key) {
    console.error(`--base-url needs --key (a customer's API key).\n\n${usage}`);
    return 2;
  }
  if (!remote && (values.key || values['admin-key'])) {
    console.error(`--key and --admin-key go with --base-url.\n\n${usage}`);
    return 2;
  }

  const contract = loadContract(values.spec ?? defaultSpecPath);
  const validator = new ResponseValidator(contract);
  // One source: the limit the contract states, unless the caller names another.
  const bodyLimitBytes = values['body-limit']
    ? Number(values['body-limit'])
    : bodyLimitFromSpec((contract.doc.info as { description?: unknown } | undefined)?.description);
  if (bodyLimitBytes === undefined) {
    console.error(`The spec's info.description states no body limit ("bodies over N KiB"); pass --body-limit.\n\n${usage}`);
    return 2;
  }

  const reproduceArgs = [`--seed ${seed}`];
  if (runs !== 3) reproduceArgs.push(`--runs ${runs}`);
  if (values.spec) reproduceArgs.push(`--spec ${values.spec}`);
  if (values['via-prism']) reproduceArgs.push('--via-prism');
  if (remote) reproduceArgs.push(`--base-url ${remote}`, '--key <KEY>', ...(values['admin-key'] ? ['--admin-key <ADMIN_KEY>'] : []));
  const reproduce = `Reproduce with: npm run test:contract -- ${reproduceArgs.join(' ')}`;

  const started = Date.now();
  const services: Array<LocalService | PrismProxy> = [];
  const clients: HttpClient[] = [];
  const stopAll = () => Promise.all(services.map((s) => s.stop()));
  const prismViolations: string[] = [];
  const onSignal = () => void stopAll().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    let options: Omit<RunOptions, 'client' | 'contract' | 'validator'>;
    let baseUrl: string;
    if (remote) {
      baseUrl = remote;
      options = {
        seed,
        runs,
        bodyLimitBytes,
        customerKey: values.key,
        adminKey: values['admin-key'],
        rateLimitReason: "the deployment's rate limit is not known to the suite, and this run's traffic did not reach it",
      };
    } else {
      const rateLimit = 1_000_000;
      console.log('Starting the service on 127.0.0.1 with a fresh database…');
      // The suite sends many wrong Basic credentials on purpose: no login lockout here.
      const service = await startService({
        RATE_LIMIT_PER_MINUTE: String(rateLimit),
        LOGIN_FAILURES_PER_ACCOUNT: String(rateLimit),
        LOGIN_FAILURES_PER_ADDRESS: String(rateLimit),
        // The suite signs up many accounts from one address; the limit has its own tests.
        SIGNUPS_PER_ADDRESS_PER_HOUR: String(rateLimit),
        // Low enough that the suite's own key creations reach 409 api_key_limit_reached:
        // its account's first key and the first one it makes fill it.
        API_KEYS_PER_ACCOUNT: '2',
      });
      services.push(service);
      const limited = await startService({ RATE_LIMIT_PER_MINUTE: '1' });
      services.push(limited);
      const admin = { email: `contract-admin-${seed}@example.com`, password: randomBytes(18).toString('base64url') };
      createAdmin(service.databasePath, admin.email, admin.password);
      baseUrl = service.baseUrl;
      const limitedClient = new HttpClient(limited.baseUrl);
      clients.push(limitedClient);
      options = {
        seed,
        runs,
        bodyLimitBytes,
        adminCredentials: admin,
        rateLimitedClient: limitedClient,
        rateLimitReason: `the instance runs with RATE_LIMIT_PER_MINUTE=${rateLimit}`,
      };
      console.log(`Service at ${baseUrl} (database ${service.databasePath}); rate-limited twin at ${limited.baseUrl}`);
    }
    let client = new HttpClient(baseUrl);
    if (values['via-prism']) {
      const prism = await startPrism(values.spec ?? defaultSpecPath, baseUrl);
      services.push(prism);
      console.log(
        `Stoplight Prism validates every answer, proxying ${prism.baseUrl} to ${baseUrl} (bodies that are not JSON go straight to the service)`,
      );
      client = new PrismRoutedClient(prism.baseUrl, client);
    }
    console.log(`Contract: ${values.spec ?? 'openapi.yaml'} (${contract.operations.length} operations); seed ${seed}; runs ${runs}`);
    clients.push(client);
    let streamed = 0;
    const result = await runSuite({
      ...options,
      client,
      contract,
      validator,
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
        for (const violation of responseViolations(ex.response.headers)) {
          prismViolations.push(`${ex.opId} [${ex.label}] ${ex.request.method} ${ex.request.path} -> ${ex.response.status}: ${violation}`);
        }
      },
    });
    console.log(`\nFinished in ${((Date.now() - started) / 1000).toFixed(1)} s.\n`);
    console.log(formatReport(result, reproduce));
    if (result.exchanges.some((e) => e.response.status === 0)) {
      for (const s of services) console.log(`\nThe service at ${s.baseUrl} printed:\n${s.output() || '(nothing)'}`);
    }
    if (values['via-prism']) {
      console.log(`\nStoplight Prism: ${prismViolations.length} response violation(s)${prismViolations.length > 0 ? ':' : '.'}`);
      for (const line of prismViolations.slice(0, 50)) console.log(`  ${line}`);
    }
    const failed = result.exchanges.some((e) => e.failures.length > 0) || result.gaps.length > 0 || prismViolations.length > 0;
    return failed ? 1 : 0;
  } finally {
    for (const c of clients) c.close();
    await stopAll();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(2);
  },
);
