// The pipelining drill (npm run drill:pipelining; CI runs it), on the harness of harness.ts:
// 200 connections from 25 addresses (8 each, under the per-address cap), each writing
// pipelined `GET /healthz` (20,000, then again) as fast as the service takes them and never
// reading an answer, reconnecting the moment one is closed, for 25 s; meanwhile another
// client on 127.0.0.1 sends `GET /healthz` and `GET /pets/5` in turn, one every 50 ms, and
// a request sent the moment the attacker is gone must be answered within a second.
import { measureMs, runDrill } from './harness';

runDrill(
  'pipelining',
  [
    {
      name: '200 connections from 25 addresses, 20,000 pipelined requests each, never read',
      attack: 'pipelining',
      connections: 200,
      addresses: Array.from({ length: 25 }, (_, i) => `127.34.2.${i + 1}`),
      attackMs: measureMs(25_000),
      measureMs: measureMs(25_000),
      recoveryMs: 1_000,
    },
  ],
  // /pets/5 ten times a second: 250 an attack, under the default 600 a minute per address
  // and account even when an attempt is run again 10 s later.
  { address: '127.0.0.1', paths: ['/healthz', '/pets/5'], everyMs: 50 },
).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
