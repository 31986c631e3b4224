// The bench's open-loop generator (scripts/bench/open-loop.c) counts each request's
// latency from when it was due: a server that stalls for 200 ms makes every request due
// during the stall late, not only the ones in flight (the coordinated omission a closed
// loop makes). Linux only: the generator uses epoll and timerfd.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { OpenLoopRun } from '../scripts/bench/open-loop';

const linux = process.platform === 'linux';

(linux ? describe : describe.skip)('the open-loop generator', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-open-loop-test-'));
  const binary = join(dir, 'open-loop');
  const request = join(dir, 'get.http');
  let server: Server;
  let port = 0;
  let answered = 0;
  /** The answer after which the server's event loop is held for 200 ms, as a long collection would. */
  let stallAfter = Infinity;

  beforeAll(async () => {
    const cc = spawnSync('cc', ['-O2', '-o', binary, join(__dirname, '..', 'scripts', 'bench', 'open-loop.c')], { encoding: 'utf8' });
    if (cc.status !== 0) throw new Error(`cc failed (scripts/ensure-cc.sh installs one): ${cc.stderr ?? cc.error?.message}`);
    writeFileSync(request, 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': 2 });
      res.end('{}');
      if (++answered === stallAfter) {
        const until = Date.now() + 200;
        while (Date.now() < until); // the loop held: nothing is read or answered meanwhile
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  const run = async (rate: number, seconds: number) => {
    const { stdout } = await promisify(execFile)(binary, ['127.0.0.1', String(port), String(rate), String(seconds), '16', request]);
    return JSON.parse(stdout) as OpenLoopRun;
  };

  it('offers every request at the rate and answers them all when the server keeps up', async () => {
    const r = await run(200, 1);
    expect(r).toMatchObject({ offered: 200, answered: 200, errors: 0, non2xx: 0, unanswered: 0 });
    expect(r.p50).toBeGreaterThan(0);
    expect(r.p50).toBeLessThan(50);
  });

  it('counts the requests due during a 200 ms stall as late, from when each was due', async () => {
    answered = 0;
    stallAfter = 100;
    const r = await run(500, 2);
    stallAfter = Infinity;
    expect(r).toMatchObject({ offered: 1000, answered: 1000, errors: 0, unanswered: 0 });
    // Some 100 requests were due during the stall (10%): their latencies spread from 0 to
    // 200 ms, so the 95th percentile is near 100 ms. Counted from when each was sent, only
    // those in flight on the 16 connections (1.6%) would be late, and p95 a fraction of a ms.
    expect(r.p99).toBeGreaterThan(150);
    expect(r.p95).toBeGreaterThan(50);
    expect(r.p50).toBeLessThan(50);
  });
});
