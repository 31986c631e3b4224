// The spec lint's own rule (.spectral.yaml, petstore-shared-answers): an operation that
// leaves out an answer or a header every operation shares is refused, by name, so that
// the contract stays whole when an operation is added. Spectral itself, on a copy of
// openapi.yaml with three things taken out.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { repoRoot } from '../scripts/server-process';

jest.setTimeout(120_000);

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>> };

async function lint(doc: unknown): Promise<{ code: number; problems: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-spec-lint-'));
  try {
    const file = join(dir, 'openapi.yaml');
    writeFileSync(file, stringify(doc));
    const spectral = join(repoRoot, 'node_modules/@stoplight/spectral-cli/dist/index.js');
    const args = [spectral, 'lint', file, '--ruleset', join(repoRoot, '.spectral.yaml'), '--fail-severity', 'warn', '--quiet'];
    const { code, stdout } = await promisify(execFile)(process.execPath, args, { cwd: repoRoot }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    return { code, problems: stdout.split('\n').filter((line) => line.includes('petstore-shared-answers')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the spec lint, petstore-shared-answers', () => {
  it('passes openapi.yaml as it is', async () => {
    expect(await lint(parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')))).toEqual({ code: 0, problems: [] });
  });

  it('refuses an operation without a shared answer, an answer without a shared header, an authenticated one without Cache-Control', async () => {
    const doc = parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')) as Doc;
    const listPets = doc.paths['/pets']!.get!;
    delete listPets.responses['503'];
    delete listPets.responses['408'];
    listPets.responses['200']!.headers = { ...listPets.responses['200']!.headers, 'X-Content-Type-Options': undefined };
    delete listPets.responses['200']!.headers['X-Content-Type-Options'];
    delete doc.paths['/categories/{categoryId}']!.get!.responses['200']!.headers!['Cache-Control'];
    // Sign-up takes no credentials: no Cache-Control is asked of it.
    expect(doc.paths['/accounts']!.post!.responses['201']!.headers).not.toHaveProperty('Cache-Control');

    const { code, problems } = await lint(doc);
    expect(code).toBe(1);
    expect(problems).toEqual([
      expect.stringMatching(
        /petstore-shared-answers +declares no 408, 503: every operation answers 400, 408, 413, 431, 500, 503 .*paths\.\/pets\.get\.responses$/,
      ),
      expect.stringMatching(
        /petstore-shared-answers +its 200 answer declares no X-Content-Type-Options: the service sends it on every response .*paths\.\/pets\.get\.responses\[200\]$/,
      ),
      expect.stringMatching(
        /petstore-shared-answers +its 200 answer declares no Cache-Control: the service sends it on every authenticated response .*paths\.\/categories\/\{categoryId\}\.get\.responses\[200\]$/,
      ),
    ]);
  });
});
