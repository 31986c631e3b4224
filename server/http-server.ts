// The HTTP server around createApp(): connection and time bounds, Error-shaped answers
// for what Node's parser refuses before Express sees a request, and a drain that lets
// keep-alive clients go when the service stops.
import { createServer, STATUS_CODES, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from './config';
import type { ErrorCode } from './errors';
import type { Logger } from './log';

/** Shared by the app and its server: set once the service starts stopping. */
export interface Lifecycle {
  draining: boolean;
}

export interface HttpService {
  server: Server;
  /**
   * Stops taking connections, answers what is in flight with `Connection: close`, closes
   * idle keep-alive sockets at once and each busy one as its response ends; resolves when
   * no connection is left (or at SHUTDOWN_TIMEOUT_MS, when the rest are cut).
   */
  drain(): Promise<void>;
}

type ServerLimits = Pick<Config, 'maxConnections' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'shutdownTimeoutMs'>;

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

export function createHttpServer(app: RequestListener, config: ServerLimits, lifecycle: Lifecycle, log: Logger): HttpService {
  const server = createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      // How often Node checks the two timeouts above (30 s by default, which would let
      // a slow client hold a socket up to 30 s past them).
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(config.headersTimeoutMs / 2)),
    },
  );
  // Past this, Node refuses new sockets at once, so a flood of half-open connections
  // cannot exhaust file descriptors while /healthz still answers those already open.
  server.maxConnections = config.maxConnections;

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
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Bad Request'}\r\n` +
        'Content-Type: application/json\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  });

  const inFlight = new Set<ServerResponse>();
  // Requests that arrive while draining are told `Connection: close` by the app
  // (server/app.ts); the ones already in flight when it starts, by drain() below.
  server.on('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
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
      const deadline = setTimeout(() => {
        log.error({ inFlight: inFlight.size }, 'Shutdown timed out; closing the remaining connections');
        server.closeAllConnections();
      }, config.shutdownTimeoutMs);
      deadline.unref();
      server.close(() => {
        clearTimeout(deadline);
        resolve();
      });
      server.closeIdleConnections();
    });

  return { server, drain };
}
