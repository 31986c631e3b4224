import type { RequestHandler } from 'express';
import request from 'supertest';
import { operationTable } from '../generated/operations';
import type { DeprecatedCallLog } from '../server/deprecation/call-log';
import { warmUp, warmUpUrls, type WarmUpState } from '../server/pipeline/warm-up';
import type { OperationEntry } from '../server/spec';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startServer } from '../scripts/server-process';
import { captureLog, customer, expectError, setupApp, testConfig } from './helpers';

const operations = operationTable as Record<string, OperationEntry>;

describe('the warm-up before ready', () => {
  it('runs every GET operation but the probes, with its path parameters filled', () => {
    const urls = warmUpUrls(operations);
    const gets = Object.values(operations).filter((op) => op.method === 'get' && op.tag !== 'service');
    expect(urls).toHaveLength(gets.length);
    expect(urls).toContain('/pets/1');
    expect(urls).toContain('/pets');
    expect(urls.some((url) => url.includes('{'))).toBe(false);
    expect(urls).not.toContain('/readyz');
  });

  it('serves its GETs through the app without a key, a log line, a rate-limit hit or a deprecated call counted', async () => {
    const counted: string[] = [];
    const deprecatedCalls: DeprecatedCallLog = {
      add: (operation) => void counted.push(operation),
      flush: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
    const { log, lines } = captureLog('info');
    const t = setupApp({ log, deprecatedCalls, config: testConfig({ LOG_LEVEL: 'info', RATE_LIMIT_PER_MINUTE: '1000' }) });
    const buyer = await customer(t.app);
    const remaining = async () => {
      const res = await request(t.app).get('/pets?ids=1').set(buyer.auth).expect(200);
      return res.headers.ratelimit as string;
    };
    const before = await remaining();
    const linesBefore = lines().length;

    const done = await warmUp(t.app, warmUpUrls(operations), { budgetMs: 10_000, rounds: 3 });

    expect(done.rounds).toBe(3);
    expect(done.requests).toBe(3 * warmUpUrls(operations).length);
    // Served (a found pet or not, a list, a malformed id), never refused for a key or a limit.
    for (const status of Object.keys(done.statuses)) expect(['200', '400', '404']).toContain(status);
    expect(lines().slice(linesBefore)).toEqual([]);
    expect(counted).toEqual([]);
    // The client's budgets are untouched: one less after its one request, nothing for the warm-up's.
    const left = (header: string, limiter: string) => Number(new RegExp(`"${limiter}"; r=(\\d+)`).exec(header)?.[1]);
    const after = await remaining();
    expect(left(after, 'address')).toBe(left(before, 'address') - 1);
    expect(left(after, 'account')).toBe(left(before, 'account') - 1);
  });

  it('leaves a request from outside to the usual checks', async () => {
    const t = setupApp();
    await warmUp(t.app, ['/pets/1'], { budgetMs: 10_000, rounds: 1 });
    expectError(await request(t.app).get('/pets/1'), 401, 'unauthorized');
  });

  it('keeps /readyz at 503 unavailable until it is over, while /healthz answers, and logs no error for it', async () => {
    const warming: WarmUpState = { pending: true };
    const { log, lines } = captureLog('info');
    const t = setupApp({ warmUp: warming, log });
    expectError(await request(t.app).get('/readyz'), 503, 'unavailable');
    await request(t.app).get('/healthz').expect(200);
    warming.pending = false;
    await request(t.app).get('/readyz').expect(200);
    // A balancer polls /readyz every few seconds: a not-ready answer is designed, not a failure.
    expect(lines().filter((line) => (line.level as number) >= 50)).toEqual([]);
  });

  it("lets the event loop turn twice before each of the first round's requests, which compile the validators, so that a client is answered meanwhile", async () => {
    const t = setupApp();
    const seen: string[] = [];
    // A connection accepted in one turn is read and answered in the next: two turns.
    const twoTurns = (what: string) => setImmediate(() => setImmediate(() => seen.push(what)));
    const app: RequestHandler = (req, res, next) => {
      seen.push(req.url);
      twoTurns(`after ${req.url}`);
      t.app(req, res, next);
    };
    twoTurns('before any');
    await warmUp(app, ['/pets/1', '/pets', '/categories'], { budgetMs: 0, rounds: 1 });
    expect(seen.slice(0, 6)).toEqual(['before any', '/pets/1', 'after /pets/1', '/pets', 'after /pets', '/categories']);
  });

  it("builds the validator's request and response checkers, each in a step of its own after two turns, before its first request", async () => {
    // The validator makes its Ajv instances here, at its first request unless set up before.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the validator's own module, spied on
    const ajv = require('express-openapi-validator/dist/framework/ajv') as Record<
      'createRequestAjv' | 'createResponseAjv',
      (...args: unknown[]) => unknown
    >;
    const made: string[] = [];
    const spies = (['createRequestAjv', 'createResponseAjv'] as const).map((name) => {
      const real = ajv[name];
      return jest.spyOn(ajv, name).mockImplementation((...args: unknown[]) => {
        made.push(name);
        return real(...args);
      });
    });
    try {
      const warming: WarmUpState = { pending: true };
      const t = setupApp({ warmUp: warming });
      const seen: string[] = [];
      const twoTurns = (what: string) => setImmediate(() => setImmediate(() => seen.push(what)));
      const steps = (warming.setUp ?? []).map((step, i) => async () => {
        seen.push(`set-up ${i}`);
        await step();
        seen.push(`made ${made.join(', ')}`);
        twoTurns(`after set-up ${i}`);
      });
      const app: RequestHandler = (req, res, next) => {
        seen.push(req.url);
        t.app(req, res, next);
      };
      twoTurns('before any');
      await warmUp(app, ['/pets/1'], { budgetMs: 0, rounds: 1, setUp: steps });
      const made0 = `made ${made.filter((name) => name === 'createRequestAjv').join(', ')}`;
      expect(made0).toMatch(/^made createRequestAjv/);
      expect(seen).toEqual([
        'before any',
        'set-up 0',
        made0,
        'after set-up 0',
        'set-up 1',
        `${made0}, createResponseAjv`,
        'after set-up 1',
        '/pets/1',
      ]);
      // The first request found them made, and made none.
      expect(`made ${made.join(', ')}`).toBe(`${made0}, createResponseAjv`);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it('runs its first round whatever the budget, then rounds only within it', async () => {
    const t = setupApp();
    const done = await warmUp(t.app, ['/pets'], { budgetMs: 0, rounds: 100 });
    expect(done.rounds).toBe(1);
  });
});

describe('a started service', () => {
  it('listens with /readyz at 503 while it warms up, then says ready and logs what it did', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'warm-up-'));
    const server = await startServer({ DATABASE_PATH: join(dir, 'petstore.db'), WARM_UP_MS: '300' });
    try {
      const first = await fetch(`${server.url}/readyz`);
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
      // Ready once the warm-up is over: the line comes first.
      await eventually(() => (/Warmed up: \d+ GETs/.test(server.log()) ? true : undefined), 20_000);
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
      const line = server
        .log()
        .split('\n')
        .find((l) => l.includes('Warmed up'));
      const done = JSON.parse(line as string) as { rounds: number; statuses: Record<string, number> };
      expect(done.rounds).toBeGreaterThanOrEqual(1);
      expect(Object.keys(done.statuses).every((status) => ['200', '400', '404'].includes(status))).toBe(true);
      // The first probe came before the warm-up was over (its first round takes seconds here).
      expect(first.status).toBe(503);
      expect(((await first.json()) as { code: string }).code).toBe('unavailable');
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
