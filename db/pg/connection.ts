// PostgreSQL going away is an outage, not a crash. The pool and each of its clients have
// an 'error' listener (node-postgres emits 'error' when the server drops a connection, and
// an unheard one ends the process); errors that mean "the server does not answer" become
// StorageUnavailable ('unavailable', 503 with Retry-After); and once a probe of our own
// finds the server unreachable, every call is refused at once until a probe reaches it
// again, rather than each request waiting for a connection of its own to fail.
import { lookup as resolve, type LookupAddress, type LookupOptions } from 'node:dns';
import { Socket, type LookupFunction } from 'node:net';
import { Client, Pool, type ClientConfig } from 'pg';
import { StorageUnavailable } from '../../domain/errors';
import { defaultDatabaseTimeoutMs } from '../../domain/storage';

/** How long a client is asked to wait before retrying while PostgreSQL is unreachable. */
export const retryAfterSeconds = 5;
/**
 * The client's own limit on a statement comes this long after the server's
 * (statement_timeout), which ends it with an answer and keeps the connection: the
 * client's is for a server that answers nothing at all, and costs the connection.
 */
const clientSlackMs = 1_000;
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

/** SQLSTATE 57014: a statement cancelled, here by statement_timeout (a lock or a query that took too long). */
const isCancelled = (error: unknown): boolean => {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === '57014') return true;
  }
  return false;
};

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
export const asUnavailable = (error: unknown): unknown => {
  if (error instanceof StorageUnavailable) return error;
  if (isConnectionError(error)) return unreachable(error);
  if (isCancelled(error))
    return new StorageUnavailable('unavailable', 'The database did not answer in time; try again later', retryAfterSeconds, {
      cause: error,
    });
  return error;
};

/** How long a new connection waits for its host's address before it takes the last one found. */
const lookupWithinMs = 500;

