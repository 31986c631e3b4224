// New PostgreSQL connections find their host's address through a lookup that remembers
// the last one (db/pg/connection.ts): a name server that fails or stalls does not fail
// them. The resolver is handed in here, since a real one cannot be made to stall on cue;
// the sockets, the loopback servers and PostgreSQL (on CI's PostgreSQL pass) are real.
import type { LookupAddress } from 'node:dns';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type LookupFunction, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { connectionSocket, rememberingLookup } from '../db/pg/connection';
import { testDatabaseUrl } from './helpers';

type Answer = { error?: Error; addresses?: LookupAddress[] } | 'never';

/** A resolver that gives `answers` in turn (the last one again once they run out), and counts what it is asked. */
function resolver(...answers: Answer[]) {
  const asked: string[] = [];
  const resolve = (hostname: string, _options: unknown, callback: (error: Error | null, addresses: LookupAddress[]) => void) => {
    asked.push(hostname);
    const answer = answers.length > 1 ? (answers.shift() as Answer) : answers[0];
    if (answer === 'never' || answer === undefined) return;
    setImmediate(() => callback(answer.error ?? null, answer.addresses ?? []));
  };
  return { resolve, asked };
}

const found = (address: string): Answer => ({ addresses: [{ address, family: 4 }] });
const notFound = (): Answer => ({ error: Object.assign(new Error('getaddrinfo EAI_AGAIN db'), { code: 'EAI_AGAIN' }) });

/** One lookup, as net.connect asks it (`all`, as its family autoselection does, or not). */
function ask(lookup: LookupFunction, all: boolean): Promise<{ error: Error | null; address: string | LookupAddress[]; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => lookup('db', { all }, (error, address) => resolve({ error, address, ms: performance.now() - started })));
}

describe('the lookup new PostgreSQL connections use', () => {
  it('answers what the resolver finds, as one address or all of them', async () => {
    const { resolve } = resolver(found('10.0.0.7'));
    const lookup = rememberingLookup(200, resolve);
    expect(await ask(lookup, false)).toMatchObject({ error: null, address: '10.0.0.7' });
    expect(await ask(lookup, true)).toMatchObject({ error: null, address: [{ address: '10.0.0.7', family: 4 }] });
  });

  it('fails as the resolver does for a host it has never found', async () => {
    const { resolve } = resolver(notFound());
    const { error } = await ask(rememberingLookup(200, resolve), false);
    expect(error).toMatchObject({ code: 'EAI_AGAIN' });
  });

  it("takes the last address at once when the resolver fails, and the resolver's new one after", async () => {
    const { resolve } = resolver(found('10.0.0.7'), notFound(), found('10.0.0.8'));
    const lookup = rememberingLookup(5_000, resolve);
    await ask(lookup, false);
    const failed = await ask(lookup, false);
    expect(failed).toMatchObject({ error: null, address: '10.0.0.7' });
    expect(failed.ms).toBeLessThan(1_000);
    expect(await ask(lookup, false)).toMatchObject({ error: null, address: '10.0.0.8' });
  });

  it('takes the last address after its wait while the resolver does not answer, and asks it no more meanwhile', async () => {
    const { resolve, asked } = resolver(found('10.0.0.7'), 'never');
    const lookup = rememberingLookup(150, resolve);
    await ask(lookup, false);
    const stalled = await Promise.all([ask(lookup, false), ask(lookup, true), ask(lookup, false)]);
    for (const { error, ms } of stalled) {
      expect(error).toBeNull();
      expect(ms).toBeGreaterThanOrEqual(140);
    }
    expect(stalled.map((s) => s.address)).toEqual(['10.0.0.7', [{ address: '10.0.0.7', family: 4 }], '10.0.0.7']);
    // The first lookup, then one for the three that came while it stalled.
    expect(asked).toHaveLength(2);
  });
});

describe("a new PostgreSQL connection's socket", () => {
  let server: Server;
  let dir: string;
  afterEach(async () => {
    server?.close();
    await once(server, 'close').catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('connects to a host by name, through the lookup', async () => {
    server = createServer((socket) => socket.end('hello')).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const socket = connectionSocket();
    socket.connect(port, 'localhost');
    const [data] = (await once(socket, 'data')) as [Buffer];
    expect(data.toString()).toBe('hello');
    socket.destroy();
  });

  it('connects to a Unix socket by its path', async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-pg-lookup-'));
    const path = join(dir, '.s.PGSQL.5432');
    server = createServer((socket) => socket.end('hello')).listen(path);
    await once(server, 'listening');
    const socket = connectionSocket();
    (socket.connect as (path: string) => unknown)(path);
    const [data] = (await once(socket, 'data')) as [Buffer];
    expect(data.toString()).toBe('hello');
    socket.destroy();
  });

  // On CI's PostgreSQL pass (TEST_DATABASE_URL), whose URL names the server by address.
  const pgUrl = testDatabaseUrl;
  if (pgUrl)
    it('reaches PostgreSQL by name (its host as localhost)', async () => {
      const url = new URL(pgUrl);
      url.hostname = 'localhost';
      const client = new Client({ connectionString: url.toString(), stream: connectionSocket });
      await client.connect();
      try {
        expect((await client.query<{ one: number }>('select 1 as one')).rows[0]?.one).toBe(1);
      } finally {
        await client.end();
      }
    });
});
