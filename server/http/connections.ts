// How many connections the API's server holds: at most MAX_CONNECTIONS_PER_ADDRESS per
// client address, so that one client cannot take the places of everyone else, and at most
// MAX_CONNECTIONS in all, derived from the process's file-descriptor limit so that the
// database and files always find one. A connection past either is answered 429 or 503 in
// the Error shape, without an HTTP parser. docs/operations.md ("Connections") says what an
// operator sees; docs/deployment.md says what a proxy in front must do instead.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { BlockList, type SocketAddress, type Socket } from 'node:net';
import type { RequestListener, Server } from 'node:http';
import type { Logger } from 'pino';
import { addressKey } from '../address-key';
import type { Config } from '../config';
import { rawErrorResponse } from '../pipeline/errors';
import { StartupError } from '../startup';
import type { FairShareReason, Trust } from './admission';

export type RefusalReason = 'address_cap' | 'global_cap';
export const refusalReasons: readonly RefusalReason[] = ['address_cap', 'global_cap'];
/** Why the service closed a connection it was serving (server/http/pipelining.ts). */
export type CloseReason = 'not_reading' | 'pipelining';
export const closeReasons: readonly CloseReason[] = ['not_reading', 'pipelining'];

/** What the caps and the server have done so far, read by the metrics at each scrape. */
export interface ConnectionCounts {
  /** Connections open now. */
  readonly open: number;
  /** Connections refused since start, by the cap that refused them. */
  readonly refused: Readonly<Record<RefusalReason, number>>;
  /** Connections closed while being served, by why; counted by server/http/pipelining.ts. */
  readonly closed: Record<CloseReason, number>;
  /** Requests made to wait for their client's turn, or refused past its queue's bound (server/http/admission.ts). */
  readonly fairShare: Record<FairShareReason, number>;
}

/**
 * File descriptors kept for everything but client connections: Node's own (stdio, the
 * event loop, its threads), the SQLite files of two connections, the metrics listener and
 * its scrapers, files read for /docs, an exporter's sockets; plus one per PostgreSQL
 * connection of the pool.
 */
export const reservedDescriptors = 128;

/**
 * What tells the process's limit on open files, which Node raises from the soft limit to the
 * hard one at start: /proc on Linux; elsewhere (macOS, the BSDs) a shell's `ulimit -n`, as
 * a child has its parent's limits. Windows has no such limit on sockets.
 */
export const limitReaders = {
  proc: () => readFileSync('/proc/self/limits', 'utf8'),
  shell: () => execFileSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }),
};
const platformLimits = process.platform === 'linux' ? limitReaders.proc : process.platform === 'win32' ? undefined : limitReaders.shell;

/** The process's limit on open files; undefined where there is none (Windows), it is unlimited, or it cannot be read. */
export function fileDescriptorLimit(limits = platformLimits): number | undefined {
  let text: string;
  try {
    if (!limits) return undefined;
    text = limits();
  } catch {
    return undefined;
  }
  // /proc's table, or the shell's one number.
  const match = /^Max open files\s+(\d+|unlimited)/m.exec(text) ?? /^(\d+|unlimited)\s*$/.exec(text);
  if (!match?.[1] || match[1] === 'unlimited') return undefined;
  return Number(match[1]);
}

/**
 * Where no limit is known (Windows, an unlimited or unreadable one): a fixed cap, far below
 * what a process's memory holds.
 */
const capWithoutLimit = 1_000;

/**
 * The global cap: MAX_CONNECTIONS when set, else what the file-descriptor limit leaves
 * once `reservedDescriptors`, the refused connections being answered (`answeringAtMost`)
 * and the database pool are kept aside. A MAX_CONNECTIONS the limit cannot hold stops
 * start-up: past it, accept() would fail and starve the database.
 */
export function globalCap(configured: number | undefined, poolSize: number, limit: number | undefined): number {
  const kept = reservedDescriptors + answeringAtMost + poolSize;
  const room = limit === undefined ? undefined : limit - kept;
  if (room !== undefined && room < 1) {
    throw new StartupError(`The file-descriptor limit (ulimit -n) is ${limit}: too low to serve; raise it to at least ${kept + 256}`);
  }
  if (configured === undefined) return room ?? capWithoutLimit;
  if (room !== undefined && configured > room) {
    throw new StartupError(
      `MAX_CONNECTIONS=${configured} is more than the ${room} connections the file-descriptor limit (ulimit -n: ${limit}) leaves room for; ` +
        'raise the limit, or leave MAX_CONNECTIONS unset to derive it',
    );
  }
  return configured;
}

