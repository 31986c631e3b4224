// docs/contract.md's "Changing the contract" loop, run on a copy of the project: add the
// README's operation to openapi.yaml, generate, see the stub's 501 from a real server,
// fill the stub with the README's handler, see the 200, and the contract suite passes on
// the copy, the new operation's documented 404 exercised.
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot, startServer } from '../../scripts/server-process';

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

  /** A fresh server on the copy, built as `npm start` builds it: a customer's GET of the new operation, and the same pets through GET /pets. */
  async function callNewOperation(categoryId: number) {
    expect(await run('npm', 'run', '--silent', 'build')).toMatchObject({ code: 0 });
    const server = await startServer({ DATABASE_PATH: join(dir, `petstore-${Date.now()}.db`) }, 60_000, dir);
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
      const get = async (path: string) => {
        const res = await fetch(`${server.url}${path}`, { headers: { Authorization: `Bearer ${key}` } });
        const body: unknown = await res.json();
        return { status: res.status, body };
      };
      return {
        answer: await get(`/categories/${categoryId}/pets`),
        viaPets: await get(`/pets?categoryId=${categoryId}`),
        missing: await get('/categories/987654/pets'),
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
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the operation, the stub and the handler to follow', () => {
    expect(operation).toContain('operationId: listCategoryPets');
    expect(stub).toContain("listCategoryPets: notImplemented('listCategoryPets'),");
    expect(handler).toContain('listCategoryPets(');
  });

  // One story, in order, on the same copy: each step needs the one before.
  it('adds the operation, answers 501 from the stub, 200 once filled, and names the handler left when it is removed', async () => {
    const spec = readFileSync(join(dir, 'openapi.yaml'), 'utf8');
    writeFileSync(join(dir, 'openapi.yaml'), spec.replace('\npaths:\n', `\npaths:\n${operation}`));

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
      body: { code: 'not_implemented', message: expect.stringContaining('listCategoryPets'), status: 501 },
    });
    expect(stubbed.log).toMatch(/"operations":\["listCategoryPets"\].*operations not implemented yet/);

    // 3: the handler in place of the stub.
    const file = join(dir, 'handlers/categories.ts');
    writeFileSync(file, readFileSync(file, 'utf8').replace(stub, handler));
    expect(await run('npm', 'run', 'generate:check')).toMatchObject({ code: 0 });
    expect(await run(process.execPath, join(repoRoot, 'node_modules/typescript/bin/tsc'), '--noEmit')).toEqual({ code: 0, out: '' });

    const { answer, viaPets, missing } = await callNewOperation(1);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual(viaPets.body);
    expect((answer.body as unknown[]).length).toBeGreaterThan(0);
    expect(missing).toMatchObject({ status: 404, body: { code: 'not_found' } });

    // 5: the contract suite on the copy: the new operation, below an item path, is exercised,
    // its documented 404 included, with no word about it in the suite.
    const suite = await run('npm', 'run', '--silent', 'test:contract', '--', '--seed', '5', '--runs', '1');
    expect({ code: suite.code, last: suite.out.trim().split('\n').pop() }).toEqual({
      code: 0,
      last: expect.stringMatching(/^\d+ passed, 0 failed$/),
    });
    expect(suite.out).toMatch(/listCategoryPets +GET \/categories\/\{categoryId\}\/pets +404 +exercised \(\d+\)/);
    expect(suite.out).toMatch(/listCategoryPets +GET \/categories\/\{categoryId\}\/pets +200 +exercised \(\d+\)/);

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
