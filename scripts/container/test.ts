// npm run test:container (through scripts/container/test.sh, which sets podman up and makes
// the base images' stand-ins): builds the image once from Containerfile with --pull=never,
// then checks it
// - alone on SQLite: not root, within 300 MB, nothing of the build in it (npm, a compiler,
//   TypeScript, tests); run with --read-only (a tmpfs for /tmp) and a /data volume, its
//   HEALTHCHECK turns healthy, an admin is made with the image's own account:create, the
//   contract suite passes against it; `podman stop` under load fails no request and exits 0;
//   a new container on the same volume has the data;
// - in compose.yaml's stack (PostgreSQL, two instances, HAProxy): the contract suite passes
//   through the proxy; one instance stopped under load fails no request.
// Traffic goes only to 127.0.0.1 (published ports). Every wait is bounded.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../contract-local';

const root = join(__dirname, '..', '..');
const image = process.env.PETSTORE_IMAGE ?? 'localhost/petstore:ci';
const run = `petstore-ci-${process.pid}`;
const maxImageBytes = 300 * 1000 * 1000;
// The settings both targets get from the environment: the request and password-check limits
// raised so that the contract suite need not wait out the defaults' windows (it passes
// within them too, in minutes instead of one).
const limits = { RATE_LIMIT_PER_MINUTE: '1000000', PASSWORD_CHECKS_PER_MINUTE: '1000000' };
// More than SHUTDOWN_DELAY_MS (5 s) plus the drain, so that podman never needs SIGKILL.
const stopTimeoutS = 20;

function podman(args: string[], input?: string): string {
  return execFileSync('podman', args, { cwd: root, encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'inherit'] }).trim();
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`container check failed: ${what}`);
  console.log(`ok: ${what}`);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(500);
  }
}

/** The build's extra CA: PETSTORE_BUILD_CA, else the certificates this host added to Debian's (update-ca-certificates). */
function extraCa(dir: string): string | undefined {
  if (process.env.PETSTORE_BUILD_CA) return process.env.PETSTORE_BUILD_CA;
  const folder = '/usr/local/share/ca-certificates';
  const files = existsSync(folder)
    ? readdirSync(folder, { recursive: true })
        .map(String)
        .filter((f) => f.endsWith('.crt'))
    : [];
  if (files.length === 0) return undefined;
  const bundle = join(dir, 'extra-ca.pem');
  writeFileSync(bundle, files.map((f) => readFileSync(join(folder, f), 'utf8')).join('\n'));
  return bundle;
}