export interface CapOptions {
  /** Connections one client address may hold; 0 is no cap. */
  perAddress: number;
  /** Connections in all (see globalCap). */
  global: number;
  /**
   * A trusted proxy's address (TRUST_PROXY): its connections carry many clients, so the
   * per-address cap does not count them; the proxy caps its clients itself.
   */
  isProxy: (address: string) => boolean;
  /**
   * A connection that ended in 408 (HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS) keeps its
   * place in its address's count for a random part of this longer.
   */
  holdAfterTimeoutMs: number;
}

export type CapsConfig = Pick<
  Config,
  'maxConnections' | 'maxConnectionsPerAddress' | 'databaseUrl' | 'databasePoolSize' | 'headersTimeoutMs'
>;

/**
 * The peers Express trusts as proxies (TRUST_PROXY, compiled by Express into its `trust
 * proxy fn` setting), so that the cap and `req.ip` agree on who is a proxy; none for a
 * listener that is not an Express app.
 */
export function trustedProxies(app: RequestListener): (address: string) => boolean {
  const trust = proxyTrust(app);
  return trust ? (address) => trust(address, 0) : () => false;
}

/** Express's compiled `trust proxy fn`, whether the hop-th address from the socket is a trusted proxy; undefined for a listener that is not an Express app. */
export function proxyTrust(app: RequestListener): Trust | undefined {
  return (app as { get?: (setting: string) => Trust | undefined }).get?.('trust proxy fn');
}

/** The caps of a configuration: the pool counts only where there is one (PostgreSQL). */
export function connectionCaps(config: CapsConfig, isProxy: (address: string) => boolean, limit = fileDescriptorLimit()): CapOptions {
  const pool = config.databaseUrl ? config.databasePoolSize : 0;
  return {
    perAddress: config.maxConnectionsPerAddress,
    global: globalCap(config.maxConnections, pool, limit),
    isProxy,
    holdAfterTimeoutMs: config.headersTimeoutMs,
  };
}

/** Node's error for a connection past HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS. */
export const requestTimeout = 'ERR_HTTP_REQUEST_TIMEOUT';

const logWindowMs = 60_000;
/** Addresses named in the log a minute at most; the rest are counted in the minute's summary. */
const namedPerWindow = 10;

/**
 * Refused connections being answered at once, at most; past it a refusal is a close at
 * accept, unanswered, so that a client reconnecting without end holds no more descriptors
 * through its refusals than this. Kept aside from the global cap (globalCap).
 */
export const answeringAtMost = 256;
/** How long a refused connection has to send its request and read its answer before it is cut. */
export const refusalLingerMs = 1_000;

/** Places come back as connections close (an idle one within KEEP_ALIVE_TIMEOUT_MS): soon. */
const retryAfter = { 'Retry-After': '1' };
const refusalAnswer = (reason: RefusalReason, perAddress: number) =>
  reason === 'address_cap'
    ? rawErrorResponse(
        429,
        'rate_limited',
        `This address already holds ${perAddress} connections, its most at once: send on those, or retry after Retry-After`,
        retryAfter,
      )
    : rawErrorResponse(503, 'overloaded', 'The service holds its most connections at once; retry after Retry-After', retryAfter);

/**
 * Answers a refused connection without an HTTP parser, closing it as nginx's lingering
 * close does: the answer goes out once the client's first bytes (its request) are in or it
 * closes its side, and what it sends is read and dropped until it does, so that no unread
 * request turns the close into a reset that loses the answer. Cut at refusalLingerMs,
 * answered or not.
 */
function answerRefusal(socket: Socket, answer: () => string): void {
  let answered = false;
  const send = () => {
    if (answered) return;
    answered = true;
    socket.end(answer());
  };
  socket.on('data', send);
  socket.on('end', send);
  socket.on('error', () => {});
  cutAfterLinger(socket, send);
}

/** Destroys `socket` at refusalLingerMs, after `last`, unless it has closed by then. */
export function cutAfterLinger(socket: Socket, last: () => void = () => {}): void {
  const cut = setTimeout(() => {
    last();
    socket.destroy();
  }, refusalLingerMs);
  socket.once('close', () => clearTimeout(cut));
}

/**
 * Puts the caps on `server`. Both are decided as a connection is accepted, before Node
 * makes a socket object of it, in the server's `blockList` (the check net.Server runs on
 * each accepted handle, its `blockList` option), asked here how many connections the
 * address and the server hold rather than whether the address is listed. A refused
 * connection is answered (429 past the per-address cap, 503 past the global one) without an
 * HTTP parser, `answeringAtMost` at once; past that it is closed at accept unanswered.
 * Node's `maxConnections` is the backstop on descriptors.
 */
