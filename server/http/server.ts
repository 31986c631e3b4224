// The HTTP server around createApp(): connection and time bounds, Error-shaped answers
// for what Node's parser refuses before Express sees a request, a bound on what one
// connection may leave unanswered or unread, and a drain that lets keep-alive clients go
// and waits for the app's work when the service stops.
import cluster from 'node:cluster';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Config } from '../config';
import { fairShare, Queue, type FairShareConfig } from './admission';
import {
  capConnections,
  connectionCaps,
  proxyTrust,
  requestTimeout,
  trustedProxies,
  type CapsConfig,
  type ConnectionCounts,
} from './connections';
import { closeNotReading, Pipeline } from './pipelining';
import type { ErrorCode } from '../../domain/errors';
import { rawErrorResponse } from '../pipeline/errors';

/** Shared by the app and its server. */
export interface Lifecycle {
  /** Set once the service starts stopping. */
  draining: boolean;
  /**
   * The app's handler promises not settled yet (server/app.ts, inOneLayer): work still
   * under way on a request, whether or not its client is still there.
   */
  working: number;
  /** Called by the app whenever `working` falls back to 0; drain() sets it. */
  onIdle: (() => void) | undefined;
}

export const createLifecycle = (): Lifecycle => ({ draining: false, working: 0, onIdle: undefined });

export interface HttpService {
  server: Server;
  /**
   * Stops the service without failing a request a client sent. At once: readiness turns
   * 503 and every answer not yet sent carries `Connection: close`, so each keep-alive
   * connection ends after its next answer, with nothing in flight on it. For `delayMs`
   * (SHUTDOWN_DELAY_MS) the server goes on listening and answering, so that a balancer
   * sees the 503 and stops sending. Then, once no client is on its way in (close(),
   * below), it stops listening and closes the connections
   * idle since an answer sent before the signal (by then past the keep-alive timeout their
   * clients were told), each busy one as its answer ends; a connection that has not sent
   * its request yet is read and answered. Resolves when no connection is left and the
   * app's work on every request is done, even where the client hung up first (or at
   * SHUTDOWN_TIMEOUT_MS after the delay, when the connections left are cut and the work
   * left is not waited for).
   */
  drain(delayMs?: number): Promise<void>;
  /** Open, refused and closed connections (server/http/connections.ts), for the metrics. */
  connections: ConnectionCounts;
  /** For listen(): room for every connection the service may hold to come back at once (the kernel caps it at net.core.somaxconn). */
  backlog: number;
}

type ServerLimits = Pick<
  Config,
  'maxConnections' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'sendTimeoutMs' | 'shutdownTimeoutMs'
> &
  CapsConfig &
  FairShareConfig;

/**
 * The most 408s written in one turn of the event loop, each a write and a close; the rest
 * wait for the turns after (docs/operations.md, "Connections", Slow clients end on time).
 */
export const timeoutAnswersPerTurn = 64;

/** What Node's parser refused, as the contract's Error. */
function parserError(errorCode: string | undefined): { status: number; code: ErrorCode; message: string } {
  switch (errorCode) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'The request headers are too large' };
    case requestTimeout:
      return { status: 408, code: 'request_timeout', message: 'The request did not arrive in time' };
    case 'HPE_INVALID_METHOD':
      return { status: 400, code: 'bad_request', message: 'The request method is not one HTTP defines' };
    default:
      return { status: 400, code: 'bad_request', message: 'The HTTP request is malformed' };
  }
}

/**
 * The responses in flight (and the connections open), for drain(): reused slots, each
 * cleared when its response (connection) closes. Not a Set: a Set rebuilt per few dozen
 * requests leaves replaced tables that keep dead responses alive into the old generation
 * (docs/decisions.md, "Draining").
 */
export class InFlight<T extends object = ServerResponse> {
  private readonly slots: Array<T | undefined> = [];
  // Slot numbers only: small integers, which hold nothing alive.
  private readonly free: number[] = [];

  add(res: T): number {
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = res;
    return slot;
  }

  delete(slot: number): void {
    this.slots[slot] = undefined;
    this.free.push(slot);
  }

  get size(): number {
    return this.slots.length - this.free.length;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (const res of this.slots) if (res) yield res;
  }
}

