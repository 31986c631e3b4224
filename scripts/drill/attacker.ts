// The attacker of the connection drills (scripts/drill/slowloris.ts, pipelining.ts), in a
// process of its own: holds CONNECTIONS connections to the service from the given loopback
// addresses, opening a new one the moment one is closed, each one
//   slowloris:  sending a request line and then one header every HEADER_EVERY_MS, never
//               ending its headers;
//   pipelining: writing pipelined `GET /healthz` (REQUESTS of them, then again) as fast as the
//               service takes them, and never reading an answer;
//   greedy:     keeping IN_FLIGHT (8) pipelined `GET PATH` (/healthz) in flight, reading every
//               answer and sending the next request the moment one is in: a client that does
//               everything right, only much of it. It checks that every answer is valid HTTP.
// Stops by itself after DURATION_MS, printing what it saw as one JSON line on stdout (with
// `perSecond`, the answers read in each second from its start).
//
//   tsx scripts/drill/attacker.ts slowloris|pipelining|greedy PORT CONNECTIONS DURATION_MS ADDRESS[,ADDRESS...]
import { connect, type Socket } from 'node:net';

const kind = process.argv[2];
const [port = 0, connections = 0, durationMs = 0] = process.argv.slice(3, 6).map(Number);
const addresses = (process.argv[6] ?? '').split(',').filter(Boolean);
if (
  (kind !== 'slowloris' && kind !== 'pipelining' && kind !== 'greedy') ||
  !port ||
  !connections ||
  !durationMs ||
  addresses.length === 0
) {
  console.error('usage: attacker.ts slowloris|pipelining|greedy PORT CONNECTIONS DURATION_MS ADDRESS[,ADDRESS...]');
  process.exit(2);
}
for (const address of addresses) {
  if (!address.startsWith('127.')) throw new Error(`${address}: the drill sends to and from loopback only`);
}
const headerEveryMs = Number(process.env.HEADER_EVERY_MS ?? 2_000);
const oneRequest = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
/** What one write holds: as much as one read of the service takes, or WRITE_REQUESTS requests. */
const pieceBytes = process.env.WRITE_REQUESTS ? Number(process.env.WRITE_REQUESTS) * oneRequest.length : 64 * 1024;
/** WRITE_EVERY_MS: a pause between writes, so that each read of the service holds one. */
const writeEveryMs = Number(process.env.WRITE_EVERY_MS ?? 0);
const flood = Buffer.from(oneRequest.repeat(Number(process.env.REQUESTS ?? 20_000)), 'latin1');

const greedyPath = process.env.PATH_REQUESTED ?? '/healthz';
const inFlight = Number(process.env.IN_FLIGHT ?? 8);
const greedyRequest = Buffer.from(`GET ${greedyPath} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 'latin1');

const seen = {
  attempts: 0,
  connected: 0,
  closed: 0,
  timedOut408: 0,
  heldMax: 0,
  errors: {} as Record<string, number>,
  answers: {} as Record<string, number>,
  invalid: 0,
};
/** The answers read in each second since the start. */
const perSecond: number[] = [];
const began = performance.now();
let held = 0;
let stopping = false;
const sockets = new Set<Socket>();

/** Slowloris: headers that never end. Returns what to do when the connection closes. */
function slowHeaders(socket: Socket, slot: number): () => void {
  socket.write(`GET /pets HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris-drill/${slot}\r\n`);
  let n = 0;
  const timer = setInterval(() => socket.write(`X-Slow-${n++}: ${'a'.repeat(8)}\r\n`), headerEveryMs);
  socket.on('data', (chunk: Buffer) => {
    if (chunk.toString('latin1', 0, 12) === 'HTTP/1.1 408') seen.timedOut408++;
  });
  return () => clearInterval(timer);
}

/**
 * Pipelining: the requests written as fast as the service takes them, a piece at a time (so
 * that a connection the service closes is seen at the next write), no answer ever read.
 */
function pipelined(socket: Socket): () => void {
  socket.pause();
  let offset = 0;
  const more = (err?: Error | null) => {
    if (err || socket.destroyed) return;
    if (offset >= flood.length) offset = 0;
    const piece = flood.subarray(offset, offset + pieceBytes);
    offset += piece.length;
    socket.write(piece, writeEveryMs ? () => setTimeout(more, writeEveryMs) : more);
  };
  more();
  return () => {};
}

/**
 * Greedy: IN_FLIGHT requests in flight, each answer read (status line, headers, a
 * Content-Length body) and followed at once by the next request. An answer that is not
 * HTTP/1.1 with a Content-Length is counted as invalid and the connection dropped.
 */
function greedy(socket: Socket): () => void {
  let buffered: Buffer = Buffer.alloc(0);
  socket.write(Buffer.concat(Array.from({ length: inFlight }, () => greedyRequest)));
  socket.on('data', (chunk: Buffer) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    let answered = 0;
    for (;;) {
      const end = buffered.indexOf('\r\n\r\n');
      if (end === -1) break;
      const head = buffered.toString('latin1', 0, end);
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1];
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
      if (!status || length === undefined) {
        seen.invalid++;
        socket.destroy();
        return;
      }
      if (buffered.length < end + 4 + Number(length)) break;
      buffered = buffered.subarray(end + 4 + Number(length));
      seen.answers[status] = (seen.answers[status] ?? 0) + 1;
      const second = Math.floor((performance.now() - began) / 1000);
      perSecond[second] = (perSecond[second] ?? 0) + 1;
      answered++;
      if (/\r\nconnection: *close/i.test(head)) {
        socket.end();
        return;
      }
    }
    if (answered > 0 && !socket.destroyed) {
      socket.write(answered === 1 ? greedyRequest : Buffer.concat(Array.from({ length: answered }, () => greedyRequest)));
    }
  });
  return () => {};
}

function open(slot: number): void {
  if (stopping) return;
  seen.attempts++;
  const address = addresses[slot % addresses.length];
  // 127.0.0.1 is where connect() comes from unbound: its ports are then chosen per destination.
  const socket = connect({ port, host: '127.0.0.1', ...(address !== '127.0.0.1' && { localAddress: address }) });
  sockets.add(socket);
  let connected = false;
  let stop = () => {};
  socket.on('connect', () => {
    connected = true;
    seen.connected++;
    held++;
    if (held > seen.heldMax) seen.heldMax = held;
    stop = kind === 'slowloris' ? slowHeaders(socket, slot) : kind === 'greedy' ? greedy(socket) : pipelined(socket);
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    const code = err.code ?? 'unknown';
    seen.errors[code] = (seen.errors[code] ?? 0) + 1;
  });
  socket.on('close', () => {
    stop();
    sockets.delete(socket);
    if (connected) held--;
    seen.closed++;
    // At once, as an attacker would: each place given up is taken again.
    setImmediate(open, slot);
  });
}

for (let slot = 0; slot < connections; slot++) open(slot);
console.log(JSON.stringify({ started: true }));

setTimeout(() => {
  stopping = true;
  for (const socket of sockets) socket.destroy();
  const cpu = process.cpuUsage();
  console.log(
    JSON.stringify({ ...seen, cpuMs: Math.round((cpu.user + cpu.system) / 1000), perSecond: Array.from(perSecond, (n) => n ?? 0) }),
  );
  process.exit(0);
}, durationMs);
