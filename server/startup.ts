// Start-up on a database that does not answer yet (PostgreSQL still starting, or started
// after the service): migrations are tried again with a growing pause, one log line per
// attempt, for DATABASE_STARTUP_TIMEOUT_S; then start-up fails with a message saying so.
// Any other failure (a wrong password, a missing database, a bad migration) fails at once.
// What a setting makes unusable (a database file that cannot be made or opened, a
// password PostgreSQL refuses, a port taken) stops start-up with one line naming the
// setting and the reason (StartupError: main prints its message, no stack, and exits 1).
import { createServer, type Server } from 'node:net';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { prepareStorage, type PreparedStorage, type ServiceOptions } from '../db/open';
import { StorageUnavailable } from '../domain/errors';
import { defaultDatabasePath, type Config } from './config';

export class StartupError extends Error {}

/** The URL with its password masked, for a message. */
function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://...';
  }
}

/**
 * The setting that made `error` happen, said in one line, when it is one: the SQLite file
 * (a file-system error, or SQLite refusing to open it) or PostgreSQL refusing the
 * credentials, the database or the role (SQLSTATE classes 28 and 3D, 42501). Undefined
 * for anything else (a bug in a migration keeps its stack).
 */
export function unusableSetting(config: Pick<Config, 'databasePath' | 'databaseUrl'>, error: unknown): StartupError | undefined {
  const { code, message, syscall } = (error ?? {}) as { code?: unknown; message?: unknown; syscall?: unknown };
  if (typeof code !== 'string' || typeof message !== 'string') return undefined;
  if (config.databaseUrl) {
    if (/^(28|3D)/.test(code) || code === '42501')
      return new StartupError(
        `DATABASE_URL=${withoutPassword(config.databaseUrl)}: PostgreSQL refuses it: ${message} (SQLSTATE ${code}); exiting`,
      );
    return undefined;
  }
  if (typeof syscall === 'string' || /^SQLITE_(CANTOPEN|NOTADB|READONLY|PERM|CORRUPT|IOERR|AUTH)/.test(code))
    return new StartupError(
      `DATABASE_PATH=${config.databasePath}: cannot create or open the database file: ${message}${message.includes(code) ? '' : ` (${code})`}; exiting`,
    );
  return undefined;
}

/** Why a listener could not listen, in words. */
const listenReasons: Record<string, string> = {
  EADDRINUSE: 'another process listens there',
  EACCES: 'not permitted (a port below 1024 needs privileges)',
  EADDRNOTAVAIL: 'the address is not one of this machine',
};

/**
 * `server.listen`, failing with one line naming HOST and PORT. `ownSocket`: a cluster worker
 * opens a socket of its own on the port (SO_REUSEPORT), so the kernel spreads the
 * connections among the workers rather than the primary passing each one over.
 */
export function listenOrFail(server: Server, config: Pick<Config, 'host' | 'port'>, backlog?: number, ownSocket = false): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (err: NodeJS.ErrnoException) => {
      const reason = (err.code && listenReasons[err.code]) ?? err.message;
      reject(
        new StartupError(`Cannot serve the API on ${config.host}:${config.port} (HOST, PORT): ${reason} (${err.code ?? 'error'}); exiting`),
      );
    };
    server.once('error', fail);
    server.listen({ port: config.port, host: config.host, backlog, ...(ownSocket && { reusePort: true, exclusive: true }) }, () => {
      server.off('error', fail);
      resolve();
    });
  });
}

/** Whether HOST:PORT can be listened on: the cluster's primary asks before forking, so that N workers do not each fail. */
export async function checkListen(config: Pick<Config, 'host' | 'port'>): Promise<void> {
  const probe = createServer();
  await listenOrFail(probe, config);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

export async function prepareStorageWhenReachable(
  config: Pick<
    Config,
    | 'databasePath'
    | 'databaseUrl'
    | 'databaseMaxSizeMb'
    | 'databasePoolSize'
    | 'databaseTimeoutMs'
    | 'seedDemoData'
    | 'databaseStartupTimeoutMs'
  >,
  log: Logger,
  service?: ServiceOptions,
  sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
): ReturnType<typeof prepareStorage> {
  const deadline = Date.now() + config.databaseStartupTimeoutMs;
  let pauseMs = 250;
  for (let attempt = 1; ; attempt++) {
    try {
      const prepared = await prepareStorage(config, service);
      if (attempt > 1) log.info({ attempt }, 'PostgreSQL answers; starting');
      return prepared;
    } catch (error) {
      if (!(error instanceof StorageUnavailable) || !config.databaseUrl) throw unusableSetting(config, error) ?? error;
      const left = deadline - Date.now();
      const cause = error.cause as { code?: string; message?: string } | undefined;
      const reason = cause?.code ?? cause?.message ?? error.message;
      if (left <= 0) {
        throw new StartupError(
          `PostgreSQL (DATABASE_URL) did not answer within DATABASE_STARTUP_TIMEOUT_S=${config.databaseStartupTimeoutMs / 1000} s (${attempt} attempts, last: ${reason}); exiting`,
          { cause: error.cause },
        );
      }
      pauseMs = Math.min(pauseMs, left);
      log.warn(
        { attempt, reason, retryInMs: pauseMs, giveUpInMs: left },
        `PostgreSQL does not answer (${reason}); trying again in ${pauseMs} ms`,
      );
      await sleep(pauseMs);
      pauseMs = Math.min(pauseMs * 2, 5_000);
    }
  }
}

/**
 * The one line a start that made a new database writes: where it is, so that a DATABASE_PATH
 * with a typo is seen at once rather than as an empty store. A folder made for it, other
 * than the default ./data, is a warning (docs/configuration.md, DATABASE_PATH).
 */
export function reportNewDatabase(log: Logger, { created, seeded }: Pick<PreparedStorage, 'created' | 'seeded'>): void {
  if (!created) return;
  const demo = seeded ? `, with the demo catalogue (${seeded.categories} categories, ${seeded.pets} pets)` : '';
  if (created.madeFolder && created.madeFolder !== resolve(dirname(defaultDatabasePath))) {
    log.warn(
      { database: created.where, seeded },
      `New database ${created.where}${demo}, in a folder that did not exist and was made now (${created.madeFolder}): if DATABASE_PATH has a typo, stop, fix it and delete that folder`,
    );
  } else {
    log.info({ database: created.where, seeded }, `New database ${created.where}${demo}`);
  }
}