export function createHttpServer(app: RequestListener, config: ServerLimits, lifecycle: Lifecycle, log: Logger): HttpService {
  const server = createServer({
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    // How often Node checks the two timeouts above (30 s by default, which would let
    // a slow client hold a socket up to 30 s past them).
    connectionsCheckingInterval: Math.min(100, Math.ceil(config.headersTimeoutMs / 2)),
  });
  const caps = connectionCaps(config, trustedProxies(app));
  const connections = capConnections(server, caps, log);

  let refused = 0;
  const reportRefused = setInterval(() => {
    // One line a minute, however many malformed requests arrived: an outsider cannot
    // turn parser errors into a log flood.
    if (refused > 0) log.warn({ refused }, 'malformed or timed-out HTTP requests in the last minute');
    refused = 0;
  }, 60_000);
  reportRefused.unref();

  const inFlight = new InFlight();
  const sockets = new InFlight<Socket>();
  // Connections whose last answer is out and that have sent nothing since: idle keep-alive
  // connections. One that has not sent its first request yet is not among them.
  const answered = new WeakSet<Socket>();
  // Set once the delay is over and the server no longer listens.
  let closing = false;
  const closeIfIdle = (socket: Socket) => {
    if (answered.has(socket)) socket.destroy();
  };
  const pipelines = new WeakMap<Socket, Pipeline>();
  // A connection was accepted since the timeouts were last answered (answerTimeouts, below).
  let connectionArrived = false;
  // Each client's requests in its turn, and its connections read in its turn (server/http/admission.ts).
  const admit = fairShare(app, config, proxyTrust(app), (socket) => pipelines.get(socket), connections.fairShare);
  // Answers queued behind an earlier one on their connection: should it close first, Node
  // drops them without a 'close'.
  const waiting = new WeakMap<Socket, Set<() => void>>();
  server.on('connection', (socket: Socket) => {
    admit.accepted();
    connectionArrived = true;
    const slot = sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(slot);
      for (const answer of waiting.get(socket) ?? []) answer();
    });
    // Not on a connection refused by a cap (server/http/connections.ts), which has no parser.
    if ((socket as Socket & { parser?: unknown }).parser) pipelines.set(socket, new Pipeline(socket, connections.closed, admit.putOff));
  });
  server.once('close', closeNotReading(sockets, config.sendTimeoutMs, connections.closed));

  const answerError = (errorCode: string | undefined, socket: Socket) => {
    if (errorCode === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const { status, code, message } = parserError(errorCode);
    socket.end(rawErrorResponse(status, code, message));
  };
  // Node finds every connection past its timeout in one sweep and errors them all in that
  // turn: a slowloris's connections, opened together, time out together, and answering
  // thousands at once held everyone else's requests for as long. So the 408s go out at
  // most timeoutAnswersPerTurn a turn, in the order Node found them, and one a turn while
  // connections arrive: Node accepts one connection a turn, and a client that reconnects as
  // soon as it is answered would otherwise fill the kernel's accept queue faster than that,
  // ahead of everyone else's new connections. What a timed-out connection sends meanwhile
  // is not parsed.
  const timedOut = new Queue<Socket>();
  let answeringTimeouts = false;
  const answerTimeouts = () => {
    const atMost = connectionArrived ? 1 : timeoutAnswersPerTurn;
    connectionArrived = false;
    for (let n = 0; n < atMost; n++) {
      const socket = timedOut.shift();
      if (!socket) break;
      answerError(requestTimeout, socket);
    }
    answeringTimeouts = timedOut.length > 0;
    if (answeringTimeouts) setImmediate(answerTimeouts);
  };
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    refused++;
    if (err.code !== requestTimeout) return answerError(err.code, socket);
    pipelines.get(socket)?.end();
    timedOut.push(socket);
    if (!answeringTimeouts) {
      answeringTimeouts = true;
      setImmediate(answerTimeouts);
    }
  });

  // Requests held while the listener is let go (close(), below); none otherwise.
  let held: Array<[IncomingMessage, ServerResponse]> | undefined;
  // Requests that arrive while draining are told `Connection: close` by the app
  // (server/app.ts); the ones already in flight when it starts, by drain() below.
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const { socket } = req;
    const pipeline = pipelines.get(socket);
    pipeline?.sent();
    const slot = inFlight.add(res);
    answered.delete(socket);
    let done = false;
    const answer = () => {
      if (done) return;
      done = true;
      inFlight.delete(slot);
      waiting.get(socket)?.delete(answer);
      if (pipeline && !pipeline.answered()) return;
      answered.add(socket);
      // A keep-alive connection whose answer had begun before the drain (so it could not
      // be told `Connection: close`): idle now, and past the delay no balancer sends on it.
      if (closing) setImmediate(closeIfIdle, socket);
    };
    res.once('close', answer);
    if (!res.socket) {
      let queued = waiting.get(socket);
      if (!queued) waiting.set(socket, (queued = new Set()));
      queued.add(answer);
    }
    if (held) held.push([req, res]);
    else admit.listener(req, res);
  });

  const drain = (delayMs = 0) =>
    new Promise<void>((resolve) => {
      lifecycle.draining = true;
      clearInterval(reportRefused);
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      // No idle connection is closed during the delay: its client may be sending on it at
      // this very moment, and would meet the close as a failed request. Its next answer
      // carries `Connection: close` instead, and Node ends the connection once it is out.
      setTimeout(() => close(resolve), delayMs);
    });

  // Stopping to listen resets every connection the kernel has completed but the service
  // not yet accepted: its client has sent a request that nobody will read. Without a
  // balancer, clients told `Connection: close` reconnect at once, so some are always on
  // their way in. So requests are held, unanswered, until no connection has come in and
  // no answer has gone out for `quietMs`: each of those clients is then waiting on a
  // connection the service holds, and nothing is queued. Then the listener closes (a
  // client connecting from then on is refused: nothing was sent) and the held requests
  // are answered. Clients that keep arriving anew end the hold at `holdMaxMs`.
  const quietMs = 100;
  const holdMaxMs = 2_000;
  const primaryCloseMs = 100;
  const close = (resolve: () => void) => {
    held = [];
    const heldSince = Date.now();
    let lastSeen = heldSince;
    const seen = () => {
      lastSeen = Date.now();
    };
    server.on('connection', seen);
    for (const res of inFlight) res.once('close', seen);
    const check = () => {
      const now = Date.now();
      if (now - lastSeen < quietMs && now - heldSince < holdMaxMs) {
        setTimeout(check, quietMs - (now - lastSeen));
        return;
      }
      // Quiet by the clock, but a busy event loop may not have accepted what the kernel
      // holds: the I/O phase between this timer and the immediate accepts it first.
      const before = lastSeen;
      setImmediate(() => {
        if (lastSeen !== before && Date.now() - heldSince < holdMaxMs) {
          setTimeout(check, quietMs);
          return;
        }
        server.off('connection', seen);
        stopListening(resolve);
      });
    };
    setTimeout(check, quietMs);
  };

  const stopListening = (resolve: () => void) => {
    closing = true;
    // A response closes when its client hangs up, while its handler may still be awaiting
    // the database: the server closing is not enough, the app's work must be done too,
    // or the caller would close the storage under it.
    let closed = false;
    let expired = false;
    const settle = () => {
      if (!closed || (lifecycle.working > 0 && !expired)) return;
      clearTimeout(deadline);
      lifecycle.onIdle = undefined;
      resolve();
    };
    const deadline = setTimeout(() => {
      log.error({ inFlight: inFlight.size, working: lifecycle.working }, 'Shutdown timed out; closing the remaining connections');
      expired = true;
      server.closeAllConnections();
      // The server may have closed already, with only the app's work left.
      settle();
    }, config.shutdownTimeoutMs);
    deadline.unref();
    lifecycle.onIdle = settle;
    // net.Server's close, not http.Server's: that one also closes every connection with
    // no request in flight, among them those just accepted whose request is still unread.
    NetServer.prototype.close.call(server, () => {
      closed = true;
      settle();
    });
    for (const socket of sockets) closeIfIdle(socket);
    // Answered once nothing more can be queued. A process of its own closed its listening
    // socket just now; a cluster worker has only asked the primary, which holds the socket
    // and may still accept a client that reconnects after an answer (and reset it as it
    // closes), so the worker gives it a moment first.
    const release = () => {
      const waiting = held ?? [];
      held = undefined;
      for (const [req, res] of waiting) app(req, res);
    };
    if (cluster.isWorker) setTimeout(release, primaryCloseMs);
    else release();
  };

  return { server, drain, connections, backlog: caps.global };
}
