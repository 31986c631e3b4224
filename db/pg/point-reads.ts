// The point reads every authenticated request makes (the key's owner, a pet), outside any
// transaction, share a pooled connection while any of them is under way: each is written
// behind the others without waiting for their answers (the connections are pipelined,
// db/pg/connection.ts), so a read seldom checks a connection out of the pool, and the
// reads asked for in one turn of the event loop leave in one write (the socket is corked
// until the turn ends). Only short reads that take no lock go here: a statement that
// waits would hold up every read written behind it.
import type { Client, Pool, PoolClient, QueryArrayConfig } from 'pg';
import { isConnectionError } from './connection';

/**
 * Reads on one connection at once, at most: past it a read takes another, so that one
 * server process does not answer every read of a busy instance in turn (the bounds tried:
 * docs/performance.md, "PostgreSQL: an order in one statement").
 */
const readsPerConnection = 8;

interface Lease {
  client: Promise<PoolClient>;
  reads: number;
  corked: boolean;
  /** A connection error seen on it: the connection is discarded when released. */
  failed?: Error;
}

/** The rows of a statement read with `rowMode: 'array'`, each as `R`. */
export type PointRead = <R extends unknown[]>(config: QueryArrayConfig) => Promise<R[]>;

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
  return async <R extends unknown[]>(config: QueryArrayConfig) => {
    // Other work waiting for a connection goes first: reads stop joining this one, so
    // that it is released once they are answered (with a pool of one, to that work).
    if (!shared || shared.reads >= readsPerConnection || pool.waitingCount > checkingOut) {
      shared = { client: checkOut(), reads: 0, corked: false };
    }
    const lease = shared;
    lease.reads++;
    let client: PoolClient;
    try {
      client = await lease.client;
    } catch (error) {
      // Every read waiting for this connection fails with it; the next one asks again.
      if (shared === lease) shared = null;
      throw error;
    }
    if (!lease.corked) {
      const socket = (client as unknown as Client).connection.stream;
      lease.corked = true;
      socket.cork();
      setImmediate(() => {
        lease.corked = false;
        socket.uncork();
      });
    }
    try {
      return (await client.query<R>(config)).rows;
    } catch (error) {
      if (isConnectionError(error)) {
        lease.failed = error as Error;
        if (shared === lease) shared = null;
      }
      throw error;
    } finally {
      if (--lease.reads === 0) {
        if (shared === lease) shared = null;
        client.release(lease.failed);
      }
    }
  };
}
