// PostgreSQL going away is an outage, not a crash. The pool and each of its clients have
// an 'error' listener (node-postgres emits 'error' when the server drops a connection, and
// an unheard one ends the process); errors that mean "the server does not answer" become
// StorageUnavailable ('unavailable', 503 with Retry-After); and once a probe of our own
// finds the server unreachable, every call is refused at once until a probe reaches it
// again, rather than each request waiting for a connection of its own to fail.
import { Client, Pool } from 'pg';
import { StorageUnavailable } from '../../domain/errors';

/** How long a client is asked to wait before retrying while PostgreSQL is unreachable. */
export const retryAfterSeconds = 5;
/** A connection (or a free slot in the pool) not had within this is a failure. */
export const connectTimeoutMs = 2_000;
/** How often an unreachable server is tried again. */
const probeEveryMs = 500;

const connectionCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// node-postgres and pg-pool say these in words, without a code.
const connectionMessages =
  /^(Connection terminated|timeout expired|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed)/;

/**
 * Whether `error` (or what it wraps: drizzle wraps the driver's error as its cause) means
 * the server cannot be reached or dropped the connection: a socket error, SQLSTATE class 08
 * (connection exception), 57P01-57P03 (shut down, crashed, not accepting connections yet),
 * or a connection not had in time.
 */
export function isConnectionError(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && (connectionCodes.has(code) || code.startsWith('08') || /^57P0[123]$/.test(code))) return true;
    if (typeof message === 'string' && connectionMessages.test(message)) return true;
  }
  return false;
}

export const unreachable = (cause: unknown) =>
  new StorageUnavailable('unavailable', 'The database is not reachable; try again later', retryAfterSeconds, { cause });

/** A connection-class error as StorageUnavailable; any other error as it is. */
export const asUnavailable = (error: unknown): unknown =>
  isConnectionError(error) && !(error instanceof StorageUnavailable) ? unreachable(error) : error;

/**
 * The pool, with a listener for every error it or one of its clients emits, so that none
 * ends the process; the storage adds its own to hear them (createPgStorage).
 */
export function openPool(url: string, max: number): Pool {
  const pool = new Pool({ connectionString: url, max, connectionTimeoutMillis: connectTimeoutMs, keepAlive: true });
  // An idle client the server dropped: the pool has removed it already.
  pool.on('error', ignore);
  // A client checked out (inside a transaction) when the server drops it: its query fails
  // on its own, and it is discarded when released (createPgStorage's transaction).
  pool.on('connect', (client) => client.on('error', ignore));
  return pool;
}

const ignore = () => {};

/** One connection, one `select 1`, with its own timeout: whether the server answers, apart from the pool's load. */
async function probe(url: string): Promise<void> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => {});
  }
}

export interface Availability {
  /** Runs `work`, refused at once while the server is known to be unreachable; connection errors become StorageUnavailable. */
  guard<T>(work: () => Promise<T>): Promise<T>;
  /** A connection-class error seen outside `guard` (the pool's 'error' event). */
  suspect: (error: unknown) => void;
  stop(): void;
}

/**
 * The server's state as this process last saw it. A connection error starts a probe; a
 * probe that fails marks the server down (`onChange(error)`, once per outage) and is
 * repeated every half second; the first that succeeds marks it up again (`onChange(null)`).
 * A connection lost while the server is fine (one backend terminated) fails only the
 * request that held it.
 */
export function createAvailability(url: string, onChange: (error: Error | null) => void): Availability {
  let down: StorageUnavailable | null = null;
  let probing = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const check = async () => {
    timer = undefined;
    if (probing || stopped) return;
    probing = true;
    try {
      await probe(url);
      if (down) {
        down = null;
        onChange(null);
      }
    } catch (error) {
      if (isConnectionError(error) && !stopped) {
        if (!down) {
          down = unreachable(error);
          onChange(down);
        }
        timer = setTimeout(() => void check(), probeEveryMs);
        timer.unref();
      }
    } finally {
      probing = false;
    }
  };

  const suspect = (error: unknown) => {
    if (isConnectionError(error) && !down) void check();
  };

  return {
    async guard(work) {
      if (down) throw down;
      try {
        return await work();
      } catch (error) {
        suspect(error);
        throw asUnavailable(error);
      }
    },
    suspect,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
