// A consumer of the packed client (@petstore/client, client/package.json): `npm pack`, a
// project of its own that installs the tarball, and the code such a consumer writes,
// compiled by strict tsc there. Shared by tests/system/client-package.test.ts (CommonJS and
// `nodenext` ES module projects) and tests/browser/client.browser.ts (a page in Chromium).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../scripts/server-process';

export const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');

/** `npm pack` of client/ (its prepack builds it) into `dir`; the tarball's path and the files it holds. */
export function packClient(dir: string): { tarball: string; files: string[] } {
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: join(repoRoot, 'client'), encoding: 'utf8' }),
  ) as Array<{ filename: string; files: Array<{ path: string }> }>;
  if (!packed) throw new Error('npm pack wrote no tarball');
  return { tarball: join(dir, packed.filename), files: packed.files.map((f) => f.path).sort() };
}

/** A project in `dir` with these files, the tarball installed as a consumer installs it. */
export function consumerProject(dir: string, tarball: string, files: Record<string, string | object>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), typeof text === 'string' ? text : JSON.stringify(text, null, 2));
  }
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: dir, encoding: 'utf8' });
}

/** Strict tsc on a consumer project; its output (empty when it compiles) and the declaration files it read. */
export function compile(dir: string): { output: string; read: string[] } {
  try {
    const listed = execFileSync(process.execPath, [tsc, '-p', dir, '--listFiles'], { cwd: dir, encoding: 'utf8' });
    return { output: '', read: listed.trim().split('\n') };
  } catch (error) {
    const { stdout } = error as { stdout?: string };
    return { output: stdout ?? String(error), read: [] };
  }
}

/** The compiler options every consumer project starts from: strict, nothing skipped. */
export const strictOptions = {
  target: 'ES2022',
  strict: true,
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  skipLibCheck: false,
  outDir: 'out',
  rootDir: 'src',
};

/**
 * What a consumer writes: sign up, a key over HTTP Basic (a password beyond ASCII, so the
 * UTF-8 of basicAuth counts), a page of pets, an order past the stock refused with a typed
 * code, and the response headers a cross-origin page may read. `typeChecks` is never
 * called: it holds what the compiler must refuse, so types that collapsed to `any` fail it.
 */
export const roundSource = `import { basicAuth, createPetStoreClient, type ApiError, type PetStoreClient, type Schemas } from '@petstore/client';

export interface Round {
  account: string;
  role: string;
  keyPrefix: string;
  pets: number;
  petName: string;
  refused: number;
  code: ApiError['code'] | undefined;
  requestId: string | null;
  rateLimit: string | null;
}

export async function round(baseUrl: string, email: string, password: string): Promise<Round> {
  const open = createPetStoreClient(baseUrl);
  const signUp = await open.POST('/accounts', { body: { email, password } });
  if (signUp.error) throw new Error(\`sign-up: \${signUp.response.status} \${signUp.error.code}\`);
  const created = await open.POST('/api-keys', { headers: { Authorization: basicAuth(email, password) }, body: { name: 'consumer' } });
  if (created.error) throw new Error(\`key: \${created.response.status} \${created.error.code}\`);

  const client = createPetStoreClient(baseUrl, { apiKey: created.data.key });
  const pets = await client.GET('/pets', { params: { query: { status: 'available', limit: 5 } } });
  if (pets.error) throw new Error(\`pets: \${pets.error.code}\`);
  const pet: Schemas['Pet'] | undefined = pets.data[0];
  if (!pet) throw new Error('no available pet');

  const tooMany = await client.POST('/store/orders', { body: { petId: pet.id, quantity: 1000 } });
  return {
    account: signUp.data.email,
    role: signUp.data.role,
    keyPrefix: created.data.prefix,
    pets: pets.data.length,
    petName: pet.name,
    refused: tooMany.response.status,
    code: tooMany.error?.code,
    requestId: tooMany.response.headers.get('X-Request-Id'),
    rateLimit: tooMany.response.headers.get('RateLimit'),
  };
}

export function typeChecks(client: PetStoreClient): void {
  // @ts-expect-error: not a path of the service
  void client.GET('/nowhere');
  // @ts-expect-error: an order needs its petId
  void client.POST('/store/orders', { body: { quantity: 1 } });
  // @ts-expect-error: an order's id is a number
  void client.GET('/store/orders/{orderId}', { params: { path: { orderId: 'one' } } });
  // @ts-expect-error: not a code of the service
  const code: ApiError['code'] = 'no_such_code';
  void code;
}
`;

/** A Node program around the round: its answer as one JSON line on stdout. */
export const nodeMainSource = `import { round } from './round.js';

const [baseUrl = '', email = '', password = ''] = process.argv.slice(2);
round(baseUrl, email, password).then(
  (result) => console.log(JSON.stringify(result)),
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
`;

/** A page's script around the round: its answer (or its failure) in #result, from the query string. */
export const pageMainSource = `import { round } from './round.js';

const out = document.getElementById('result');
const query = new URLSearchParams(location.search);
if (out) {
  round(query.get('api') ?? '', query.get('email') ?? '', query.get('password') ?? '').then(
    (result) => {
      out.textContent = JSON.stringify(result);
      out.dataset['state'] = 'done';
    },
    (error: unknown) => {
      out.textContent = error instanceof Error ? error.message : String(error);
      out.dataset['state'] = 'failed';
    },
  );
}
`;
