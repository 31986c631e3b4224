// PostgreSQL hung (every process of it stopped with SIGSTOP, for longer than the bound)
// under a running service taking orders and messages from 12 connections: no request
// waits longer than DATABASE_TIMEOUT_MS (3 s by default) and a little, every answer is an
// acknowledgement or 503 `unavailable` in the Error shape with Retry-After, the service
// serves again by itself after SIGCONT, and nothing it acknowledged is missing.
import { Client } from 'pg';
import { defaultDatabaseTimeoutMs } from '../../domain/storage';
import { eventually, startServer, type ServerProcess } from '../../scripts/server-process';
import { call, loadEnv, setUp, type Reply } from '../write-load';
import { createAdminDatabase, startPostgres, type ThrowawayPostgres } from './postgres';
import { describeOnDebian } from '../platform';

let pg: ThrowawayPostgres | undefined;
let server: ServerProcess | undefined;

describeOnDebian("Debian's PostgreSQL server binaries (/usr/lib/postgresql)", 'PostgreSQL hanging', () => {
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await pg?.remove();
  }, 30_000);

  /** What a loaded two-core machine may add to the bound: the event loop's own delay, the answer's trip. */
  const slackMs = 500;
  const hungMs = 8_000;

  interface Answer {
    kind: 'orders' | 'messages';
    at: number;
    ms: number;
    status: number | 'no answer';
    body?: Record<string, unknown>;
    retryAfter?: string | null;
  }

  async function count(url: string, text: string): Promise<number> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      return Number((await client.query<{ n: string }>(text)).rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  it(`no request waits longer than DATABASE_TIMEOUT_MS (${defaultDatabaseTimeoutMs} ms) while PostgreSQL hangs; 503 unavailable, then served again`, async () => {
    pg = await startPostgres();
    const url = await createAdminDatabase(pg, 'petstore_hung');
    // The default bound: nothing set.
    server = await startServer({ ...loadEnv, DATABASE_URL: url }, 60_000);
    const base = server.url;
    const { customerKey, petId } = await setUp(base, 1_000_000);

    const answers: Answer[] = [];
    let running = true;
    const send = async (kind: Answer['kind']) => {
      const at = Date.now();
      let res: Reply | undefined;
      try {
        res =
          kind === 'orders'
            ? await call(base, 'POST', '/store/orders', { key: customerKey, body: { petId, quantity: 1 } })
            : await call(base, 'POST', '/messages', { key: customerKey, body: { message: `m ${at}` } });
      } catch {
        // No answer at all: counted, and fails the test below.
      }
      answers.push({
        kind,
        at,
        ms: Date.now() - at,
        status: res?.status ?? 'no answer',
        body: res?.body,
        retryAfter: res?.headers.get('retry-after'),
      });
    };
    const loop = async (i: number) => {
      for (let n = 0; running && n < 20_000; n++) {
        await send((i + n) % 2 === 0 ? 'orders' : 'messages');
        // Paced while refused, so that the outage is not a busy loop on two cores.
        if (answers.at(-1)?.status !== 201 && answers.at(-1)?.status !== 202) await new Promise((r) => setTimeout(r, 20));
      }
    };
    const load = Promise.all(Array.from({ length: 12 }, (_, i) => loop(i)));

    await new Promise((r) => setTimeout(r, 2_000));
    const hungAt = Date.now();
    await pg.hang();
    await new Promise((r) => setTimeout(r, hungMs));
    pg.resume();
    const resumedAt = Date.now();
    const firstServed = await eventually(
      () => answers.find((a) => a.at >= resumedAt && (a.status === 201 || a.status === 202))?.at,
      15_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    running = false;
    await load;

    const ok = (a: Answer) => (a.kind === 'orders' ? a.status === 201 : a.status === 202);
    const refused = (a: Answer) =>
      a.status === 503 &&
      a.body?.code === 'unavailable' &&
      a.body.status === 503 &&
      typeof a.body.message === 'string' &&
      a.retryAfter !== null;
    expect(answers.filter((a) => !ok(a) && !refused(a))).toEqual([]);
    const whileHung = answers.filter((a) => a.at + a.ms >= hungAt && a.at < resumedAt);
    expect(whileHung.filter(refused).length).toBeGreaterThan(50);
    // The bound holds for every request, those caught in flight when PostgreSQL stopped too.
    const slowest = Math.max(...answers.map((a) => a.ms));
    expect(answers.filter((a) => a.ms > defaultDatabaseTimeoutMs + slackMs)).toEqual([]);
    expect(firstServed - resumedAt).toBeLessThan(5_000);
    expect(server.child.exitCode).toBeNull();
    expect(await server.stop()).toBe(0);

    // Every acknowledged write is stored (a 503 may have been: its COMMIT's outcome was unknown).
    for (const kind of ['orders', 'messages'] as const) {
      const acknowledged = answers.filter((a) => a.kind === kind && ok(a)).length;
      const stored = await count(url, `select count(*) as n from ${kind}`);
      expect({ kind, stored: stored >= acknowledged }).toEqual({ kind, stored: true });
    }
    expect(server.log()).not.toMatch(/"level":60/);
    const over1s = whileHung.filter((a) => a.ms > 1_000).length;
    console.log(
      `PostgreSQL hung ${hungMs} ms: ${answers.length} writes, ${answers.filter(ok).length} acknowledged, ` +
        `${answers.filter(refused).length} refused 503 (${whileHung.length} while hung, ${over1s} of them over 1 s), ` +
        `slowest ${slowest} ms (bound ${defaultDatabaseTimeoutMs} ms); first 2xx ${firstServed - resumedAt} ms after SIGCONT`,
    );
  }, 120_000);
});
