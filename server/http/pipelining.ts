// What one connection may leave unanswered or unread. HTTP/1.1 lets a client send requests
// ahead of their answers (pipelining). Node's HTTP server stops reading a connection while
// its answers back up, but its parser turns all that one read holds (up to 64 KiB: some
// 1,500 small requests) into requests at once, queueing their answers whether the client
// reads them or not. Here each read is counted before the parser sees it, and a connection
// whose client takes none of its answers for SEND_TIMEOUT_MS is closed. docs/operations.md
// ("Connections") says what a client sees.
import type { Socket } from 'node:net';
import { rawErrorResponse } from '../pipeline/errors';
import { cutAfterLinger, type ConnectionCounts } from './connections';

/**
 * Requests one connection may have sent and not had answered: a client that reads its
 * answers keeps a few in flight; one read that would take a connection past this is not
 * parsed (docs/operations.md, "Connections").
 */
export const maxPipelined = 128;

/** Complete request heads in `chunk` (each ends in an empty line), counted up to `atMost` + 1. */
export function requestHeads(chunk: Buffer, atMost = maxPipelined): number {
  let heads = 0;
  for (let at = chunk.indexOf('\r\n\r\n'); at !== -1 && heads <= atMost; at = chunk.indexOf('\r\n\r\n', at + 4)) heads++;
  return heads;
}

/** What a connection whose requests wait may have read ahead of them; past it, it is over the bound. */
const maxWaitingBytes = 256 * 1024;

const pipeliningMessage = `More than ${maxPipelined} requests were sent on this connection before their answers were read: send fewer at once, and the rest on a new connection`;

/** One connection's requests, as the server counts them. */
export class Pipeline {
  /** Parsed and not yet answered (their response neither finished nor dropped). */
  private unanswered = 0;
  /** Sent past maxPipelined: nothing more of it is parsed, and it is closed once what it is owed is out. */
  private over = false;
  /** Its requests waiting for their client's turn (server/http/admission.ts): while any does, it is not read. */
  private held = 0;
  /** Put off by its client's fair share (server/http/admission.ts) until `wake`. */
  private asleep = false;
  /** Paused by the gate while requests waited or its client's share was spent. */
  private pausedHere = false;
  /** Timed out (HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS): its 408 is on its way, and nothing more of it is parsed. */
  private ended = false;

  /**
   * Puts the bounds on a connection that has Node's parser (not one refused by a cap):
   * from here its reads come through `gate` before the parser's own listener.
   */
  constructor(
    private readonly socket: Socket,
    private readonly closed: ConnectionCounts['closed'],
    private readonly putOff: (socket: Socket, wake: () => void) => boolean = () => false,
  ) {
    const [parse, ...others] = socket.listeners('data') as Array<(chunk: Buffer) => void>;
    if (!parse || others.length > 0) throw new Error("Expected http.Server's own 'data' listener alone");
    socket.removeListener('data', parse);
    // Adding a 'data' listener makes Node's parser take its reads from the socket's events
    // rather than straight from the handle.
    socket.on('data', (chunk: Buffer) => this.gate(chunk, parse));
  }

  private gate(chunk: Buffer, parse: (chunk: Buffer) => void): void {
    if (this.over || this.ended) return;
    if (
      (this.held > 0 || this.asleep || (this.asleep = this.putOff(this.socket, this.wake))) &&
      this.socket.readableLength < maxWaitingBytes
    ) {
      // Back to the socket's buffer, to be read on release() or wake(); Node's server
      // resumes a connection as each of its answers ends, so this may come again meanwhile.
      this.socket.pause();
      this.pausedHere = true;
      this.socket.unshift(chunk);
      return;
    }
    const room = Math.max(0, maxPipelined - this.unanswered);
    if (requestHeads(chunk, room) <= room) return parse(chunk);
    // Not parsed: answered 429 with `Connection: close` after the answers it is owed. A
    // client that pipelines sends again, on a new connection, what was not answered.
    this.over = true;
    this.closed.pipelining++;
    this.socket.pause();
    if (this.unanswered === 0) this.refuse();
  }

  private refuse(): void {
    if (this.socket.destroyed) return;
    this.socket.end(rawErrorResponse(429, 'rate_limited', pipeliningMessage, { 'Retry-After': '1' }));
    cutAfterLinger(this.socket);
  }

  /**
   * One of its requests waits for its client's turn (server/http/admission.ts): what it
   * sends meanwhile is not parsed, and the first read of it pauses it. Paused then, not
   * now: most clients send nothing more until answered, and would pay two system calls a
   * request for nothing.
   */
  hold(): void {
    this.held++;
  }

  /** That request has run: once none waits, the connection is read again (what it holds first). */
  release(): void {
    this.held--;
    this.readAgain();
  }

  /** Its client's turn has come round again: read it, unless one of its own requests waits. */
  private readonly wake = () => {
    this.asleep = false;
    this.readAgain();
  };

  private readAgain(): void {
    if (this.held > 0 || this.asleep || !this.pausedHere) return;
    this.pausedHere = false;
    if (!this.over && !this.socket.destroyed) this.socket.resume();
  }

  /** It timed out: what it sends until its 408 goes out is dropped, not parsed. */
  end(): void {
    this.ended = true;
  }

  /** A request parsed from this connection. */
  sent(): void {
    this.unanswered++;
  }

  /** One of its answers is out, or dropped with the connection; true when none is left. */
  answered(): boolean {
    if (--this.unanswered > 0) return false;
    if (this.over) this.refuse();
    return true;
  }
}

/**
 * Closes, every so often, each connection whose answers wait and of which not one byte
 * has been taken for `sendTimeoutMs`: its client is not reading (what the kernel took is
 * what was written less what is still in the socket's buffer). Returns its stop.
 */
export function closeNotReading(sockets: Iterable<Socket>, sendTimeoutMs: number, closed: ConnectionCounts['closed']): () => void {
  const progress = new WeakMap<Socket, { sent: number; since: number }>();
  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (const socket of sockets) {
        if (socket.writableLength === 0) {
          progress.delete(socket);
          continue;
        }
        const sent = socket.bytesWritten - socket.writableLength;
        const last = progress.get(socket);
        if (!last || sent !== last.sent) progress.set(socket, { sent, since: now });
        else if (now - last.since >= sendTimeoutMs) {
          closed.not_reading++;
          socket.destroy();
        }
      }
    },
    Math.min(1_000, Math.ceil(sendTimeoutMs / 4)),
  );
  sweep.unref();
  return () => clearInterval(sweep);
}
