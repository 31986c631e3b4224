// The default target: this project's own server, started as a child process on
// 127.0.0.1 with a fresh database file, and stopped with SIGTERM at the end.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';

const root = join(__dirname, '..');

export interface LocalService {
  baseUrl: string;
  databasePath: string;
  /** What the server printed (only LOG_LEVEL=error lines), for when it fails. */
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

function healthy(baseUrl: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(`${baseUrl}/healthz`, { timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

export async function startService(env: Record<string, string>): Promise<LocalService> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-contract-'));
  const databasePath = join(dir, 'petstore.db');
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  let output = '';
  // What `npm start` runs: one node process, so SIGTERM reaches the service itself.
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_PATH: databasePath,
      SEED_DEMO_DATA: 'false',
      LOG_LEVEL: 'error',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 60_000;
  while (!(await healthy(baseUrl))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`The service did not start on ${baseUrl}:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  return { baseUrl, databasePath, output: () => output, stop };
}

/**
 * Makes an admin the only way the project allows: `npm run account:create -- --admin`.
 * `--option=value`, so that a random password starting with "-" is not read as an option.
 */
export function createAdmin(databasePath: string, email: string, password: string): void {
  const result = spawnSync('npm', ['run', '--silent', 'account:create', '--', `--email=${email}`, `--password=${password}`, '--admin'], {
    cwd: root,
    env: { ...process.env, DATABASE_PATH: databasePath, LOG_LEVEL: 'error' },
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`npm run account:create failed:\n${result.stdout}${result.stderr}`);
}
