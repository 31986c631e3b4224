// The point reads every authenticated request makes (the key's owner, a pet), outside any
// transaction, are gathered for a turn of the event loop: once the turn's I/O is handled
// (setImmediate), each statement asked for goes out once, for every key asked of it in the
// turn (`= any($1)`, each key once), and each caller gets the row of its key. A turn's
// statements leave together in one write, on a pooled connection the reads share while any
// of them is under way: each turn's are written behind the others without waiting for
// their answers (the connections are pipelined, db/pg/connection.ts), so a read seldom
// checks a connection out of the pool. Only short reads that take no lock go here: a
// statement that waits would hold up every read written behind it. Why: docs/performance.md,
// "PostgreSQL: an order in one statement".
import type { Client, Pool, PoolClient } from 'pg';
import { isConnectionError } from './connection';

/**
 * Turns of reads on one connection at once, at most: past it a turn's reads take another,
 * so that one server process does not answer every read of a busy instance in turn (the
 * bounds tried: docs/performance.md, "PostgreSQL: an order in one statement").
 */
const turnsPerConnection = 8;

/**
 * A statement that reads rows by key: `$1` is an array of keys, and each row carries its
 * key, as PostgreSQL writes it in text, in column `keyColumn`.
 */
export interface PointStatement {
  name: string;
  text: string;
  keyColumn: number;
}

/** The row of `key` read by `statement` with `rowMode: 'array'` (as `R`), or null when there is none. */
export type PointRead = <R extends unknown[]>(statement: PointStatement, key: string) => Promise<R | null>;

interface Caller {
  resolve(row: unknown[] | null): void;
  reject(error: unknown): void;
}

/** The keys each statement was asked for in one turn, with who asked. */
type Asked = Map<PointStatement, Map<string, Caller[]>>;

interface Lease {
  client: Promise<PoolClient>;
  turns: number;
  /** A connection error seen on it: the connection is discarded when released. */
  failed?: Error;
}

/** A point read on one connection of its own (in a transaction): the statement with one key. */
export function pointReadOn(client: Pick<Client, 'query'>): PointRead {
  return async <R extends unknown[]>(statement: PointStatement, key: string) =>
    (await client.query<R>({ name: statement.name, text: statement.text, values: [[key]], rowMode: 'array' })).rows[0] ?? null;
}

export function createPointReads(pool: Pool): PointRead {
  let shared: Lease | null = null;
  /** Our own checkouts not answered yet, which the pool counts among its waiting. */
  let checkingOut = 0;
  const checkOut = async () => {
    checkingOut++;
    try {
      return await pool.connect();
    } finally {
      checkingOut--;
    }
  };
  let asked: Asked = new Map();

  const send = async (turn: Asked) => {
    // Other work waiting for a connection goes first: reads stop joining this one, so
    // that it is released once they are answered (with a pool of one, to that work).
    if (!shared || shared.turns >= turnsPerConnection || pool.waitingCount > checkingOut) {
      shared = { client: checkOut(), turns: 0 };
    }
    const lease = shared;
    lease.turns++;
    let client: PoolClient;
    try {
      client = await lease.client;
    } catch (error) {
      // Every read waiting for this connection fails with it; the next turn asks again.
      if (shared === lease) shared = null;
      throw error;
    }
    try {
      const socket = (client as unknown as Client).connection.stream;
      socket.cork();
      let sent;
      try {
        sent = [...turn].map(([statement, callers]) => ({
          statement,
          callers,
          answer: client.query<unknown[]>({ name: statement.name, text: statement.text, values: [[...callers.keys()]], rowMode: 'array' }),
        }));
      } finally {
        socket.uncork();
      }
      // Each answer handled as it comes, every one from the start: a connection that fails
      // fails them all at once, and none may go unheard meanwhile.
      await Promise.all(
        sent.map(({ statement, callers, answer }) =>
          answer.then(
            ({ rows }) => {
              const byKey = new Map(rows.map((row) => [String(row[statement.keyColumn]), row]));
              for (const [key, waiting] of callers) for (const caller of waiting) caller.resolve(byKey.get(key) ?? null);
            },
            (error: unknown) => {
              if (isConnectionError(error)) {
                lease.failed = error as Error;
                if (shared === lease) shared = null;
              }
              for (const waiting of callers.values()) for (const caller of waiting) caller.reject(error);
            },
          ),
        ),
      );
    } finally {
      if (--lease.turns === 0) {
        if (shared === lease) shared = null;
        client.release(lease.failed);
      }
    }
  };

  const flush = () => {
    const turn = asked;
    asked = new Map();
    // A caller already answered is not answered again: this reaches only those left waiting.
    send(turn).catch((error: unknown) => {
      for (const callers of turn.values()) for (const waiting of callers.values()) for (const caller of waiting) caller.reject(error);
    });
  };

  return <R extends unknown[]>(statement: PointStatement, key: string) =>
    new Promise<R | null>((resolve, reject) => {
      if (asked.size === 0) setImmediate(flush);
      let callers = asked.get(statement);
      if (!callers) asked.set(statement, (callers = new Map<string, Caller[]>()));
      const caller = { resolve: resolve as Caller['resolve'], reject };
      const waiting = callers.get(key);
      if (waiting) waiting.push(caller);
      else callers.set(key, [caller]);
    });
}
