// server/entry.cjs: until the service first listens V8 does not tier code up, and from then
// on it does, for the warm-up and every request after it (docs/performance.md, "Start").
// A probe preloaded into the real service (tests/fixtures/tier-probe.cjs) runs a function
// of its own hot as the service listens and again just after, and reports V8's status of each.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../scripts/server-process';

const dir = mkdtempSync(join(tmpdir(), 'petstore-tiers-'));
const probe = join(__dirname, 'fixtures', 'tier-probe.cjs');

afterAll(() => rmSync(dir, { recursive: true, force: true }));

// %GetOptimizationStatus's bits (V8's runtime.h, OptimizationStatus).
const interpreted = 1 << 7;
const compiled = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 15); // optimised, Maglev, TurboFan, Sparkplug

async function statuses(nodeOptions: string, database: string): Promise<{ before: number; after: number; health: number }> {
  const server = await startServer({ DATABASE_PATH: join(dir, database), NODE_OPTIONS: `${nodeOptions} --require ${probe}` });
  try {
    const read = (moment: string) => Number(new RegExp(`^tier probe ${moment}: (\\d+)$`, 'm').exec(server.log())?.[1] ?? NaN);
    for (let waited = 0; Number.isNaN(read('after')) && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    const health = (await fetch(`${server.url}/healthz`)).status;
    return { before: read('before'), after: read('after'), health };
  } finally {
    await server.stop();
  }
}

it('tiers nothing up before the service listens, and hot code after', async () => {
  const { before, after, health } = await statuses('', 'tiers.db');
  expect(before & interpreted).toBe(interpreted);
  expect(before & compiled).toBe(0);
  expect(after & interpreted).toBe(0);
  expect(after & compiled).not.toBe(0);
  expect(health).toBe(200);
}, 60_000);

it('leaves the tiers as they are where Node is told of them (--jitless: never)', async () => {
  const { before, after, health } = await statuses('--jitless', 'jitless.db');
  expect(before & interpreted).toBe(interpreted);
  expect(after & interpreted).toBe(interpreted);
  expect(after & compiled).toBe(0);
  expect(health).toBe(200);
}, 60_000);
