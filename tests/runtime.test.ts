// The runtime the service runs on here (scripts/runtime.cjs: the project's own Node, an
// optional dependency that npm scripts find first on PATH, where npm has it for the
// platform; else the machine's), the SQLite driver it loads, and what the service prints on
// it (docs/decisions.md, "Runtime"): better-sqlite3 12 aborted the process on Node 24.19+
// when a prepared statement was garbage-collected, and a dependency's url.parse() printed
// a deprecation warning at the first validated request.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startServer } from '../scripts/server-process';
import { chooseRuntime, supports, type PackageJson } from '../scripts/runtime.cjs';

const root = join(__dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;
const choice = chooseRuntime({ platform: process.platform, arch: process.arch, nodeVersion: process.version, pkg });
const shipped =
  choice.use === 'package'
    ? join(dirname(require.resolve(`${choice.name}/package.json`)), 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
    : process.execPath;
const tempDir = () => mkdtempSync(join(tmpdir(), 'petstore-runtime-'));

describe('the shipped runtime', () => {
  it("is the Node.js the tests run on: the project's own where npm has it, else a supported one", () => {
    if (choice.use === 'package') expect(process.version).toBe(`v${choice.version}`);
    expect(supports(pkg.engines.node, process.version)).toBe(true);
    const { stdout } = spawnSync(shipped, ['-p', 'process.version'], { encoding: 'utf8' });
    expect(stdout.trim()).toBe(process.version);
  });

  it('collects prepared statements while the heap grows and at worker threads’ exit, without aborting', () => {
    const run = spawnSync(shipped, [join(__dirname, 'fixtures', 'sqlite-statement-gc.cjs'), join(tempDir(), 'gc.db'), '4'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect({ status: run.status, signal: run.signal, stderr: run.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
    expect(run.stdout.trim()).toBe('ok');
  }, 120_000);

  it('serves under load through its start-up, checkpoint thread and shutdown, and exits 0, with no warning', async () => {
    const databasePath = join(tempDir(), 'petstore.db');
    // Twice: the second start opens an existing database, where the abort came within half a second.
    for (let start = 0; start < 2; start++) {
      // The limits raised above what the load sends: on a quiet machine 8 clients for 2 s pass
      // the default 600 a minute, and this test is about the runtime, not the limits.
      const server = await startServer({
        DATABASE_PATH: databasePath,
        RATE_LIMIT_PER_MINUTE: '1000000',
        RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '10000000',
      });
      try {
        const email = `runtime-${start}@example.com`;
        const password = 'a long runtime password';
        await fetch(`${server.url}/accounts`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ email, password }),
        });
        const made = await fetch(`${server.url}/api-keys`, {
          method: 'POST',
          headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
        });
        const { key } = (await made.json()) as { key: string };
        const deadline = Date.now() + 2_000;
        const load = async () => {
          while (Date.now() < deadline) {
            // Through the whole chain: the key, the validator (query and response) and the database.
            const res = await fetch(`${server.url}/pets?limit=2&status=available`, { headers: { Authorization: `Bearer ${key}` } });
            expect(res.status).toBe(200);
            await res.text();
          }
        };
        await Promise.all(Array.from({ length: 8 }, load));
      } catch (err) {
        // Stopped here too, so that a failure does not leave the service running (and jest waiting on it).
        await server.stop();
        throw err;
      }
      expect(await server.stop()).toBe(0);
      expect(server.log()).not.toMatch(/Assertion failed/);
      // Node's own warnings (a deprecation, an experimental feature) are plain text on stderr.
      expect(
        server
          .log()
          .split('\n')
          .filter((line) => /Warning|^\(node:/.test(line)),
      ).toEqual([]);
      expect(server.log()).toContain(`"node":"${process.version}"`);
    }
  }, 120_000);
});
