// The point reads every authenticated request makes (the key's owner, a pet), outside any
// transaction, are gathered for a turn of the event loop: once the turn's I/O is handled
// (setImmediate), each statement asked for goes out once, for every key asked of it in the
// turn (`= any($1)`, each key once), and each caller gets the row of its key. A turn's
// statements leave together in one write, on a pooled connection the reads share while any
// of them is under way: each turn's are written behind the others without waiting for
// their answers (the connections are pipelined, db/pg/connection.ts), so a read seldom
// checks a connection out of the pool. Only short reads that take no lock go here: a
// statement that waits would hold up every read written behind it.
// The orders placed outside a transaction (one statement each, which may wait for its pet's
// row lock) are gathered the same way on connections of their own (createTurnStatements):
// each its own statement, the turn's in one write. Why: docs/performance.md, "PostgreSQL:
// an order in one statement".
import type { Client, Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
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

/**
 * Turns of statements on pooled connections: each turn's written in one write (corked) on a
 * connection the turns share while any of them is under way, up to turnsPerConnection, and
 * the connection released once every turn on it is answered. `write` sends the turn's
 * statements and returns their answers.
 */
function shareConnections(pool: Pool) {
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
  return async (write: (client: PoolClient) => Array<Promise<unknown>>): Promise<void> => {
    // Other work waiting for a connection goes first: turns stop joining this one, so
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
      // Every statement waiting for this connection fails with it; the next turn asks again.
      if (shared === lease) shared = null;
      throw error;
    }
    try {
      const socket = (client as unknown as Client).connection.stream;
      socket.cork();
      let answers;
      try {
        answers = write(client);
      } finally {
        socket.uncork();
      }
      // Every answer waited for: a connection that fails fails them all at once.
      for (const answer of await Promise.allSettled(answers)) {
        if (answer.status === 'rejected' && isConnectionError(answer.reason)) {
          lease.failed = answer.reason as Error;
          if (shared === lease) shared = null;
        }
      }
    } finally {
      if (--lease.turns === 0) {
        if (shared === lease) shared = null;
        client.release(lease.failed);
      }
    }
  };
}

export function createPointReads(pool: Pool): PointRead {
  const onShared = shareConnections(pool);
  let asked: Asked = new Map();

  const send = (turn: Asked) =>
    onShared((client) =>
      [...turn].map(([statement, callers]) => {
        const answer = client.query<unknown[]>({
          name: statement.name,
          text: statement.text,
          values: [[...callers.keys()]],
          rowMode: 'array',
        });
        // Each answer handled as it comes.
        answer.then(
          ({ rows }) => {
            const byKey = new Map(rows.map((row) => [String(row[statement.keyColumn]), row]));
            for (const [key, waiting] of callers) for (const caller of waiting) caller.resolve(byKey.get(key) ?? null);
          },
          (error: unknown) => {
            for (const waiting of callers.values()) for (const caller of waiting) caller.reject(error);
          },
        );
        return answer;
      }),
    );

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

/** A statement sent for a turn (createTurnStatements). */
export type TurnStatement = <R extends QueryResultRow>(config: QueryConfig) => Promise<QueryResult<R>>;

/**
 * Statements asked for in a turn of the event loop, each sent as it is (each its own atomic
 * step, answered on its own), the turn's in one write on a shared connection: a write
 * statement, which may wait for a row's lock, goes here and not among the point reads.
 */
export function createTurnStatements(pool: Pool): TurnStatement {
  const onShared = shareConnections(pool);
  let asked: Array<{ config: QueryConfig; resolve: (result: QueryResult) => void; reject: (error: unknown) => void }> = [];
  const flush = () => {
    const turn = asked;
    asked = [];
    onShared((client) =>
      turn.map(({ config, resolve, reject }) => {
        const answer = client.query(config);
        answer.then(resolve, reject);
        return answer;
      }),
    ).catch((error: unknown) => {
      for (const { reject } of turn) reject(error);
    });
  };
  return <R extends QueryResultRow>(config: QueryConfig) =>
    new Promise<QueryResult<R>>((resolve, reject) => {
      if (asked.length === 0) setImmediate(flush);
      asked.push({ config, resolve: resolve as (result: QueryResult) => void, reject });
    });
}
