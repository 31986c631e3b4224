// docs/decisions.md, Running it. A setting that cannot work stops start-up at once with one
// line naming it and the reason: exit 1, no stack. The built service, as `npm start` runs
// it. (A PostgreSQL that refuses the password: tests/faults/postgres-startup.test.ts.)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runUntilExit } from '../scripts/server-process';
import { itOnLinux } from './platform';

const dir = mkdtempSync(join(tmpdir(), 'petstore-startup-errors-'));
let taken: Server;
let takenPort: number;

beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  takenPort = (taken.address() as AddressInfo).port;
});
afterAll(() => {
  taken.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Exit 1, quickly, and stderr is one line that names `setting` and matches `reason`; no stack. */
async function expectOneLine(env: Record<string, string>, setting: string, reason: RegExp) {
  const { code, stderr, ms } = await runUntilExit(env, 20_000);
  const lines = stderr.trim().split('\n');
  expect({ code, lines: lines.length }).toEqual({ code: 1, lines: 1 });
  expect(lines[0]).toContain(setting);
  expect(lines[0]).toMatch(reason);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(ms).toBeLessThan(10_000);
}

describe('start-up fails at once, in one line', () => {
  // Under /proc a folder exists but refuses new entries with ENOENT, where Node's recursive
  // mkdir tries again forever.
  itOnLinux('/proc', 'DATABASE_PATH in a folder that cannot be made (under /proc): no hang', async () => {
    await expectOneLine(
      { DATABASE_PATH: '/proc/nope/x.db' },
      'DATABASE_PATH=/proc/nope/x.db',
      /cannot create or open the database file: ENOENT/,
    );
  });

  itOnLinux('/proc', 'DATABASE_PATH where no file can be made (under /proc)', async () => {
    await expectOneLine({ DATABASE_PATH: '/proc/x.db' }, 'DATABASE_PATH=/proc/x.db', /cannot create or open the database file: ENOENT/);
  });

  it('DATABASE_PATH where no file can be made (inside a file)', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const path = join(file, 'x.db');
    // ENOTDIR on Linux and macOS; Windows says ENOENT.
    await expectOneLine({ DATABASE_PATH: path }, `DATABASE_PATH=${path}`, /cannot create or open the database file: (ENOTDIR|ENOENT)/);
  });

  it('DATABASE_PATH naming a folder', async () => {
    await expectOneLine({ DATABASE_PATH: dir }, `DATABASE_PATH=${dir}`, /EISDIR/);
  });

  it('DATABASE_PATH naming a file that is not a database', async () => {
    const path = join(dir, 'not-a-database.db');
    writeFileSync(path, 'not a database '.repeat(100));
    await expectOneLine({ DATABASE_PATH: path }, `DATABASE_PATH=${path}`, /file is not a database \(SQLITE_NOTADB\)/);
  });

  it.each(['1', '2'])('PORT another process listens on (WEB_CONCURRENCY=%s)', async (workers) => {
    await expectOneLine(
      { DATABASE_PATH: join(dir, `port-${workers}.db`), PORT: String(takenPort), WEB_CONCURRENCY: workers, LOG_LEVEL: 'warn' },
      `127.0.0.1:${takenPort} (HOST, PORT)`,
      /another process listens there \(EADDRINUSE\)/,
    );
  });

  it('MOCK_UNIMPLEMENTED with NODE_ENV=production', async () => {
    await expectOneLine(
      { DATABASE_PATH: join(dir, 'mock.db'), MOCK_UNIMPLEMENTED: 'true', NODE_ENV: 'production' },
      'MOCK_UNIMPLEMENTED',
      /must not be on when NODE_ENV=production/,
    );
  });

  it('HOST that is not an address of this machine', async () => {
    await expectOneLine(
      { DATABASE_PATH: join(dir, 'host.db'), HOST: '192.0.2.1', LOG_LEVEL: 'warn' },
      '192.0.2.1:0 (HOST, PORT)',
      /not one of this machine \(EADDRNOTAVAIL\)/,
    );
  });
});
