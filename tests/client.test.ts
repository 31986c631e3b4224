// The typed client's example (client/example.ts), run against a real server: what a
// consumer of client/ does, so the client and its README example stay true.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { example } from '../client/example';
import { startServer, type ServerProcess } from './server-process';

describe('client/example.ts against a real server', () => {
  let dir: string;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('signs up, gets a key, lists pets, orders, reads the order back and meets a typed 409', async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-client-'));
    // A new database gets the demo catalogue, with stock to order from.
    server = await startServer({ DATABASE_PATH: join(dir, 'petstore.db') });
    const lines: string[] = [];
    await example(server.url, (line) => lines.push(line));
    expect(lines).toEqual([
      expect.stringMatching(/^pet \d+: .+ \(available\)$/),
      expect.stringMatching(/^order \d+: 1 x pet \d+, complete: false$/),
      expect.stringMatching(/^refused with 409 insufficient_stock: /),
    ]);
  }, 60_000);
});
