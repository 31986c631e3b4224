// A fair share of the event loop for every client. Node runs the requests of every socket
// that is ready in one turn of its event loop, first come, first served: under a client
// that keeps many requests in flight every other client's request, a new connection's
// accept and a probe wait for all of a long turn (docs/operations.md, "Connections", has
// the figures). Here the first request a turn reads runs at once, and the others it reads
// within its slice run together once the reads are done, in groups (the same code back to
// back costs far less CPU than between reads; docs/performance.md, "Fair share"). The
// slice is by the clock, FAIR_SHARE_SLICE_MS, while a light client or a new connection
// wants its share; while none does, a turn has no slice, so that a client alone keeps the
// whole service. A request read past the slice joins its client's queue, and the queues
// run round-robin, one request a client at a time (within a client, its credentials in
// turn; a light client that had nothing waiting first), a slice a turn, each turn ending
// with a yield (setImmediate) so that accepts and other sockets' reads get theirs. A
// connection with a request queued is not read further, and once the turn's slice is
// spent neither is any connection of a client with requests queued (backpressure: their
// reads are not parsed until the client's queue is empty). While connections arrive, a
// turn's slice is a tenth of a millisecond: they are accepted one a turn. One client's
// queue is bounded: past FAIR_SHARE_QUEUE a request is answered 429 at once, before
// Express. docs/operations.md ("Connections", Fair share) says what a client sees.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from '../address-key';
import type { Config } from '../config';

export type FairShareReason = 'deferred' | 'queue_full' | 'read_deferred';
export const fairShareReasons: readonly FairShareReason[] = ['deferred', 'queue_full', 'read_deferred'];

export type FairShareConfig = Pick<Config, 'fairShare' | 'fairShareQueue' | 'fairShareSliceMs'>;

/** Express's compiled `trust proxy` (TRUST_PROXY): whether the `hop`-th address from the socket is a trusted proxy. */
export type Trust = (address: string, hop: number) => boolean;

/**
 * Who a request is from, for its share: the peer's address, or behind trusted proxies the
 * address Express's `req.ip` names (the right-most X-Forwarded-For entry not written by a
 * trusted proxy), read from the header without Express. An IPv6 address counts by its
 * /56, as the connection caps and rate limits count it. The API key is not part of it:
 * it is checked against the database only later, and a client that sent a new random
 * string on each request would otherwise be as many clients as it liked. Within a
 * client's share its credentials take turns (see fairShare), which buys none any more.
 */
export function clientKey(req: IncomingMessage, trust: Trust | undefined): string {
  let address = req.socket.remoteAddress ?? '';
  const forwarded = req.headers['x-forwarded-for'];
  if (trust && typeof forwarded === 'string' && trust(address, 0)) {
    const hops = forwarded.split(',');
    for (let i = hops.length - 1, hop = 1; i >= 0; i--, hop++) {
      address = (hops[i] as string).trim();
      if (!trust(address, hop)) break;
    }
  }
  return addressKey(address);
}

/** A direct connection's client, worked out once. */
const peerKeys = new WeakMap<Socket, string>();
function peerKey(socket: Socket, peer: string): string {
  let key = peerKeys.get(socket);
  if (key === undefined) peerKeys.set(socket, (key = addressKey(peer)));
  return key;
}

