// docs/contract.md's "Changing the contract" loop, run on a copy of the project: add the
// README's operation to openapi.yaml (generate refuses it while its example does not fit),
// generate, see the stub's 501 from a real server, and its example with MOCK_UNIMPLEMENTED
// (behind the real 401 and 400; NODE_ENV=production refusing the setting), fill the stub
// with the README's handler, see the 200, the contract suite passes on the copy, the new
// operation's documented 404 exercised, and spec:changelog names the operation added.
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot, runUntilExit, startServer } from '../../scripts/server-process';

const readme = readFileSync(join(repoRoot, 'docs', 'contract.md'), 'utf8');

function section(heading: string): string {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/contract.md has no "## ${heading}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** The fenced blocks of one language, without the indentation of the list they sit in. */
function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm'))].map(([, indent, body]) =>
    (body as string).replace(new RegExp(`^${indent}`, 'gm'), ''),
  );
}

interface Run {
  code: number;
  out: string;
}

jest.setTimeout(600_000);

describe('docs/contract.md "Changing the contract", on a copy of the project', () => {
  const loop = section('Changing the contract');
  const [operation = ''] = blocks(loop, 'yaml');
  const [stub = '', handler = ''] = blocks(loop, 'ts');
  let dir: string;

  const run = (command: string, ...args: string[]): Promise<Run> =>
    promisify(execFile)(command, args, { cwd: dir, env: { ...process.env, LOG_LEVEL: 'error' } }).then(
      ({ stdout, stderr }) => ({ code: 0, out: stdout + stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, out: error.stdout + error.stderr }),
    );

  /**
   * A fresh server on the copy, built as `npm start` builds it: a customer's GET of the new
   * operation, and the same pets through GET /pets; without a key, with a bad parameter,
   * and preferring a 404.
   */
  async function callNewOperation(categoryId: number, env: Record<string, string> = {}) {
    expect(await run('npm', 'run', '--silent', 'build')).toMatchObject({ code: 0 });
    const server = await startServer({ DATABASE_PATH: join(dir, `petstore-${Date.now()}.db`), ...env }, 60_000, dir);
    try {
      const email = `loop-${Date.now()}@example.com`;
      const password = 'correct horse battery staple';
      const post = (path: string, headers: Record<string, string>, body: unknown) =>
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', ...headers },
          body: JSON.stringify(body),
        });
      expect((await post('/accounts', {}, { email, password })).status).toBe(201);
      const basic = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
      const { key } = (await (await post('/api-keys', { Authorization: basic }, {})).json()) as { key: string };
      const get = async (path: string, headers: Record<string, string> = { Authorization: `Bearer ${key}` }) => {
        const res = await fetch(`${server.url}${path}`, { headers });
        const body: unknown = await res.json();
        return { status: res.status, mock: res.headers.get('x-mock'), body };
      };
      return {
        answer: await get(`/categories/${categoryId}/pets`),
        viaPets: await get(`/pets?categoryId=${categoryId}`),
        missing: await get('/categories/987654/pets'),
        anonymous: await get(`/categories/${categoryId}/pets`, {}),
        badLimit: await get(`/categories/${categoryId}/pets?limit=0`),
        preferred404: await get(`/categories/${categoryId}/pets`, { Authorization: `Bearer ${key}`, Prefer: 'code=404' }),
        log: server.log(),
      };
    } finally {
      await server.stop();
    }
  }

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-contract-loop-'));
    cpSync(repoRoot, dir, {
      recursive: true,
      filter: (source) => !/^(node_modules|\.git|data)(\/|$)/.test(relative(repoRoot, source)),
    });
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  });
  // The copy's history: the contract as it was, for spec:changelog to compare with.
  beforeAll(async () => {
    for (const args of [
      ['init', '-q', '-b', 'main'],
      ['add', 'openapi.yaml', 'docs/interface-corrections.yaml'],
      ['commit', '-q', '-m', 'v1.0.0'],
    ])
      expect(await run('git', '-c', 'user.email=ci@example.com', '-c', 'user.name=ci', ...args)).toMatchObject({ code: 0 });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the operation, the stub and the handler to follow', () => {
    expect(operation).toContain('operationId: listCategoryPets');
    expect(stub).toContain("listCategoryPets: notImplemented('listCategoryPets'),");
    expect(handler).toContain('listCategoryPets(');
  });

  // One story, in order, on the same copy: each step needs the one before.
  it('adds the operation, answers 501 from the stub, 200 once filled, and names the handler left when it is removed', async () => {
    const spec = readFileSync(join(dir, 'openapi.yaml'), 'utf8');
    // 1-2: an example that does not fit its schema is refused, named, and nothing is written.
    expect(operation).toContain('- id: 1\n');
    writeFileSync(join(dir, 'openapi.yaml'), spec.replace('\npaths:\n', `\npaths:\n${operation.replace('- id: 1\n', '- id: 0\n')}`));
    expect(await run('npm', 'run', 'generate')).toEqual({
      code: 1,
      out: expect.stringContaining('listCategoryPets (GET /categories/{categoryId}/pets) response 200 example: /0/id must be >= 1'),
    });
    writeFileSync(join(dir, 'openapi.yaml'), spec.replace('\npaths:\n', `\npaths:\n${operation}`));

    // 1: the doc's operation is whole: the spec lint, its shared-answers rule included, passes it.
    expect(await run('npm', 'run', '--silent', 'lint:spec')).toMatchObject({ code: 0 });

    // 1-2: the operation, then generate: a stub and nothing else changed.
    expect(await run('npm', 'run', 'generate')).toEqual({
      code: 0,
      out: expect.stringContaining('Wrote 501 stubs for listCategoryPets into handlers/categories.ts'),
    });
    const module = readFileSync(join(dir, 'handlers/categories.ts'), 'utf8');
    expect(module).toContain(stub);
    // Existing code is kept: the module as it was, plus an import and the stub.
    const before = readFileSync(join(repoRoot, 'handlers/categories.ts'), 'utf8');
    const added = module.split('\n').filter((line) => !before.split('\n').includes(line));
    expect(added.filter((line) => line.trim() !== '')).toEqual([
      "import { notImplemented } from './types';",
      ...stub.split('\n').filter((line) => line.trim() !== ''),
    ]);

    expect(await run('npm', 'run', 'generate:check')).toEqual({
      code: 1,
      out: expect.stringContaining('Not implemented (501 stubs left): listCategoryPets.'),
    });

    const stubbed = await callNewOperation(1);
    expect(stubbed.answer).toEqual({
      status: 501,
      mock: null,
      body: { code: 'not_implemented', message: expect.stringContaining('listCategoryPets'), status: 501 },
    });
    expect(stubbed.log).toMatch(/"operations":\["listCategoryPets"\].*operations not implemented yet/);

    // 3: the mock answers the stub's operation from the spec, behind the real checks; never in production.
    const mocked = await callNewOperation(1, { MOCK_UNIMPLEMENTED: 'true' });
    expect(mocked.answer).toEqual({ status: 200, mock: 'example', body: [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }] });
    expect(mocked.anonymous).toMatchObject({ status: 401, mock: null, body: { code: 'unauthorized' } });
    expect(mocked.badLimit).toMatchObject({ status: 400, mock: null, body: { code: 'validation_failed' } });
    expect(mocked.preferred404).toEqual({
      status: 404,
      mock: 'example',
      body: { code: 'not_found', message: expect.any(String), status: 404 },
    });
    expect(mocked.viaPets).toMatchObject({ status: 200, mock: null });
    expect(mocked.log).toMatch(
      /"operations":\["listCategoryPets"\].*MOCK_UNIMPLEMENTED: operations not implemented yet answer from openapi\.yaml/,
    );
    const refused = await runUntilExit(
      { DATABASE_PATH: join(dir, 'refused.db'), MOCK_UNIMPLEMENTED: 'true', NODE_ENV: 'production' },
      20_000,
      dir,
    );
    expect({ code: refused.code, lines: refused.stderr.trim().split('\n') }).toEqual({
      code: 1,
      lines: [expect.stringMatching(/^Invalid configuration: MOCK_UNIMPLEMENTED=true: must not be on when NODE_ENV=production/)],
    });

    // 4: the handler in place of the stub; generate check names the stub's import left, generate drops it.
    const file = join(dir, 'handlers/categories.ts');
    writeFileSync(file, readFileSync(file, 'utf8').replace(stub, handler));
    expect(await run('npm', 'run', 'generate:check')).toEqual({
      code: 1,
      out: expect.stringContaining("A stub's import left: handlers/categories.ts still import notImplemented"),
    });
    expect(loop).toContain('Then **`npm run generate`** once more');
    expect(await run('npm', 'run', 'generate')).toEqual({
      code: 0,
      out: expect.stringContaining('Dropped the notImplemented import no stub uses any more from handlers/categories.ts'),
    });
    expect(readFileSync(file, 'utf8')).not.toContain('notImplemented');
    expect(await run('npm', 'run', 'generate:check')).toMatchObject({ code: 0 });
    expect(await run(process.execPath, join(repoRoot, 'node_modules/eslint/bin/eslint.js'), 'handlers/categories.ts')).toEqual({
      code: 0,
      out: '',
    });
    expect(await run(process.execPath, join(repoRoot, 'node_modules/typescript/bin/tsc'), '--noEmit')).toEqual({ code: 0, out: '' });

    const { answer, viaPets, missing } = await callNewOperation(1, { MOCK_UNIMPLEMENTED: 'true' });
    expect({ status: answer.status, mock: answer.mock }).toEqual({ status: 200, mock: null });
    expect(answer.body).toEqual(viaPets.body);
    expect((answer.body as unknown[]).length).toBeGreaterThan(0);
    expect(missing).toMatchObject({ status: 404, body: { code: 'not_found' } });

    // 6: the contract suite on the copy: the new operation, below an item path, is exercised,
    // its documented 404 included, with no word about it in the suite.
    const report = join(dir, 'contract.json');
    const suite = await run('npm', 'run', '--silent', 'test:contract', '--', '--seed', '5', '--runs', '1', '--json', report);
    expect({ code: suite.code, last: suite.out.trim().split('\n').pop() }).toEqual({
      code: 0,
      last: expect.stringMatching(/^\d+ passed, 0 failed$/),
    });
    const { coverage } = JSON.parse(readFileSync(report, 'utf8')) as { coverage: Array<{ opId: string; status: string; seen: number }> };
    expect(coverage.filter((r) => r.opId === 'listCategoryPets' && ['200', '404'].includes(r.status))).toEqual([
      expect.objectContaining({ status: '200', seen: expect.any(Number) }),
      expect.objectContaining({ status: '404', seen: expect.any(Number) }),
    ]);
    expect(coverage.filter((r) => r.opId === 'listCategoryPets' && ['200', '404'].includes(r.status) && r.seen === 0)).toEqual([]);

    // 7-8: the doc's commands as written, against main (the copy's history, as a clone has it).
    const asWritten = (name: string) => {
      const found = new RegExp(`\`(npm run ${name} -- --base [^\`]+)\``).exec(loop)?.[1];
      expect(found).toBe(`npm run ${name} -- --base main`);
      const [npm = '', verb = '', ...rest] = found!.split(' ');
      return run(npm, verb, '--silent', ...rest);
    };
    expect(await asWritten('spec:breaking')).toMatchObject({ code: 0 });
    const changelog = await asWritten('spec:changelog');
    expect(changelog).toEqual({ code: 0, out: expect.stringContaining('No breaking changes') });
    expect(changelog.out).toContain(
      '## Added operations\n\n- `GET /categories/{categoryId}/pets` (`listCategoryPets`): List the pets of a category\n',
    );
    // The release recipe ("Publishing the changelog"), all but its upload, once the copy has a release tag.
    const recipe = blocks(section('Publishing the changelog'), 'sh')[0] ?? '';
    const [describe = '', write = '', upload = ''] = recipe.trim().split('\n');
    expect(upload).toMatch(/^gh release create /);
    const script = `set -euo pipefail\n${describe}\n${write}`;
    expect(await run('bash', '-c', script)).toEqual({ code: expect.any(Number), out: expect.stringContaining('No names found') });
    expect(await run('git', 'tag', 'v1.0.0')).toMatchObject({ code: 0 });
    expect(await run('bash', '-c', script)).toMatchObject({ code: 0 });
    expect(readFileSync(join(dir, 'CHANGELOG-api.md'), 'utf8')).toContain('## Added operations');

    // The operation removed again: its handler is named as left behind.
    const grown = readFileSync(join(dir, 'openapi.yaml'), 'utf8');
    writeFileSync(join(dir, 'openapi.yaml'), grown.replace(operation, ''));
    expect(await run('npm', 'run', 'generate')).toEqual({
      code: 1,
      out: expect.stringContaining(
        'handlers/categories.ts: listCategoryPets has no operation in openapi.yaml any more; delete the handler',
      ),
    });
  });
});
