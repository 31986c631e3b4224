// The slowloris drill (npm run drill:slowloris; CI runs it), on the harness of harness.ts:
// connections that never finish their headers, reconnecting the moment they are closed,
// while another client, from an address of its own, sends `GET /pets` eight times a second.
import { measureMs, runDrill, type Scenario } from './harness';

const attack = { attack: 'slowloris', attackMs: measureMs(30_000) + 5_000, measureMs: measureMs(30_000) } as const;
/**
 * The attacker's one address is 127.0.0.1, left to connect() to choose ports for: bound
 * first to an address, 15,000 sockets would exhaust the half of the ephemeral range Linux
 * gives bind() and stall in the kernel. The 25 are 127.34.2.x.
 */
const scenarios: Scenario[] = [
  { name: '1,100 connections from one address', connections: 1_100, addresses: ['127.0.0.1'], ...attack },
  { name: '15,000 connections from one address', connections: 15_000, addresses: ['127.0.0.1'], ...attack },
  {
    name: '5,000 connections from 25 addresses',
    connections: 5_000,
    addresses: Array.from({ length: 25 }, (_, i) => `127.34.2.${i + 1}`),
    ...attack,
  },
];

// Eight requests a second: under the default 600 a minute per address.
runDrill('slowloris', scenarios, { address: '127.34.0.1', paths: ['/pets?limit=5'], everyMs: 125 }).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
