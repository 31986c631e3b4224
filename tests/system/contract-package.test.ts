// The contract suite as a package of its own (contract/package.json): `npm pack`, installed
// into an empty folder without the service (at most 60 MB, nothing built natively), its bin
// answers, and "cannot check" is exit code 2 with one line. CI runs the installed package
// against a service in its default configuration (scripts/check-contract-package.sh).
import { execFileSync, spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, startServer, type ServerProcess } from '../../scripts/server-process';

jest.setTimeout(300_000);

const contractPkg = JSON.parse(readFileSync(join(repoRoot, 'contract/package.json'), 'utf8'));
const rootPkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));

/**
 * Runs a command to its end while this process goes on reading the service's stderr
 * (startServer): the service writes its log in the turn (docs/operations.md, "Running
 * notes"), so a reader blocked in spawnSync would hold it up once the pipe is full.
 */
function runAlongside(
  command: string,
  args: string[],
  options: SpawnOptions & { timeout: number },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeout);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** Bytes under a folder, and every file name in it. */
function walk(dir: string): { bytes: number; files: string[] } {
  let bytes = 0;
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = walk(path);
      bytes += inner.bytes;
      files.push(...inner.files);
    } else if (entry.isFile()) {
      bytes += statSync(path).size;
      files.push(path);
    }
  }
  return { bytes, files };
}