export function capConnections(server: Server, options: CapOptions, log: Logger): ConnectionCounts {
  const { perAddress, isProxy } = options;
  server.maxConnections = options.global + answeringAtMost;
  const refused = { address_cap: 0, global_cap: 0 };
  // Connections open, refused ones being answered included, and those being answered.
  let open = 0;
  let answering = 0;
  // Connections held per address; an address leaves the map with its last connection.
  const held = new Map<string, number>();

  // One line when an address first meets its cap in a minute (up to namedPerWindow
  // addresses), and one summary a minute: an attacker cannot turn refusals into a log flood.
  const named = new Set<string>();
  let inWindow = { address_cap: 0, global_cap: 0 };
  const summary = setInterval(() => {
    if (inWindow.address_cap + inWindow.global_cap > 0) {
      log.warn({ refused: inWindow, addressesNamed: named.size }, 'connections refused in the last minute');
    }
    inWindow = { address_cap: 0, global_cap: 0 };
    named.clear();
  }, logWindowMs);
  summary.unref();

  const count = (reason: RefusalReason, key: string | null, heldByKey: number) => {
    refused[reason]++;
    if (reason === 'global_cap') {
      if (inWindow.global_cap++ === 0) {
        log.warn({ cap: options.global }, 'open connections at the global cap (MAX_CONNECTIONS): refusing new ones with 503');
      }
    } else if (key !== null) {
      inWindow.address_cap++;
      if (!named.has(key) && named.size < namedPerWindow) {
        named.add(key);
        log.warn(
          { address: key, open: heldByKey, cap: perAddress },
          'connections from one address at their cap (MAX_CONNECTIONS_PER_ADDRESS): refusing new ones with 429',
        );
      }
    }
  };
  server.on('drop', () => count('global_cap', null, 0));

  // What check() decided, for the 'connection' event that Node emits right after it for the
  // same handle: the peer's address is asked of the kernel once.
  let admitted: string | null | undefined;
  let refusal: RefusalReason | undefined;
  const keyOf = (address: string) => (perAddress === 0 || isProxy(address) ? null : addressKey(address));
  class Caps extends BlockList {
    override check(peer: string | SocketAddress): boolean {
      const key = keyOf(typeof peer === 'string' ? peer : peer.address);
      const heldByKey = key === null ? 0 : (held.get(key) ?? 0);
      const reason: RefusalReason | undefined =
        open - answering >= options.global ? 'global_cap' : heldByKey >= perAddress && key !== null ? 'address_cap' : undefined;
      if (reason === undefined) {
        admitted = key;
        return false;
      }
      count(reason, key, heldByKey);
      if (answering >= answeringAtMost) return true;
      refusal = reason;
      return false;
    }
  }
  // Set on the instance, where net.Server keeps its `blockList` option: http.createServer
  // does not pass that option on. tests/http-server.test.ts fails if Node stops reading it.
  (server as Server & { blockList?: BlockList }).blockList = new Caps();

  // A slow client's connections all time out in the same sweep of Node's, and an attacker
  // opens them again at once: the next timeouts come together again, each time a burst of
  // work that delays everyone else. Keeping a timed-out connection's place a random while
  // longer spreads them out (a client that sends its requests whole never meets this).
  const timedOut = new WeakSet<Socket>();
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === requestTimeout) timedOut.add(socket);
  });
  const leave = (key: string) => {
    const count = held.get(key) ?? 1;
    if (count <= 1) held.delete(key);
    else held.set(key, count - 1);
  };

  // http.Server attaches its parser in the one 'connection' listener its constructor adds;
  // it is called from here, for admitted connections only.
  const [attachParser, ...others] = server.listeners('connection') as Array<(socket: Socket) => void>;
  if (!attachParser || others.length > 0) throw new Error("Expected http.Server's own 'connection' listener alone");
  server.removeListener('connection', attachParser);
  server.on('connection', (socket: Socket) => {
    open++;
    const reason = refusal;
    refusal = undefined;
    if (reason !== undefined) {
      answering++;
      socket.once('close', () => {
        open--;
        answering--;
      });
      answerRefusal(socket, () => refusalAnswer(reason, perAddress));
      return;
    }
    let key: string | null = null;
    if (admitted !== undefined) key = admitted;
    else if (socket.remoteAddress !== undefined) key = keyOf(socket.remoteAddress);
    admitted = undefined;
    if (key !== null) held.set(key, (held.get(key) ?? 0) + 1);
    socket.once('close', () => {
      open--;
      if (key === null) return;
      if (timedOut.has(socket)) setTimeout(leave, Math.random() * options.holdAfterTimeoutMs, key).unref();
      else leave(key);
    });
    attachParser.call(server, socket);
  });

  return {
    get open() {
      return open;
    },
    refused,
    closed: { not_reading: 0, pipelining: 0 },
    fairShare: { deferred: 0, queue_full: 0, read_deferred: 0 },
  };
}
