// Start-up on a database that does not answer yet (PostgreSQL still starting, or started
// after the service): migrations are tried again with a growing pause, one log line per
// attempt, for DATABASE_STARTUP_TIMEOUT_S; then start-up fails with a message saying so.
// Any other failure (a wrong password, a missing database, a bad migration) fails at once.
import { prepareStorage, type ServiceOptions } from '../db/open';
import { StorageUnavailable } from '../domain/errors';
import type { Config } from './config';
import type { Logger } from './log';

export class StartupError extends Error {}

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
      if (!(error instanceof StorageUnavailable) || !config.databaseUrl) throw error;
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