describe('the contract suite, packed and installed alone', () => {
  let dir: string;
  let installed: string;
  let tarball: string;
  let bin: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-contract-pkg-'));
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: join(repoRoot, 'contract'), encoding: 'utf8' }),
    ) as Array<{ filename: string; files: Array<{ path: string }> }>;
    tarball = join(dir, packed[0]!.filename);
    installed = join(dir, 'ci-job');
    mkdirSync(installed);
    execFileSync('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: installed, encoding: 'utf8' });
    bin = join(installed, 'node_modules', '.bin', 'petstore-contract');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('packs its bundle, its README and the contract it checks, and leaves no copy behind', () => {
    const listed = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').sort();
    expect(listed).toEqual(['package/README.md', 'package/dist/cli.js', 'package/openapi.yaml', 'package/package.json']);
    expect(readdirSync(join(repoRoot, 'contract')).filter((f) => f === 'dist' || f === 'openapi.yaml')).toEqual([]);
  });

  it('installs into an empty folder in at most 60 MB, with nothing built natively and nothing of the service', () => {
    const { bytes, files } = walk(join(installed, 'node_modules'));
    expect(bytes).toBeLessThan(60 * 1024 * 1024);
    expect(files.filter((f) => f.endsWith('.node') || f.endsWith('binding.gyp'))).toEqual([]);
    for (const name of ['better-sqlite3', 'express', 'pg', 'drizzle-orm', ...Object.keys(rootPkg.optionalDependencies)]) {
      expect(readdirSync(join(installed, 'node_modules'))).not.toContain(name);
    }
    const bundle = readFileSync(join(installed, 'node_modules', 'petstore-contract', 'dist', 'cli.js'), 'utf8');
    expect(bundle).not.toMatch(/require\("(express|better-sqlite3|pg|drizzle-orm)/);
    expect(bundle).not.toMatch(/\/(server|handlers|db|domain)\/[a-z-]+\.ts/);
  });

  it('depends on what it imports, at the ranges the service pins', () => {
    const all = { ...rootPkg.dependencies, ...rootPkg.devDependencies } as Record<string, string>;
    for (const [name, range] of Object.entries(contractPkg.dependencies as Record<string, string>))
      expect([name, range]).toEqual([name, all[name]]);
  });

  const run = (...args: string[]) => {
    const res = spawnSync(bin, args, { encoding: 'utf8', timeout: 60_000 });
    return { status: res.status, stdout: res.stdout, stderr: res.stderr };
  };

  it('answers --version and --help with 0', () => {
    expect(run('--version')).toMatchObject({
      status: 0,
      stdout: expect.stringMatching(/^petstore-contract 1\.0\.0 \(contract: Pet Store Service /),
    });
    expect(run('--help')).toMatchObject({
      status: 0,
      stdout: expect.stringContaining('Exit codes: 0 conforms, 1 conformance failures, 2 cannot check'),
    });
  });

  it('says "cannot check" in one line, exit code 2: an unknown option, no URL, a URL with no service', () => {
    const once = (res: ReturnType<typeof run>) => ({ status: res.status, lines: res.stderr.trim().split('\n').length, stderr: res.stderr });
    expect(once(run('--frobnicate'))).toEqual({
      status: 2,
      lines: 1,
      stderr: expect.stringMatching(/^petstore-contract: cannot check: Unknown option '--frobnicate'.* \(see --help\)\n$/),
    });
    expect(once(run())).toEqual({ status: 2, lines: 1, stderr: 'petstore-contract: cannot check: --base-url is required (see --help)\n' });
    expect(once(run('--base-url', 'http://127.0.0.1:9'))).toEqual({
      status: 2,
      lines: 1,
      stderr: expect.stringMatching(/^petstore-contract: cannot check: no answer from http:\/\/127\.0\.0\.1:9: .*ECONNREFUSED/),
    });
  });

  it('takes no key on the command line: --key is refused, naming the variable to use', () => {
    expect(run('--base-url', 'http://127.0.0.1:9', '--key', 'ps_live_on-the-command-line')).toEqual({
      status: 2,
      stdout: '',
      stderr:
        'petstore-contract: cannot check: --key is not taken: a key on the command line is in every process list, ' +
        'and in CI logs (npm echoes the command); set PETSTORE_KEY or pass --key-file FILE\n',
    });
  });

  describe('against a running service in its default configuration', () => {
    let server: ServerProcess;
    const databasePath = () => join(dir, 'petstore.db');
    beforeAll(async () => {
      server = await startServer({ DATABASE_PATH: databasePath() });
    });
    afterAll(() => server.stop());

    it('says "cannot check" in one line when the key is refused, and writes that into the JUnit file', async () => {
      const junit = join(dir, 'refused.xml');
      const res = await runAlongside(bin, ['--base-url', server.url, '--junit', junit], {
        timeout: 60_000,
        env: { ...process.env, PETSTORE_KEY: 'ps_live_not-a-key-of-this-service' },
      });
      expect({ status: res.status, stdout: res.stdout }).toEqual({ status: 2, stdout: '' });
      expect(res.stderr).toBe(
        `petstore-contract: cannot check: ${server.url} refused the key of PETSTORE_KEY (401: The API key is not valid)\n`,
      );
      expect(readFileSync(junit, 'utf8')).toContain('<error message="http');
    });

    // contract/README.md, "In another team's CI": its command as written, the admin key in
    // the environment. Nothing it prints or writes holds the key; npm's own echo of
    // `npm run test:contract` neither.
    it("runs the README's CI command, passing, and no key is in its output or its reports", async () => {
      const readme = readFileSync(join(repoRoot, 'contract/README.md'), 'utf8');
      const ci = readme.slice(readme.indexOf("\n## In another team's CI\n"));
      const command = /^npx petstore-contract .*$/m.exec(ci)?.[0];
      expect(command).toBe('npx petstore-contract --base-url "$STAGING_URL" --junit reports/contract.xml');

      const email = 'ci-admin@example.com';
      const password = 'a long admin password';
      const made = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/account-create.ts', `--email=${email}`, '--admin'], {
        cwd: repoRoot,
        env: { ...process.env, DATABASE_PATH: databasePath(), LOG_LEVEL: 'error' },
        input: `${password}\n`,
        encoding: 'utf8',
      });
      expect(made.status).toBe(0);
      const issued = await fetch(`${server.url}/api-keys`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
      });
      const { key } = (await issued.json()) as { key: string };
      expect(key).toMatch(/^ps_live_/);

      const env = { ...process.env, STAGING_URL: server.url, PETSTORE_ADMIN_KEY: key };
      const started = Date.now();
      const res = await runAlongside('bash', ['-c', command!], { cwd: installed, env, timeout: 280_000 });
      const seconds = (Date.now() - started) / 1000;
      const output = res.stdout + res.stderr;
      const lines = output.trim().split('\n');
      // A failing run's whole output is in the diff: what failed, and the seed that repeats
      // it (contract/README.md, "Output").
      expect({ status: res.status, last: lines.at(-1), output: res.status === 0 ? '' : output }).toEqual({
        status: 0,
        last: expect.stringMatching(/^\d+ passed, 0 failed$/),
        output: '',
      });
      expect(output).toContain(`keys from PETSTORE_ADMIN_KEY (…${key.slice(-4)})`);
      for (const text of [
        output,
        readFileSync(join(installed, 'reports/contract.xml'), 'utf8'),
        readFileSync(join(installed, 'reports/contract.json'), 'utf8'),
      ])
        expect(text).not.toContain(key.slice(8));
      // What a CI log shows (contract/README.md, "Output"): a screen, not a scroll.
      expect(lines.length).toBeLessThanOrEqual(40);
      console.log(`the README's CI command against a default service: ${seconds.toFixed(1)} s, ${lines.length} lines`);

      // npm run test:contract, as the repository runs it: npm echoes its command, which holds no key.
      const viaNpm = spawnSync('npm', ['run', 'test:contract', '--', '--base-url', 'http://127.0.0.1:9'], {
        cwd: repoRoot,
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(viaNpm.stdout + viaNpm.stderr).toContain('> tsx scripts/test-contract.ts --base-url http://127.0.0.1:9');
      expect(viaNpm.stdout + viaNpm.stderr).not.toContain(key.slice(8));
      // A remote target needs no build of this repository (no pre-script runs one).
      expect(viaNpm.stdout + viaNpm.stderr).not.toMatch(/pretest:contract|npm run build|Building the service/);
    });
  });
});
