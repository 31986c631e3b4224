// A throwaway PostgreSQL server of the fault tests' own, made the way
// scripts/with-postgres.sh makes one (Debian's binaries, a temp data directory owned by
// an unprivileged user when run as root, a free port on 127.0.0.1), so that a test can
// stop it and start it again under a running service. No binaries: the test fails.
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { createPgStorage, migratePg, openPgDatabase } from '../../db/pg/storage';
import { createStore } from '../../domain/store';
import { createPasswordHashing } from '../../server/security/passwords';
import { registerAccount } from '../../handlers/accounts';
import { adminEmail, password } from '../write-load';

const run = promisify(execFile);

function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const dirs = existsSync(root)
    ? readdirSync(root)
        .map((v) => join(root, v, 'bin'))
        .filter((d) => existsSync(join(d, 'initdb')))
    : [];
  const bin = dirs.sort().at(-1);
  if (!bin)
    throw new Error(
      `no PostgreSQL server binaries under ${root}/*/bin (apt-get install postgresql, or run under scripts/with-postgres.sh once)`,
    );
  return bin;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });

export interface ThrowawayPostgres {
  /** postgres://petstore@127.0.0.1:PORT/postgres */
  url: string;
  /** The URL of a new, empty database on it. */
  createDatabase(name: string): Promise<string>;
  /** `pg_ctl stop -m fast`: every connection is terminated (57P01), then the server exits. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP to the server and every process of it: it holds every connection and answers nothing. */
  hang(): Promise<void>;
  /** SIGCONT to the processes hang() stopped. */
  resume(): void;
  /** Stops it for good and removes its files. */
  remove(): Promise<void>;
}

/** `password`: the server asks for it (scram-sha-256) instead of trusting every local connection. */
export async function startPostgres({ password }: { password?: string } = {}): Promise<ThrowawayPostgres> {
  const bin = postgresBin();
  const root = userInfo().uid === 0;
  // As root, the server runs as `nobody` (it refuses to run as root).
  const as = (command: string, args: string[]) =>
    root ? run('runuser', ['-u', 'nobody', '--', join(bin, command), ...args]) : run(join(bin, command), args);
  const dir = mkdtempSync(join(tmpdir(), 'petstore-faults-pg-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  mkdirSync(data);
  if (root) chownSync(data, 65534, 65534);
  const port = await freePort();
  const auth = ['--auth=trust'];
  if (password !== undefined) {
    const file = join(dir, 'password');
    writeFileSync(file, `${password}\n`, { mode: 0o644 });
    auth.splice(0, 1, '--auth=scram-sha-256', `--pwfile=${file}`);
  }
  await as('initdb', ['-D', data, '-U', 'petstore', ...auth, '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = async () => {
    await as('pg_ctl', ['-D', data, '-l', join(data, 'server.log'), '-w', '-o', options, 'start']);
  };
  const stop = async () => {
    await as('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  };
  await start();
  const user = password === undefined ? 'petstore' : `petstore:${encodeURIComponent(password)}`;
  const url = `postgres://${user}@127.0.0.1:${port}/postgres`;
  let stopped: number[] = [];
  const resume = () => {
    for (const pid of stopped) process.kill(pid, 'SIGCONT');
    stopped = [];
  };
  return {
    url,
    async hang() {
      // The first line of postmaster.pid is the server's pid; its children are the backends.
      const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(postmaster, 'SIGSTOP');
      const { stdout } = await run('pgrep', ['-P', String(postmaster)]);
      const children = stdout.split('\n').filter(Boolean).map(Number);
      for (const pid of children) process.kill(pid, 'SIGSTOP');
      stopped = [postmaster, ...children];
    },
    resume,
    async createDatabase(name) {
      const client = new Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`create database ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${user}@127.0.0.1:${port}/${name}`;
    },
    stop,
    start,
    async remove() {
      resume();
      await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A new database on `pg`, migrated, with the load helpers' admin account (tests/write-load.ts) in it. */
export async function createAdminDatabase(pg: ThrowawayPostgres, name: string): Promise<string> {
  const url = await pg.createDatabase(name);
  const db = openPgDatabase(url, 2);
  await migratePg(db);
  const storage = createPgStorage(db);
  try {
    await registerAccount(
      { repos: createStore(storage), passwords: createPasswordHashing({ concurrency: 1, queue: 0 }) },
      { email: adminEmail, password, role: 'admin' },
    );
  } finally {
    await storage.close();
  }
  return url;
}