function build(dir: string): void {
  const ca = extraCa(dir);
  const started = Date.now();
  const args = ['build', '--pull=never', '--format', 'docker', '-t', image, ...(ca ? ['--secret', `id=ca,src=${ca}`] : []), '.'];
  execFileSync('podman', args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  console.log(`built ${image} in ${((Date.now() - started) / 1000).toFixed(0)} s${ca ? ` (extra CA ${ca} as a build secret)` : ''}`);
}

function checkImage(): void {
  const [size, user, health, env] = podman([
    'image',
    'inspect',
    image,
    '--format',
    '{{.Size}}|{{.Config.User}}|{{json .Config.Healthcheck}}|{{json .Config.Env}}',
  ]).split('|');
  check(Number(size) <= maxImageBytes, `the image is ${(Number(size) / 1e6).toFixed(0)} MB, at most ${maxImageBytes / 1e6} MB`);
  check(/^[1-9]\d*(:\d+)?$/.test(user ?? ''), `the image's user is a non-root number (${user})`);
  check((health ?? '').includes('/readyz'), 'the image has a HEALTHCHECK on /readyz');
  // The build's extra CA is the build stage's secret only.
  check(!(env ?? '').includes('NODE_EXTRA_CA_CERTS'), "the image's environment names no extra CA");
  // What the build used and the image must not carry; `command -v` prints whatever exists.
  const found = spawnSync(
    'podman',
    [
      'run',
      '--rm',
      '--entrypoint',
      'sh',
      image,
      '-c',
      'command -v npm npx yarn corepack tsc gcc g++ cc make python3 curl; ' +
        'ls -d /app/node_modules/typescript /app/node_modules/tsx /app/node_modules/esbuild /app/node_modules/jest 2>/dev/null; ' +
        'find /app \\( -name "*.ts" -o -name "*.tsbuildinfo" -o -path /app/tests -o -path /app/dist/compiled \\) -print | head -5',
    ],
    { encoding: 'utf8' },
  );
  check(
    found.stdout.trim() === '',
    `no npm, compiler, curl, TypeScript or tests in the image${found.stdout.trim() ? `: ${found.stdout.trim()}` : ''}`,
  );
}

interface Target {
  url: string;
  adminKey: string;
}

function portOf(container: string, port: number): number {
  const published = podman(['port', container, `${port}/tcp`]).split('\n')[0] ?? '';
  return Number(published.slice(published.lastIndexOf(':') + 1));
}

async function healthy(container: string): Promise<void> {
  // podman 4.3 runs HEALTHCHECKs from systemd timers, which a machine without systemd lacks:
  // the check is run here instead, as the timer would.
  await until(`${container} to be healthy`, 90_000, () =>
    spawnSync('podman', ['healthcheck', 'run', container], { stdio: 'ignore' }).status === 0 ? true : undefined,
  );
}

/** An admin through the image's own account:create, and a key for it through the API. */
async function makeAdmin(container: string, url: string): Promise<string> {
  const email = 'container-admin@example.com';
  const password = randomBytes(18).toString('base64url');
  const args = ['exec', '-i', container, 'node', 'dist/scripts/account-create.js', `--email=${email}`, '--admin', '--exists-ok'];
  // A command run once, not a service: it gives up when its connection is not made within
  // DATABASE_TIMEOUT_MS (3 s), which a machine this loaded has once exceeded just after the
  // stack started. Tried again (--exists-ok: the same account, the same password), said each time.
  for (let attempt = 1; ; attempt++) {
    const made = spawnSync('podman', args, { cwd: root, encoding: 'utf8', input: `${password}\n` });
    if (made.status === 0) break;
    console.log(`account:create in ${container}, attempt ${attempt}, failed: ${made.stdout}${made.stderr}`.trim());
    if (attempt === 3) throw new Error(`account:create failed ${attempt} times in ${container}`);
    await sleep(2_000);
  }
  const response = await fetch(`${url}/api-keys`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`, 'content-type': 'application/json' },
    body: '{}',
  });
  const body = (await response.json()) as { key?: string };
  if (response.status !== 201 || !body.key) throw new Error(`POST /api-keys as the admin answered ${response.status}`);
  return body.key;
}

function contract(target: Target, label: string): void {
  const started = Date.now();
  // The package's own command (--base-url): a customer signed up by the suite, the admin's
  // key in the environment (never on a command line: contract/README.md).
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/test-contract.ts', '--base-url', target.url], {
    cwd: root,
    stdio: 'inherit',
    timeout: 600_000,
    env: { ...process.env, PETSTORE_ADMIN_KEY: target.adminKey },
  });
  check(result.status === 0, `the contract suite passes against ${label} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
}

/**
 * `stop` (a podman command) while 8 keep-alive clients send GET /pets through `url`; the
 * clients go on until `loadAfterStopMs` after it was sent (or it ended). Every request must
 * be answered 200.
 */
async function stopUnderLoad(
  url: string,
  key: string,
  stop: string[],
  loadAfterStopMs: number | 'until-stopped',
  logsOf: string[] = [],
): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const { hostname, port } = new URL(url);
  let running = true;
  let sent = 0;
  const failures: string[] = [];
  const one = () =>
    new Promise<void>((resolve) => {
      sent++;
      const req = request({ host: hostname, port, path: '/pets?limit=5', agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (res.statusCode !== 200 && body.length < 300) body += chunk;
        });
        res.on('end', () => {
          if (res.statusCode !== 200) failures.push(`status ${res.statusCode} ${body.slice(0, 200)}`);
          resolve();
        });
      });
      req.setTimeout(10_000, () => req.destroy(new Error('no answer in 10 s')));
      req.on('error', (err) => {
        failures.push(err.message);
        resolve();
      });
      req.end();
    });
  const client = async () => {
    // Bounded in count as well as in time.
    while (running && sent < 200_000) await one();
  };
  const clients = Array.from({ length: 8 }, client);
  await sleep(1_000);
  const stopped = new Promise<number | null>((resolve) => {
    const child = spawn('podman', stop, { stdio: 'ignore' });
    child.on('exit', (code) => resolve(code));
  });
  const started = Date.now();
  if (loadAfterStopMs === 'until-stopped') await stopped;
  else await sleep(loadAfterStopMs);
  running = false;
  await Promise.all(clients);
  agent.destroy();
  const code = await stopped;
  const tookS = ((Date.now() - started) / 1000).toFixed(1);
  // What the containers said, for a failure's cause: the service's log lines and HAProxy's.
  if (failures.length > 0)
    for (const container of logsOf) {
      console.log(`--- podman logs --tail 40 ${container}`);
      spawnSync('podman', ['logs', '--tail', '40', container], { stdio: 'inherit' });
    }
  check(code === 0, `podman ${stop.join(' ')} succeeded (${tookS} s)`);
  check(
    failures.length === 0,
    `${sent} requests under \`podman stop\`, ${failures.length} failed${failures.length ? `: ${failures.slice(0, 3).join(', ')}` : ''}`,
  );
}

