// `npm run spec:changelog` (scripts/spec-changelog.ts): what changed in openapi.yaml since a
// git ref, for consumers, each change marked breaking by spec:breaking's own findings.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { changelog, markdown, type Change, type Changelog } from '../scripts/spec-changelog';
import { breakingChanges } from '../scripts/spec-breaking';
import { repoRoot } from '../scripts/server-process';
import { runScript } from './run-script';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the cases reach into arbitrary depths of openapi.yaml
type Doc = Record<string, any>;
const spec = (): Doc => parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8'));

/** The next version: an operation added, one deprecated, a response field added, a request field removed. */
function nextVersion(): Doc {
  const d = spec();
  d.info.version = '1.1.0';
  d.paths['/categories/{categoryId}/pets'] = {
    parameters: [{ $ref: '#/components/parameters/CategoryId' }],
    get: {
      operationId: 'listCategoryPets',
      tags: ['categories'],
      summary: 'List the pets of a category',
      responses: {
        '200': { description: 'The pets.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Pets' } } } },
      },
    },
  };
  Object.assign(d.paths['/categories'].get, { deprecated: true, 'x-deprecated-sunset': '2028-01-31', 'x-successor': '/categories?all' });
  d.components.schemas.Category.properties.legs = { type: 'integer', format: 'int32', minimum: 0 };
  delete d.components.schemas.NewCategory.properties.description;
  return d;
}

jest.setTimeout(120_000);

const find = (log: Changelog, match: Partial<Change>) =>
  log.changes.filter((c) => Object.entries(match).every(([k, v]) => c[k as keyof Change] === v));

describe('changelog', () => {
  let log: Changelog;
  beforeAll(async () => {
    log = await changelog(spec(), nextVersion(), { base: 'v1.0.0' });
  });

  it('names the added operation, not breaking', () => {
    expect(find(log, { kind: 'operation added' })).toEqual([
      {
        operation: 'GET /categories/{categoryId}/pets',
        operationId: 'listCategoryPets',
        kind: 'operation added',
        detail: 'List the pets of a category',
        breaking: false,
      },
    ]);
  });

  it('names the deprecation with its sunset and successor, not breaking', () => {
    expect(find(log, { kind: 'operation deprecated' })).toEqual([
      {
        operation: 'GET /categories',
        operationId: 'listCategories',
        kind: 'operation deprecated',
        sunset: '2028-01-31',
        successor: '/categories?all',
        breaking: false,
      },
    ]);
  });

  it('names the response field added in every response that carries it, not breaking', () => {
    const added = find(log, { kind: 'field added' });
    expect(added.map((c) => [c.operation, c.status, c.field, c.detail, c.breaking])).toEqual([
      ['GET /categories', '200', '[].legs', 'integer (int32), optional', false],
      ['POST /categories', '201', 'legs', 'integer (int32), optional', false],
      ['GET /categories/{categoryId}', '200', 'legs', 'integer (int32), optional', false],
      ['PUT /categories/{categoryId}', '200', 'legs', 'integer (int32), optional', false],
    ]);
  });

  it('names the request field removed as breaking, with the line spec:breaking prints', () => {
    expect(find(log, { kind: 'field removed' })).toEqual([
      expect.objectContaining({
        operation: 'POST /categories',
        in: 'request',
        field: 'description',
        breaking: true,
        because: [
          "POST /categories request body description: cannot remove request property 'description' (unknown properties are refused)",
        ],
      }),
      expect.objectContaining({ operation: 'PUT /categories/{categoryId}', in: 'request', field: 'description', breaking: true }),
    ]);
  });

  it('marks breaking exactly what spec:breaking refuses: each of its lines under one change', async () => {
    const { breaks } = await breakingChanges(spec(), nextVersion());
    expect(breaks.length).toBeGreaterThan(0);
    expect(log.breaking).toBe(true);
    const because = log.changes.flatMap((c) => c.because ?? []);
    expect(because.sort()).toEqual([...breaks].sort());
    expect(log.changes.filter((c) => c.breaking).every((c) => (c.because ?? []).length > 0)).toBe(true);
  });

  it('puts a break of a parameter under that parameter', async () => {
    const fewer = spec();
    const listOrders = fewer.paths['/store/orders'].get;
    listOrders.parameters = listOrders.parameters.filter((p: Doc) => p.name !== 'complete');
    const found = await changelog(spec(), fewer, { base: 'v1.0.0' });
    expect(found.changes).toEqual([
      {
        operation: 'GET /store/orders',
        operationId: 'listOrders',
        in: 'parameter',
        parameter: 'query complete',
        kind: 'parameter removed',
        breaking: true,
        because: [
          "GET /store/orders query parameter complete: cannot remove query parameter 'complete' (unknown query parameters are refused)",
        ],
      },
    ]);
    expect(markdown(found)).toContain('### `GET /store/orders` (`listOrders`)\n\n- **breaking** query parameter `complete` removed\n');
  });

  it('lists a break no entry describes as a change of its own, so none is lost', async () => {
    const narrowed = nextVersion();
    narrowed.components.schemas.NewCategory.properties.name.maxLength = 50;
    const found = await changelog(spec(), narrowed, { base: 'v1.0.0' });
    expect(find(found, { kind: 'changed', operation: 'POST /categories' })).toEqual([
      expect.objectContaining({ in: 'request', field: 'name', detail: 'cannot narrow maxLength from 100 to 50', breaking: true }),
    ]);
  });

  it('reads as Markdown for consumers', () => {
    const text = markdown(log);
    expect(text).toContain('# API changes since v1.0.0\n');
    expect(text).toContain('`openapi.yaml` 1.0.0 at `v1.0.0` -> 1.1.0 now. **2 breaking changes**');
    expect(text).toContain(
      '## Added operations\n\n- `GET /categories/{categoryId}/pets` (`listCategoryPets`): List the pets of a category\n',
    );
    expect(text).toContain(
      '## Deprecated operations\n\n- `GET /categories` (`listCategories`): works until its sunset, 2028-01-31; use `/categories?all`\n',
    );
    expect(text).toContain('### `POST /categories` (`createCategory`)\n\n- **breaking** request body field `description` removed\n');
    expect(text).toContain('- response 201 field `legs` added: integer (int32), optional\n');
  });

  it('says when nothing changed', async () => {
    const same = await changelog(spec(), spec(), { base: 'HEAD' });
    expect(same).toEqual({ base: 'HEAD', from: '1.0.0', to: '1.0.0', breaking: false, changes: [] });
    expect(markdown(same)).toContain('No breaking changes');
    expect(markdown(same)).toContain('No operation changed.');
  });
});

