// The default target: this project's own server, started as a child process on
// 127.0.0.1 with a fresh database file, and stopped with SIGTERM at the end.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from './server-process';

const root = join(__dirname, '..');

export interface LocalService {
  baseUrl: string;
  databasePath: string;
  /** What the server logged, for when it fails. */
  output(): string;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts the project's server on a fresh database file through the launcher the jest
 * tests use (tests/server-process.ts: `npm start`'s one node process, PORT=0).
 */
export async function startService(env: Record<string, string>): Promise<LocalService> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-contract-'));
  const databasePath = join(dir, 'petstore.db');
  try {
    const server = await startServer({ DATABASE_PATH: databasePath, SEED_DEMO_DATA: 'false', ...env }, 60_000);
    const stop = async () => {
      try {
        if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    return { baseUrl: server.url, databasePath, output: () => server.log(), stop };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Makes an admin the only way the project allows: `npm run account:create -- --admin`'s
 * script, run by this Node as npm runs it (through tsx; the `npm` command itself is
 * npm.cmd on Windows, which spawnSync cannot start without a shell), the password on its
 * stdin, never in the process list.
 */
export function createAdmin(databasePath: string, email: string, password: string): void {
  const args = ['--import', 'tsx', 'scripts/account-create.ts', `--email=${email}`, '--admin'];
  const result = spawnSync(process.execPath, args, {
    cwd: root,
    env: { ...process.env, DATABASE_PATH: databasePath, LOG_LEVEL: 'error' },
    input: `${password}\n`,
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`account:create failed:\n${result.stdout}${result.stderr}`);
}