function exitCode(container: string): number {
  return Number(podman(['inspect', container, '--format', '{{.State.ExitCode}}']));
}

async function sqlite(): Promise<void> {
  const volume = `${run}-data`;
  const name = (n: number) => `${run}-sqlite-${n}`;
  const start = async (n: number) => {
    podman([
      'run',
      '-d',
      '--name',
      name(n),
      '--read-only',
      '--tmpfs',
      '/tmp',
      '-v',
      `${volume}:/data`,
      '-p',
      '127.0.0.1::3000',
      ...Object.entries(limits).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
      image,
    ]);
    await healthy(name(n));
    return `http://127.0.0.1:${portOf(name(n), 3000)}`;
  };
  try {
    const url = await start(1);
    check(
      podman(['inspect', name(1), '--format', '{{.HostConfig.ReadonlyRootfs}}']) === 'true',
      'it runs with a read-only root file system',
    );
    const uid = podman(['exec', name(1), 'node', '-p', 'process.getuid()']);
    check(uid !== '0', `the service runs as uid ${uid}, not root`);
    const adminKey = await makeAdmin(name(1), url);
    contract({ url, adminKey }, 'the image on SQLite');
    // The load stops within the 5 s the service keeps answering after SIGTERM, while it still listens.
    await stopUnderLoad(url, adminKey, ['stop', '-t', String(stopTimeoutS), name(1)], 3_000);
    check(exitCode(name(1)) === 0, 'the service exits 0 on SIGTERM, PID 1 in its container');
    podman(['rm', name(1)]);
    const again = await start(2);
    const keys = await fetch(`${again}/api-keys`, { headers: { authorization: `Bearer ${adminKey}` } });
    check(keys.status === 200, 'a new container on the same volume has the data (the admin key made before works)');
  } finally {
    spawnSync('podman', ['rm', '-f', '-t', '0', name(1), name(2)], { stdio: 'ignore' });
    spawnSync('podman', ['volume', 'rm', '-f', volume], { stdio: 'ignore' });
  }
}

async function stack(): Promise<void> {
  const port = await freePort();
  const env = {
    ...process.env,
    ...limits,
    PETSTORE_IMAGE: image,
    PETSTORE_PORT: `127.0.0.1:${port}`,
    POSTGRES_PASSWORD: randomBytes(12).toString('hex'),
  };
  const compose = (args: string[]) =>
    execFileSync('podman-compose', ['-p', run, '-f', 'compose.yaml', ...args], { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const app = (n: number) => `${run}_app${n}_1`;
  const url = `http://127.0.0.1:${port}`;
  try {
    const started = Date.now();
    compose(['up', '-d']);
    await healthy(app(1));
    await healthy(app(2));
    // HAProxy puts a server in after two good checks, 2 s apart.
    await until('the proxy to answer /readyz', 30_000, async () =>
      (await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined,
    );
    await sleep(4_500);
    console.log(`compose stack up in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    const adminKey = await makeAdmin(app(1), url);
    contract({ url, adminKey }, 'the compose stack, through HAProxy');
    await stopUnderLoad(url, adminKey, ['stop', '-t', String(stopTimeoutS), app(1)], 'until-stopped', [
      app(1),
      app(2),
      `${run}_proxy_1`,
      `${run}_db_1`,
    ]);
    check(exitCode(app(1)) === 0, 'the stopped instance exited 0');
  } finally {
    try {
      compose(['down', '-v']);
    } catch (error) {
      console.error(`podman-compose down failed: ${String(error)}`);
    }
    // podman-compose 1.0 leaves the project's network behind.
    spawnSync('podman', ['network', 'rm', '-f', `${run}_default`], { stdio: 'ignore' });
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-container-'));
  try {
    if (process.env.PETSTORE_IMAGE === undefined) build(dir);
    checkImage();
    await sqlite();
    await stack();
    console.log('test:container: all checks passed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