describe('npm run spec:changelog -- --base REF', () => {
  let dir: string;
  const git = (...args: string[]) =>
    promisify(execFile)('git', ['-c', 'user.email=ci@example.com', '-c', 'user.name=ci', ...args], { cwd: dir });
  const run = (script: string, ...args: string[]) => runScript(dir, script, ...args);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-changelog-'));
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, 'openapi.yaml'), stringify(spec()));
    await git('init', '-q');
    await git('add', 'openapi.yaml');
    await git('commit', '-q', '-m', 'v1.0.0');
    await git('tag', 'v1.0.0');
    writeFileSync(join(dir, 'openapi.yaml'), stringify(nextVersion()));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints Markdown by default and JSON with --format json, breaking where spec:breaking fails', async () => {
    const [md, json, gate] = await Promise.all([
      run('spec-changelog.ts', '--base', 'v1.0.0'),
      run('spec-changelog.ts', '--base', 'v1.0.0', '--format', 'json'),
      run('spec-breaking.ts', '--base', 'v1.0.0'),
    ]);
    expect({ code: md.code, stderr: md.stderr }).toEqual({ code: 0, stderr: '' });
    expect(md.stdout).toContain('## Added operations\n\n- `GET /categories/{categoryId}/pets` (`listCategoryPets`)');
    expect(md.stdout).toContain('- **breaking** request body field `description` removed');

    const log = JSON.parse(json.stdout) as Changelog;
    expect({ code: json.code, base: log.base, from: log.from, to: log.to, breaking: log.breaking }).toEqual({
      code: 0,
      base: 'v1.0.0',
      from: '1.0.0',
      to: '1.1.0',
      breaking: true,
    });
    expect(log.changes.filter((c) => c.breaking).map((c) => `${c.operation} ${c.kind} ${c.field ?? ''}`)).toEqual([
      'POST /categories field removed description',
      'PUT /categories/{categoryId} field removed description',
    ]);
    // spec:breaking refuses the same change, naming the same lines.
    expect(gate.code).toBe(1);
    for (const line of log.changes.flatMap((c) => c.because ?? [])) expect(gate.stderr).toContain(line);
  });

  it('refuses a ref it cannot read, and a format it does not know', async () => {
    const missing = await run('spec-changelog.ts', '--base', 'v9.9.9');
    expect({ code: missing.code, stderr: missing.stderr }).toEqual({
      code: 2,
      stderr: expect.stringContaining('Cannot read openapi.yaml at v9.9.9'),
    });
    // And says what refs there are to name instead.
    const branch = (await git('branch', '--show-current')).stdout.trim();
    expect(missing.stderr).toContain(
      `v9.9.9 is no tag, branch or commit here. Tags: v1.0.0. Branches: ${branch}. The last commit is HEAD, the one before it HEAD~1.\n`,
    );
    const format = await run('spec-changelog.ts', '--base', 'v1.0.0', '--format', 'html');
    expect({ code: format.code, stderr: format.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('--format is markdown') });
  });
});
