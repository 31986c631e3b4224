// docs/layout.md, Source maps. The service as `npm start` runs it (dist/server/main.js, one
// bundle) logs an error whose stack names the TypeScript file and line it came from, not
// a line of the bundle: here SQLite refusing writes past DATABASE_MAX_SIZE_MB, logged once
// at error with the cause's stack.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, startServer, type ServerProcess } from '../scripts/server-process';
import { bigMessage, call, databaseWithAdmin, loadEnv, setUp } from './write-load';

const dir = mkdtempSync(join(tmpdir(), 'petstore-source-maps-'));
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('a logged error names the TypeScript file and line', async () => {
  const path = join(dir, 'petstore.db');
  await databaseWithAdmin(path);
  server = await startServer({ ...loadEnv, DATABASE_PATH: path, DATABASE_MAX_SIZE_MB: '1' });
  const { customerKey } = await setUp(server.url, 1);
  // Messages of 2 KB until the file is full: a few hundred.
  let refused = false;
  const fill = async () => {
    for (let n = 0; n < 2_000 && !refused; n++) {
      const res = await call(server!.url, 'POST', '/messages', { key: customerKey, body: { message: bigMessage } });
      if (res.status === 503) refused = true;
    }
  };
  await Promise.all(Array.from({ length: 4 }, fill));
  expect(refused).toBe(true);

  // The service writes the line before its 503, but this process may read the answers'
  // socket before the pipe of its stderr: the line can arrive just after the last answer.
  const logged = () =>
    server!
      .log()
      .split('\n')
      .find((l) => l.includes('Writes are refused with 503 storage_unavailable'));
  for (let waited = 0; logged() === undefined && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  const line = logged();
  expect(line).toBeDefined();
  const { err } = JSON.parse(line!) as { err: { stack: string } };
  // A frame of ours: an absolute path to a .ts file of the project, a line and a column.
  const frame = new RegExp(`\\((${repoRoot}/[^):]+\\.ts):(\\d+):(\\d+)\\)`).exec(err.stack);
  expect(frame).not.toBeNull();
  const [, file, lineNumber] = frame!;
  expect(existsSync(file!)).toBe(true);
  expect(Number(lineNumber)).toBeLessThanOrEqual(readFileSync(file!, 'utf8').split('\n').length);
  // No frame points into the bundle.
  expect(err.stack).not.toMatch(/dist\/server\/service\.js:\d+/);
  console.log(`a logged stack's frame: ${frame![0]}`);
}, 120_000);
