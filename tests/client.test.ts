// The typed client's example (client/example.ts), run against a real server: what a
// consumer of client/ does, so the client and its README example stay true.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { example } from '../client/example';
import { startServer, type ServerProcess } from '../scripts/server-process';

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

describe('client/example.ts against a service that leaves out an optional Order field', () => {
  // Order marks no field required (the interface's rule): the example checks for the id it
  // needs and fails saying so, where a `!` would have sent GET /store/orders/undefined.
  const answers: Record<string, [number, unknown]> = {
    'POST /accounts': [201, { id: 1, email: 'a@example.com', role: 'customer', createdAt: '2026-01-01T00:00:00.000Z' }],
    'POST /api-keys': [
      201,
      { id: 1, key: `ps_live_${'a'.repeat(43)}`, prefix: 'ps_live_', lastFour: 'aaaa', createdAt: '2026-01-01T00:00:00.000Z' },
    ],
    'GET /store/inventory': [200, [{ petId: 1, quantity: 5, status: 'available' }]],
    'GET /pets': [200, [{ id: 1, name: 'Rex', categoryId: 1 }]],
    'POST /store/orders': [201, { petId: 1, quantity: 1, complete: false }],
  };
  const server = createServer((req, res) => {
    const [status, body] = answers[`${req.method} ${(req.url ?? '').split('?')[0]}`] ?? [
      404,
      { code: 'not_found', message: 'Not found', status: 404 },
    ];
    req.resume();
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
  });
  beforeAll(() => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)));
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('fails clearly on an order without an id, after listing a pet without a status', async () => {
    const lines: string[] = [];
    const { port } = server.address() as AddressInfo;
    await expect(example(`http://127.0.0.1:${port}`, (line) => lines.push(line))).rejects.toThrow(
      'order: the placed order came back without an id',
    );
    expect(lines).toEqual(['pet 1: Rex (no status given)']);
  });
});