/** A FIFO that does not copy on shift. */
export class Queue<T> {
  private items: Array<T | undefined> = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** Puts `item` first. */
  unshift(item: T): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }

  shift(): T | undefined {
    if (this.head === this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

interface Waiting {
  req: IncomingMessage;
  res: ServerResponse;
}

/** The requests of one credential (its Authorization header, or none) from one client. */
interface Credential {
  key: string;
  waiting: Queue<Waiting>;
}

/** A client's waiting requests, by credential, taken in turn. */
interface Client {
  key: string;
  waiting: number;
  credentials: Map<string, Credential>;
  turns: Queue<Credential>;
  /** Its connections put off meanwhile: to be read again once none of its requests waits. */
  asleep: Array<() => void>;
  /** When the first of them was put off. */
  asleepSince: number;
}

/** What the connection holds for the scheduler (server/http/pipelining.ts's Pipeline). */
export interface Held {
  /** A request of the connection waits: read no more of it. */
  hold(): void;
  /** That request runs now: read it again once none of its requests waits. */
  release(): void;
}

/** The listener that gives each client its share, and what a connection asks before a read of it is parsed. */
export interface FairShare {
  listener: RequestListener;
  /** True when the read must wait: the caller puts it back and pauses; `wake` is called once it may be read. */
  putOff: (socket: Socket, wake: () => void) => boolean;
  /** Called as each connection is accepted. */
  accepted: () => void;
}

/** The longest a connection is put off while its client's queue does not empty. */
const maxAsleepMs = 100;

/**
 * The most requests put by to run together: past it they run at once, as a group. A turn
 * with no slice reads every ready connection, hundreds of a greedy client's requests, and
 * held until the reads were done they outlived the young generation's collections.
 */
const maxPutBy = 32;

/**
 * A turn's slice while connections arrive. libuv accepts one connection per turn of the
 * event loop, so a connection waits in the kernel's accept queue for as many turns as there
 * are connections ahead of it: hundreds, when one client opens hundreds at once. While
 * the last turn accepted one (others likely wait behind it), turns are kept short.
 */
const arrivingSliceMs = 0.1;

/**
 * How long a request of a light client (below half an equal share of the last window's
 * requests: a newcomer, a load balancer's probe, any light client beside a heavy one), or
 * a new connection, keeps the turns FAIR_SHARE_SLICE_MS long. Otherwise every client is
 * taking at least half an equal share, none is kept from its share, and the turns have no
 * slice: a client alone gets the whole service, at Node's own cost for its requests
 * (docs/operations.md, "Connections", Fair share, has the figures).
 */
const contendedForMs = 1_000;
/** Each client's requests are counted over windows this long, for its share. */
const shareWindowMs = 1_000;

const wakeAll = (client: Client) => {
  const asleep = client.asleep;
  client.asleep = [];
  for (const wake of asleep) wake();
};

const retryAfterSeconds = 1;
const queueFullMessage = (bound: number) =>
  `This client already has ${bound} requests waiting for their turn, its most: wait for their answers, or retry after Retry-After`;

/**
 * The request listener that gives each client its share, in front of `run` (the app).
 * `connection` finds a socket's hold; `counts` is where deferred and refused requests are
 * counted for the metrics.
 */
export function fairShare(
  run: RequestListener,
  config: FairShareConfig,
  trust: Trust | undefined,
  connection: (socket: Socket) => Held | undefined,
  counts: Record<FairShareReason, number>,
): FairShare {
  if (!config.fairShare) return { listener: run, putOff: () => false, accepted: () => {} };
  const sliceMs = config.fairShareSliceMs;
  const bound = config.fairShareQueue;
  const refusal = JSON.stringify({ code: 'rate_limited', message: queueFullMessage(bound), status: 429 });
  const clients = new Map<string, Client>();
  // Clients with requests waiting, in their turn's order.
  const turns = new Queue<Client>();
  // When this turn of the event loop's share began (its I/O, then its slice of waiting
  // requests), and whether the turn's end is scheduled. Wall-clock, not the requests' own
  // time: reading and parsing a greedy client's requests, their answers' ends and the
  // collector's work are what made a turn long, and they happen outside any request.
  let began = performance.now();
  let scheduled = false;
  // The requests this turn read after its first, within its slice: they run together once
  // the reads are done (docs/performance.md, "Fair share": the same code run back to back
  // costs far less CPU than run between reads). `runMs` is what one of them took to run (a
  // moving mean), so that a turn reads no more than its slice can run.
  let batch: Waiting[] = [];
  let runMs = 0.05;
  // Whether a connection was accepted since the last turn began.
  let arriving = false;
  // Requests read, by client, in this window and the last (the last's mean per client).
  let window = new Map<string, number>();
  let windowTotal = 0;
  let windowBegan = began;
  let last = new Map<string, number>();
  let lastMean = 0;
  // Until when a light client's request or a new connection keeps the slices short.
  let contendedUntil = 0;
  const slice = (now: number) => (now < contendedUntil ? sliceMs : Infinity);
  /** Counts a request of `key`'s; true when that client had less than half an equal share of the last window. */
  const light = (key: string, now: number): boolean => {
    if (now - windowBegan >= shareWindowMs) {
      // A window that ended more than a window ago says nothing of the clients now: after
      // a quiet spell nobody counts as light until a whole window has been seen.
      last = now - windowBegan < 2 * shareWindowMs ? window : new Map<string, number>();
      lastMean = windowTotal / Math.max(1, window.size);
      window = new Map();
      windowTotal = 0;
      windowBegan = now;
    }
    window.set(key, (window.get(key) ?? 0) + 1);
    windowTotal++;
    return last.size > 0 && (last.get(key) ?? 0) * 2 < lastMean;
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    began = performance.now();
    setImmediate(turn);
  };
  // After the turn's I/O: a slice spent on the waiting requests, a client at a time.
  const runBatch = () => {
    if (batch.length > 0) {
      const together = batch;
      batch = [];
      const start = performance.now();
      // All of them: how many were put by was foreseen from what such requests take, and a
      // misjudged turn is corrected by the next's foresight. Sending those past the slice to
      // the queues instead kept a pipelining client alone in them, its requests held across
      // turns (docs/performance.md, "Fair share").
      for (const { req, res } of together) run(req, res);
      runMs += ((performance.now() - start) / together.length - runMs) / 8;
    }
  };
  const turn = () => {
    scheduled = false;
    runBatch();
    const now = performance.now();
    // Uncontended, the slice is unbounded: what waits is run, and the next turn reads freely.
    const until = now + (arriving ? arrivingSliceMs : slice(now));
    arriving = false;
    while (turns.length > 0 && performance.now() < until) {
      const client = turns.shift() as Client;
      const credential = client.turns.shift() as Credential;
      const { req, res } = credential.waiting.shift() as Waiting;
      if (credential.waiting.length > 0) client.turns.push(credential);
      else client.credentials.delete(credential.key);
      if (--client.waiting > 0) {
        turns.push(client);
        // A client whose queue never empties still has each of its connections read now and then.
        if (client.asleep.length > 0 && performance.now() - client.asleepSince > maxAsleepMs) wakeAll(client);
      } else {
        clients.delete(client.key);
        // Its connections put off while it waited are read again (from the next turn's share).
        wakeAll(client);
      }
      run(req, res);
      connection(req.socket)?.release();
    }
    if (turns.length > 0) schedule();
  };

  /**
   * Asked by a connection before a read of it is parsed: true when the read must wait, and
   * `wake` is called once it may go on. While the turn's share is spent, a client with
   * requests waiting has no more of its connections read: parsing is most of what a request
   * costs, and a turn that parsed every ready connection of a greedy client was long for
   * everyone (a new connection waits for two turns, its accept's and its request's). Only
   * direct connections: a trusted proxy's carries many clients, one request at a time.
   */
  const putOff = (socket: Socket, wake: () => void): boolean => {
    const now = performance.now();
    if (turns.length === 0 || now - began < slice(now)) return false;
    const peer = socket.remoteAddress;
    if (peer === undefined || trust?.(peer, 0)) return false;
    const client = clients.get(peerKey(socket, peer));
    if (!client) return false;
    if (client.asleep.push(wake) === 1) client.asleepSince = performance.now();
    counts.read_deferred++;
    return true;
  };

  /**
   * Puts a request of `key`'s in its client's queue, or refuses it when the queue is full.
   * A light client (`goesFirst`) with nothing waiting goes first rather than last in the round:
   * it takes less than half an equal share, so going first takes no one's share from them,
   * and its request waits for the turn it was read in, not for one request of every
   * client with a backlog.
   */
  const wait = (req: IncomingMessage, res: ServerResponse, key: string, goesFirst: boolean): boolean => {
    let client = clients.get(key);
    if (!client) clients.set(key, (client = { key, waiting: 0, credentials: new Map(), turns: new Queue(), asleep: [], asleepSince: 0 }));
    if (client.waiting >= bound) {
      counts.queue_full++;
      res.writeHead(429, STATUS_CODES[429], {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(refusal),
        'X-Content-Type-Options': 'nosniff',
        'X-Request-Id': randomUUID(),
        'Retry-After': String(retryAfterSeconds),
      });
      res.end(refusal);
      return false;
    }
    counts.deferred++;
    const by = req.headers.authorization ?? '';
    let credential = client.credentials.get(by);
    if (!credential) {
      client.credentials.set(by, (credential = { key: by, waiting: new Queue() }));
      client.turns.push(credential);
    }
    credential.waiting.push({ req, res });
    if (++client.waiting === 1) {
      if (goesFirst) turns.unshift(client);
      else turns.push(client);
    }
    connection(req.socket)?.hold();
    return true;
  };

  const listener: RequestListener = (req, res) => {
    const now = performance.now();
    const key = clientKey(req, trust);
    const isLight = light(key, now);
    if (isLight) contendedUntil = now + contendedForMs;
    if (turns.length === 0) {
      // The turn's first request runs at once; the others it reads within its slice, together after the reads.
      if (!scheduled) {
        schedule();
        run(req, res);
        return;
      }
      if (now - began + batch.length * runMs < slice(now)) {
        batch.push({ req, res });
        if (batch.length >= maxPutBy) runBatch();
        return;
      }
    }
    if (wait(req, res, key, isLight)) schedule();
  };
  // A new connection is a client wanting its share too, before it has sent anything.
  const accepted = () => {
    arriving = true;
    contendedUntil = performance.now() + contendedForMs;
  };
  return { listener, putOff, accepted };
}
