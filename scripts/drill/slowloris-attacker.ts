// The attacker of the slowloris drill (scripts/drill/slowloris.ts), in a process of its own:
// holds CONNECTIONS connections to the service from the given loopback addresses, each
// sending a request line and then one header every HEADER_EVERY_MS, never ending its
// headers, and opening a new one the moment one is closed. Stops by itself after
// DURATION_MS, printing what it saw as one JSON line on stdout.
//
//   tsx scripts/drill/slowloris-attacker.ts PORT CONNECTIONS DURATION_MS ADDRESS[,ADDRESS...]
import { connect, type Socket } from 'node:net';

const [port = 0, connections = 0, durationMs = 0] = process.argv.slice(2, 5).map(Number);
const addresses = (process.argv[5] ?? '').split(',').filter(Boolean);
if (!port || !connections || !durationMs || addresses.length === 0) {
  console.error('usage: slowloris-attacker.ts PORT CONNECTIONS DURATION_MS ADDRESS[,ADDRESS...]');
  process.exit(2);
}
for (const address of addresses) {
  if (!address.startsWith('127.')) throw new Error(`${address}: the drill sends to and from loopback only`);
}
const headerEveryMs = Number(process.env.HEADER_EVERY_MS ?? 2_000);

const seen = { attempts: 0, connected: 0, closed: 0, timedOut408: 0, heldMax: 0, errors: {} as Record<string, number> };
let held = 0;
let stopping = false;
const sockets = new Set<Socket>();

function open(slot: number): void {
  if (stopping) return;
  seen.attempts++;
  const address = addresses[slot % addresses.length];
  // 127.0.0.1 is where connect() comes from unbound: its ports are then chosen per destination.
  const socket = connect({ port, host: '127.0.0.1', ...(address !== '127.0.0.1' && { localAddress: address }) });
  sockets.add(socket);
  let timer: NodeJS.Timeout | undefined;
  let connected = false;
  socket.on('connect', () => {
    connected = true;
    seen.connected++;
    held++;
    if (held > seen.heldMax) seen.heldMax = held;
    socket.write(`GET /pets HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris-drill/${slot}\r\n`);
    let n = 0;
    timer = setInterval(() => socket.write(`X-Slow-${n++}: ${'a'.repeat(8)}\r\n`), headerEveryMs);
  });
  socket.on('data', (chunk: Buffer) => {
    if (chunk.toString('latin1', 0, 12) === 'HTTP/1.1 408') seen.timedOut408++;
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    const code = err.code ?? 'unknown';
    seen.errors[code] = (seen.errors[code] ?? 0) + 1;
  });
  socket.on('close', () => {
    clearInterval(timer);
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
  console.log(JSON.stringify({ ...seen, cpuMs: Math.round((cpu.user + cpu.system) / 1000) }));
  process.exit(0);
}, durationMs);
