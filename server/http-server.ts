// The HTTP server around createApp(): connection and time bounds, Error-shaped answers
// for what Node's parser refuses before Express sees a request, and a drain that lets
// keep-alive clients go and waits for the app's work when the service stops.
import { randomUUID } from 'node:crypto';
import { createServer, ServerResponse, STATUS_CODES, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from './config';
import { capConnections, connectionCaps, trustedProxies, type CapsConfig, type ConnectionCounts } from './connections';
import type { ErrorCode } from './errors';
import type { Logger } from './log';

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
   * Stops taking connections, answers what is in flight with `Connection: close`, closes
   * idle keep-alive sockets at once and each busy one as its response ends; resolves when
   * no connection is left and the app's work on every request is done, even where the
   * client hung up first (or at SHUTDOWN_TIMEOUT_MS, when the connections left are cut and
   * the work left is not waited for).
   */
  drain(): Promise<void>;
  /** Open and refused connections (server/connections.ts), for the metrics. */
  connections: ConnectionCounts;
  /** For listen(): room for every connection the service may hold to come back at once (the kernel caps it at net.core.somaxconn). */
  backlog: number;
}

type ServerLimits = Pick<Config, 'maxConnections' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'shutdownTimeoutMs'> &
  CapsConfig;

/** What Node's parser refused, as the contract's Error. */
function parserError(err: NodeJS.ErrnoException): { status: number; code: ErrorCode; message: string } {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'The request headers are too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'request_timeout', message: 'The request did not arrive in time' };
    case 'HPE_INVALID_METHOD':
      return { status: 400, code: 'bad_request', message: 'The request method is not one HTTP defines' };
    default:
      return { status: 400, code: 'bad_request', message: 'The HTTP request is malformed' };
  }
}

/**
 * The responses in flight, for drain(): reused slots, each cleared when its response
 * closes. Not a Set: a Set rebuilt per few dozen requests leaves replaced tables that
 * keep dead responses alive into the old generation (docs/decisions.md, "Draining").
 */
export class InFlight {
  private readonly slots: Array<ServerResponse | undefined> = [];
  // Slot numbers only: small integers, which hold nothing alive.
  private readonly free: number[] = [];

  add(res: ServerResponse): number {
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

  *[Symbol.iterator](): IterableIterator<ServerResponse> {
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

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    refused++;
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const { status, code, message } = parserError(err);
    const body = JSON.stringify({ code, message, status });
    // A fresh id, as for a request that sent none: the client's own X-Request-Id is in
    // headers the parser refused, so it cannot be echoed safely.
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Bad Request'}\r\n` +
        'Content-Type: application/json\r\n' +
        'X-Content-Type-Options: nosniff\r\n' +
        `X-Request-Id: ${randomUUID()}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  });

  const inFlight = new InFlight();
  // Requests that arrive while draining are told `Connection: close` by the app
  // (server/app.ts); the ones already in flight when it starts, by drain() below.
  server.on('request', (_req, res: ServerResponse) => {
    const slot = inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(slot);
      // A keep-alive socket whose response had already started when the drain began:
      // idle now, so close it rather than wait for its next request or the timeout.
      if (lifecycle.draining) setImmediate(() => server.closeIdleConnections());
    });
  });
  // After the listener above, so that it sees every response before the app writes it.
  server.on('request', app);

  const drain = () =>
    new Promise<void>((resolve) => {
      lifecycle.draining = true;
      clearInterval(reportRefused);
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
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
      server.close(() => {
        closed = true;
        settle();
      });
      server.closeIdleConnections();
    });

  return { server, drain, connections, backlog: caps.global };
}
