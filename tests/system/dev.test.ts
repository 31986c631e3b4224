// npm run dev (scripts/dev.mjs), on a copy of the project: it serves, and an operation added
// to openapi.yaml is regenerated, rebuilt and served (its stub's 501) without another command.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { repoRoot } from '../../scripts/server-process';

jest.setTimeout(600_000);

describe('npm run dev', () => {
  let dir: string;
  let dev: ChildProcess | undefined;
  let output = '';

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-dev-'));
    cpSync(repoRoot, dir, { recursive: true, filter: (source) => !/^(node_modules|\.git|data)(\/|$)/.test(relative(repoRoot, source)) });
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  });
  afterAll(async () => {
    if (dev && dev.exitCode === null) {
      const exited = new Promise((resolve) => dev!.once('exit', resolve));
      dev.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** The address the nth start of the service logged, once it has. */
  async function listening(nth: number): Promise<string> {
    const deadline = Date.now() + 300_000;
    for (;;) {
      const found = [...output.matchAll(/listening on (http:\/\/127\.0\.0\.1:\d+)/g)];
      if (found[nth - 1]) return found[nth - 1]![1]!;
      if (Date.now() > deadline || dev?.exitCode !== null) throw new Error(`no start #${nth} of the service:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('regenerates, rebuilds and restarts when openapi.yaml gains an operation', async () => {
    dev = spawn(process.execPath, ['scripts/dev.mjs'], {
      cwd: dir,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(dir, 'dev.db'), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    dev.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    dev.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const first = await listening(1);
    const email = `dev-${Date.now()}@example.com`;
    const password = 'correct horse battery staple';
    const json = { 'Content-Type': 'application/json' };
    expect((await fetch(`${first}/accounts`, { method: 'POST', headers: json, body: JSON.stringify({ email, password }) })).status).toBe(
      201,
    );
    const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
    const { key } = (await (
      await fetch(`${first}/api-keys`, { method: 'POST', headers: { ...json, Authorization: basic }, body: '{}' })
    ).json()) as {
      key: string;
    };
    const newOperation = (base: string) => fetch(`${base}/categories/1/pets`, { headers: { Authorization: `Bearer ${key}` } });
    expect((await newOperation(first)).status).toBe(404);
    // A start on a copy whose files all have new dates is not a change, and neither is a save without an edit.
    writeFileSync(join(dir, 'openapi.yaml'), readFileSync(join(dir, 'openapi.yaml'), 'utf8'));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(output).not.toContain('openapi.yaml changed');
    expect(output).not.toContain('npm run generate');

    // docs/contract.md's example operation, added to the copy's openapi.yaml.
    const guide = readFileSync(join(repoRoot, 'docs/contract.md'), 'utf8');
    const yaml = /^ {3}```yaml\n([\s\S]*?)^ {3}```$/m.exec(guide)![1]!.replace(/^ {3}/gm, '');
    const spec = readFileSync(join(dir, 'openapi.yaml'), 'utf8');
    writeFileSync(join(dir, 'openapi.yaml'), spec.replace('\npaths:\n', `\npaths:\n${yaml}`));

    const second = await listening(2);
    expect(output.match(/\[dev\] openapi\.yaml changed: npm run generate/g)).toHaveLength(1);
    const answer = await newOperation(second);
    expect({ status: answer.status, body: await answer.json() }).toEqual({
      status: 501,
      body: { code: 'not_implemented', message: expect.stringContaining('listCategoryPets'), status: 501 },
    });
  });
});
