// JSON lines on stderr: enough for a demo service, and greppable by request id.
import type { Config } from './config';

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const rank = { debug: 0, info: 1, error: 2, silent: 3 } as const;

export function createLogger(level: Config['logLevel']): Logger {
  const write = (lvl: 'debug' | 'info' | 'error', message: string, fields?: Record<string, unknown>) => {
    if (rank[lvl] < rank[level]) return;
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: lvl, message, ...fields }) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    error: (m, f) => write('error', m, f),
  };
}
