// npm run test:contract [-- options]: the contract suite (contract/, a package of its own)
// as this repository runs it. With --base-url it is the package's own command; without, it
// starts this project's server first (scripts/contract-local.ts), and --via-prism puts
// Stoplight Prism's validating proxy in front (scripts/contract-prism.ts). Both need this
// repository (its build, account:create, Prism), which is why they are not in the package.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { main, type Program, type Target } from '../contract/cli';
import { CannotCheck } from '../contract/runner';
import { HttpClient } from '../contract/http';
import { createAdmin, startService } from './contract-local';
import { PrismRoutedClient, responseViolations, startPrism } from './contract-prism';

const program: Program = {
  name: 'npm run test:contract --',
  usage: `  (no --base-url)   build (npm run build) and start this project's server on 127.0.0.1 with a fresh
                    database and its defaults but for the request and password-check limits (raised,
                    to be quick: the run makes an account's 20 keys with its password, and sends
                    every form to every operation, as --every-operation), and a twin limited to
                    one request a minute where 429 is reached; make an admin with
                    npm run account:create; check them; stop both
  --via-prism       send the traffic through Stoplight Prism (prism proxy), and fail on any
                    response violation it reports as well
`,
  options: { 'via-prism': { type: 'boolean' } },

  async local(values) {
    // Built here, not in a pretest script: a run against --base-url needs no build (npm run
    // test:contract's pre-script would not know which run it is, as npm passes it no arguments).
    const build = spawnSync(process.execPath, [join(__dirname, 'build.mjs')], { stdio: 'inherit' });
    if (build.status !== 0) throw new CannotCheck('npm run build failed: the service to check could not be built');
    const rateLimit = 1_000_000;
    console.log('Starting the service on 127.0.0.1 with a fresh database…');
    const service = await startService({ RATE_LIMIT_PER_MINUTE: String(rateLimit), PASSWORD_CHECKS_PER_MINUTE: String(rateLimit) });
    const limited = await startService({ RATE_LIMIT_PER_MINUTE: '1' }).catch(async (error: unknown) => {
      await service.stop();
      throw error;
    });
    const seed = String(values.seed ?? 'local');
    const admin = { email: `contract-admin-${seed}@example.com`, password: randomBytes(18).toString('base64url') };
    const limitedClient = new HttpClient(limited.baseUrl);
    const stop = async () => {
      limitedClient.close();
      await Promise.all([service.stop(), limited.stop()]);
    };
    try {
      createAdmin(service.databasePath, admin.email, admin.password);
    } catch (error) {
      await stop();
      throw error;
    }
    console.log(`Service at ${service.baseUrl} (database ${service.databasePath}); rate-limited twin at ${limited.baseUrl}`);
    return {
      baseUrl: service.baseUrl,
      // Its limits are reached at no cost: the twin's 429 at once, the keys under a raised password-check
      // limit; under a raised request limit, every form of the shared steps goes to every operation.
      options: { adminCredentials: admin, rateLimitedClient: limitedClient, limits: true, everyOperation: true },
      output: () => `${service.output()}\n${limited.output()}`,
      stop,
    };
  },

  async around(values, target, specPath): Promise<Target> {
    if (!values['via-prism']) return target;
    const prism = await startPrism(specPath, target.baseUrl);
    console.log(
      `Stoplight Prism validates every answer, proxying ${prism.baseUrl} to ${target.baseUrl} (bodies that are not JSON go straight to the service)`,
    );
    const violations: string[] = [];
    return {
      ...target,
      client: new PrismRoutedClient(prism.baseUrl, target.client ?? new HttpClient(target.baseUrl)),
      onExchange: (ex) => {
        target.onExchange?.(ex);
        for (const v of responseViolations(ex.response.headers)) {
          violations.push(
            `Stoplight Prism: ${ex.opId} [${ex.label}] ${ex.request.method} ${ex.request.path} -> ${ex.response.status}: ${v}`,
          );
        }
      },
      outside: () => [...(target.outside?.() ?? []), ...violations],
      output: () => `${target.output?.() ?? ''}\n${prism.output()}`,
      stop: async () => {
        await prism.stop();
        await target.stop();
      },
    };
  },
};

main(process.argv.slice(2), program).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(2);
  },
);
