// Logs a person can operate with: one pino access line per request with what is needed
// to find it, no secrets, errors with their stack, and nothing an outsider can repeat
// into a flood.
import { mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { createLogger, logLines } from '../server/observability/log';
import { admin, captureLog, createPet, expectError, password, setupApp } from './helpers';

describe('the access log', () => {
  it('writes one line per request: request id, method, route template, operationId, status, duration, account', async () => {
    const logged = captureLog('info');
    const t = setupApp({ log: logged.log });
    const boss = await admin(t);
    const pet = await createPet(t.app, boss);
    const before = logged.lines().length;
    const res = await request(t.app).get(`/pets/${pet.id}`).set(boss.auth).set('X-Request-Id', 'trace-access-1');
    expect(res.status).toBe(200);
    const lines = logged.lines().slice(before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      requestId: 'trace-access-1',
      method: 'GET',
      route: '/pets/{petId}',
      operationId: 'getPetById',
      status: 200,
      accountId: boss.accountId,
      durationMs: expect.any(Number),
    });
  });

  it('never writes an Authorization header, a password or a key secret', async () => {
    const logged = captureLog('trace');
    const t = setupApp({ log: logged.log });
    const boss = await admin(t);
    const created = await request(t.app).post('/api-keys').auth(boss.email, password);
    await request(t.app).get('/pets').set(boss.auth).set('Cookie', 'session=cookie-secret');
    const text = logged.text();
    expect(text.length).toBeGreaterThan(0);
    for (const secret of [
      boss.key,
      created.body.key,
      password,
      Buffer.from(`${boss.email}:${password}`).toString('base64'),
      'cookie-secret',
    ]) {
      expect(text).not.toContain(secret);
    }
  });

  it('redacts secrets passed to the logger by mistake', () => {
    const logged = captureLog('info');
    logged.log.info({ req: { headers: { authorization: 'Bearer abc', cookie: 'c=1' } }, account: { password: 'pw', key: 'k' } }, 'oops');
    expect(logged.text()).not.toMatch(/Bearer abc|c=1|"pw"|"k"/);
  });

  it('logs a failure at error level with its stack', async () => {
    const logged = captureLog('info');
    const t = setupApp({
      log: logged.log,
      handlers: {
        listCategories: () => {
          throw new Error('boom underneath');
        },
      },
    });
    const boss = await admin(t);
    expectError(await request(t.app).get('/categories').set(boss.auth), 500, 'internal_error');
    const failure = logged.lines().find((line) => line.msg === 'request failed');
    expect(failure?.level).toBe(50);
    expect((failure?.err as { stack?: string }).stack).toMatch(/boom underneath\n\s+at /);
  });
});

describe('what an outsider can repeat', () => {
  it('writes one warn line when an address hits its limit, not one line per refused request', async () => {
    const logged = captureLog('info');
    const t = setupApp({ log: logged.log, env: { RATE_LIMIT_PER_MINUTE: '2' } });
    for (let i = 0; i < 2; i++) await request(t.app).get('/pets');
    const before = logged.lines().length;
    for (let i = 0; i < 20; i++) expectError(await request(t.app).get('/pets'), 429, 'rate_limited');
    const after = logged.lines().slice(before);
    expect(after).toEqual([expect.objectContaining({ level: 40, msg: 'rate limit reached', limiter: 'address' })]);
  });

  it('writes no line for probes', async () => {
    const logged = captureLog('info');
    const t = setupApp({ log: logged.log });
    for (let i = 0; i < 5; i++) expect((await request(t.app).get('/healthz')).status).toBe(200);
    expect(logged.lines()).toEqual([]);
  });
});

describe('how lines reach the file', () => {
  it('writes the lines one turn gathers in that turn, so that none wait in memory for a later one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-log-'));
    const path = join(dir, 'lines');
    const lines = logLines(openSync(path, 'w'));
    try {
      const log = createLogger('info', lines);
      // A busy turn's access lines, with no turn between them for a write to finish in.
      const count = 20_000;
      for (let i = 0; i < count; i++) log.info({ requestId: `request-${i}`, method: 'GET', status: 200 }, 'request');
      const writtenInTheTurn = statSync(path).size;
      lines.flushSync();
      // All but what had not yet gathered to a chunk (2 KiB) was on file before the turn ended.
      expect(statSync(path).size - writtenInTheTurn).toBeLessThan(2048 + 200);
      const written = readFileSync(path, 'utf8').split('\n').filter(Boolean);
      expect(written).toHaveLength(count);
      expect(JSON.parse(written[count - 1]!)).toMatchObject({ requestId: `request-${count - 1}` });
    } finally {
      await new Promise((resolve) => {
        lines.once('close', resolve);
        lines.end();
      });
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
