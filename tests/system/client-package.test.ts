// The typed client as a package (client/package.json): packed, installed from the tarball
// into a CommonJS project and into a `nodenext` ES module project, compiled there by strict
// tsc, and run against a real server. The page in Chromium is tests/browser/client.browser.ts.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot, startServer, type ServerProcess } from '../../scripts/server-process';
import { compile, consumerProject, nodeMainSource, packClient, roundSource, strictOptions } from '../client-consumer';

jest.setTimeout(300_000);

const clientPkg = JSON.parse(readFileSync(join(repoRoot, 'client', 'package.json'), 'utf8'));
const rootPkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const spec = parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')) as { info: { version: string } };

const password = 'pässwörd für Hunde 🐕';

describe('@petstore/client, packed', () => {
  let dir: string;
  let tarball: string;
  let files: string[];
  let server: ServerProcess;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-client-pkg-'));
    ({ tarball, files } = packClient(dir));
    server = await startServer({ DATABASE_PATH: join(dir, 'petstore.db') });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is versioned with info.version and depends on the openapi-fetch the service is tested with', () => {
    expect(clientPkg.version).toBe(spec.info.version);
    expect(clientPkg.dependencies).toEqual({ 'openapi-fetch': rootPkg.devDependencies['openapi-fetch'] });
  });

  it('packs both module formats with their declarations, and nothing else of the repository', () => {
    expect(files).toEqual([
      'README.md',
      'dist/index.cjs',
      'dist/index.d.cts',
      'dist/index.d.mts',
      'dist/index.mjs',
      'dist/openapi.d.ts',
      'package.json',
    ]);
  });

  it('holds no Node built-in: no require or import of one, no Buffer or process', () => {
    const out = join(dir, 'unpacked');
    mkdirSync(out, { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', out]);
    for (const file of ['index.mjs', 'index.cjs']) {
      const code = readFileSync(join(out, 'package', 'dist', file), 'utf8');
      expect([file, code.match(/\b(require|from)\s*\(?\s*["'][^"']+["']/g)]).toEqual([
        file,
        [file === 'index.mjs' ? 'from "openapi-fetch"' : 'require("openapi-fetch"'],
      ]);
      expect([file, code.match(/\b(Buffer|process|global)\b/g)]).toEqual([file, null]);
    }
  });

  const email = (project: string) => `${project}-${Date.now()}@example.com`;
  const expected = (account: string) => ({
    account,
    role: 'customer',
    keyPrefix: 'ps_live_',
    pets: expect.any(Number),
    petName: expect.any(String),
    refused: 409,
    code: 'insufficient_stock',
    requestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    rateLimit: expect.stringContaining('"address"'),
  });

  it('compiles in a CommonJS project under strict tsc, from the require types, and runs against the service', () => {
    const project = join(dir, 'cjs');
    consumerProject(project, tarball, {
      'package.json': { name: 'consumer-cjs', private: true, type: 'commonjs' },
      'tsconfig.json': {
        compilerOptions: {
          ...strictOptions,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          types: ['node'],
          typeRoots: [join(repoRoot, 'node_modules', '@types')],
        },
        include: ['src'],
      },
      'src/round.ts': roundSource,
      'src/main.ts': nodeMainSource,
    });
    const { output, read } = compile(project);
    expect(output).toBe('');
    expect(read.filter((f) => f.includes('@petstore/client'))).toEqual([
      expect.stringMatching(/dist\/openapi\.d\.ts$/),
      expect.stringMatching(/dist\/index\.d\.cts$/),
    ]);
    expect(readFileSync(join(project, 'out', 'round.js'), 'utf8')).toContain('require("@petstore/client")');
    const account = email('cjs');
    const line = execFileSync(process.execPath, ['out/main.js', server.url, account, password], { cwd: project, encoding: 'utf8' });
    expect(JSON.parse(line)).toEqual(expected(account));
  });

  it('compiles in a nodenext ES module project under strict tsc, from the import types, and runs against the service', () => {
    const project = join(dir, 'esm');
    consumerProject(project, tarball, {
      'package.json': { name: 'consumer-esm', private: true, type: 'module' },
      'tsconfig.json': {
        compilerOptions: {
          ...strictOptions,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          types: ['node'],
          typeRoots: [join(repoRoot, 'node_modules', '@types')],
        },
        include: ['src'],
      },
      'src/round.ts': roundSource,
      'src/main.ts': nodeMainSource,
    });
    const { output, read } = compile(project);
    expect(output).toBe('');
    expect(read.filter((f) => f.includes('@petstore/client'))).toEqual([
      expect.stringMatching(/dist\/openapi\.d\.ts$/),
      expect.stringMatching(/dist\/index\.d\.mts$/),
    ]);
    expect(readFileSync(join(project, 'out', 'round.js'), 'utf8')).toContain("from '@petstore/client'");
    const resolved = execFileSync(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('@petstore/client'))"], {
      cwd: project,
      encoding: 'utf8',
    });
    expect(resolved.trim()).toMatch(/\/node_modules\/@petstore\/client\/dist\/index\.mjs$/);
    const account = email('esm');
    const line = execFileSync(process.execPath, ['out/main.js', server.url, account, password], { cwd: project, encoding: 'utf8' });
    expect(JSON.parse(line)).toEqual(expected(account));
  });

  it('fails to compile a consumer that breaks the types (the checks are real)', () => {
    // Beside the ES module project, resolving the client installed there.
    const project = join(dir, 'esm', 'broken');
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { ...strictOptions, module: 'nodenext', moduleResolution: 'nodenext', types: [] },
        include: ['src'],
      }),
    );
    writeFileSync(
      join(project, 'src', 'round.ts'),
      roundSource.replace('body: { petId: pet.id, quantity: 1000 }', 'body: { petId: String(pet.id), quantity: 1000 }'),
    );
    expect(compile(project).output).toMatch(/src\/round\.ts\(\d+,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/);
  });
});