type Resolve = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (error: Error | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for new connections that remembers each host's last addresses and uses them
 * when a fresh lookup fails or takes longer than `withinMs`; the fresh answer, when it
 * comes, is remembered for the next. A host's lookups are not stacked: one at a time is
 * asked of the resolver. Why: the database's address does not change while its name
 * server is away, and a name server away for seconds (one restarting, or podman 4.3's
 * aardvark-dns reloading as a container stops: docs/deployment.md, "Containers") would
 * otherwise fail every new connection, and the availability probe with them, while the
 * connections already open still work. A host never found is still an error.
 */
export function rememberingLookup(withinMs = lookupWithinMs, resolveAll: Resolve = resolve): LookupFunction {
  const remembered = new Map<string, LookupAddress[]>();
  const asked = new Map<string, Promise<LookupAddress[]>>();
  const fresh = (hostname: string, options: LookupOptions, key: string): Promise<LookupAddress[]> => {
    let answer = asked.get(key);
    if (!answer) {
      answer = new Promise<LookupAddress[]>((done, fail) =>
        resolveAll(hostname, { family: options.family, hints: options.hints, all: true }, (error, addresses) => {
          asked.delete(key);
          if (error) return fail(error);
          remembered.set(key, addresses);
          done(addresses);
        }),
      );
      asked.set(key, answer);
    }
    return answer;
  };
  return (hostname, options, callback) => {
    const key = `${hostname} ${options.family ?? 0}`;
    const give = (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      const [first] = addresses;
      if (options.all) (callback as unknown as (e: NodeJS.ErrnoException | null, a: LookupAddress[]) => void)(error, addresses);
      else callback(error, first?.address ?? '', first?.family);
    };
    const last = remembered.get(key);
    const answer = fresh(hostname, options, key);
    if (!last) {
      answer.then(
        (addresses) => give(null, addresses),
        (error: NodeJS.ErrnoException) => give(error, []),
      );
      return;
    }
    let given = false;
    const once = (addresses: LookupAddress[]) => {
      if (given) return;
      given = true;
      clearTimeout(timer);
      give(null, addresses);
    };
    const timer = setTimeout(() => once(last), withinMs);
    answer.then(once, () => once(last));
  };
}

const lookup = rememberingLookup();

/**
 * A new connection's socket, as node-postgres's own (a plain TCP socket, which it wraps in
 * TLS itself where asked) but for its host's address, found by `lookup` above; a Unix
 * socket's path is connected as it is.
 */
export function connectionSocket(): Socket {
  const socket = new Socket();
  const connect = socket.connect.bind(socket) as (...args: unknown[]) => Socket;
  socket.connect = ((port: number | string, host?: string) =>
    host === undefined ? connect(port) : connect({ port: Number(port), host, lookup })) as Socket['connect'];
  return socket;
}

/**
 * The bounds every connection gets: one had (or a free slot in the pool) within
 * `timeoutMs`; a statement, lock waits included, ended by the server past `timeoutMs`
 * (a startup parameter: a pooler in front must pass it on or ignore it, docs/deployment.md);
 * and by the client a moment later if the server answers nothing.
 */
const bounds = (timeoutMs: number): ClientConfig => ({
  stream: connectionSocket,
  connectionTimeoutMillis: timeoutMs,
  statement_timeout: timeoutMs,
  query_timeout: timeoutMs + clientSlackMs,
});

/**
 * The pool, with a listener for every error it or one of its clients emits, so that none
 * ends the process; the storage adds its own to hear them (createPgStorage).
 */
export function openPool(url: string, max: number, timeoutMs = defaultDatabaseTimeoutMs): Pool {
  // pipeline: a connection sends each query as it is asked for, without waiting for the
  // answers to those before it, so a transaction's statements that do not depend on each
  // other's answers share one round trip (db/pg/storage.ts). One caller holds a connection
  // at a time, as without it.
  const pool = new Pool({ connectionString: url, max, keepAlive: true, pipeline: true, ...bounds(timeoutMs) });
  // An idle client the server dropped: the pool has removed it already.
  pool.on('error', ignore);
  // A client checked out (inside a transaction) when the server drops it: its query fails
  // on its own, and it is discarded when released (createPgStorage's transaction).
  pool.on('connect', (client) => client.on('error', ignore));
  return pool;
}

const ignore = () => {};

/** A connection-class error (ETIMEDOUT): it starts a probe, as a connection that failed does. */
const timedOut = (timeoutMs: number) =>
  Object.assign(new Error(`PostgreSQL did not answer within ${timeoutMs} ms (DATABASE_TIMEOUT_MS)`), { code: 'ETIMEDOUT' });

/** One connection, one `select 1`, with its own timeout: whether the server answers, apart from the pool's load. */
async function probe(url: string, timeoutMs: number): Promise<void> {
  const client = new Client({ connectionString: url, ...bounds(timeoutMs) });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => {});
  }
}

export interface Availability {
  /**
   * Runs `work`, refused at once while the server is known to be unreachable; connection
   * errors become StorageUnavailable, and so does `work` not done within the bound.
   */
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
export function createAvailability(
  url: string,
  onChange: (error: Error | null) => void,
  timeoutMs = defaultDatabaseTimeoutMs,
): Availability {
  let down: StorageUnavailable | null = null;
  let probing = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const check = async () => {
    timer = undefined;
    if (probing || stopped) return;
    probing = true;
    try {
      await probe(url, timeoutMs);
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
      // The whole call, however many waits it holds (a connection, then statements), ends
      // within the bound. Work still under way past it ends by its own timeouts, and its
      // connection is discarded; a COMMIT it still reaches has the unknown outcome of a
      // connection lost during one (docs/decisions.md, "PostgreSQL going away").
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(timedOut(timeoutMs)), timeoutMs);
      });
      try {
        // The race handles work()'s rejection, should it come after the bound.
        return await Promise.race([work(), expired]);
      } catch (error) {
        suspect(error);
        throw asUnavailable(error);
      } finally {
        clearTimeout(timer);
      }
    },
    suspect,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
