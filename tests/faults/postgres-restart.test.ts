// PostgreSQL stopped (`pg_ctl stop -m fast`) and started again under a running service
// taking orders and messages from 12 connections: the process lives through it, answers
// 503 `unavailable` at once while the database is gone, serves again without a restart
// when it is back, and nothing it acknowledged is missing.
import { Client } from 'pg';
import { eventually, startServer, type ServerProcess } from '../../scripts/server-process';
import { call, loadEnv, setUp, type Reply } from '../write-load';
import { createAdminDatabase, startPostgres, type ThrowawayPostgres } from './postgres';
import { describeOnDebian } from '../platform';

let pg: ThrowawayPostgres | undefined;
let server: ServerProcess | undefined;

describeOnDebian("Debian's PostgreSQL server binaries (/usr/lib/postgresql)", 'PostgreSQL stopped and started', () => {
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await pg?.remove();
  }, 30_000);

  const initialStock = 1_000_000;

  interface Answer {
    kind: 'orders' | 'messages';
    at: number;
    ms: number;
    status: number | 'no answer';
    code?: unknown;
    retryAfter?: string | null;
  }

  async function sqlOn(url: string, text: string): Promise<number> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      return Number((await client.query<{ n: string }>(text)).rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  it('answers 503 unavailable at once while PostgreSQL is down, serves again when it returns, and loses nothing acknowledged', async () => {
    pg = await startPostgres();
    const url = await createAdminDatabase(pg, 'petstore_restart');
    // Messages are delivered as soon as they are queued: the delivery worker runs through the outage too.
    server = await startServer({ ...loadEnv, DATABASE_URL: url, MESSAGE_DELIVERY_DELAY_MS: '0' }, 60_000);
    const base = server.url;
    const { customerKey, petId } = await setUp(base, initialStock);

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
        // No answer at all: counted as an outcome the client cannot know.
      }
      answers.push({
        kind,
        at,
        ms: Date.now() - at,
        status: res?.status ?? 'no answer',
        code: res?.body.code,
        retryAfter: res?.headers.get('retry-after'),
      });
    };
    const loop = async (i: number) => {
      // Bounded: the phases below end it long before this many requests.
      for (let n = 0; running && n < 20_000; n++) {
        await send((i + n) % 2 === 0 ? 'orders' : 'messages');
        // Paced while refused, so that the outage is not a busy loop on two cores.
        if (typeof answers.at(-1)?.status !== 'number' || answers.at(-1)?.status === 503) await new Promise((r) => setTimeout(r, 20));
      }
    };
    const load = Promise.all(Array.from({ length: 12 }, (_, i) => loop(i)));

    await new Promise((r) => setTimeout(r, 2_000));
    const stopping = Date.now();
    await pg.stop();
    const stopped = Date.now();
    await new Promise((r) => setTimeout(r, 3_000));
    const readyDuringOutage = await call(base, 'GET', '/readyz');
    const starting = Date.now();
    await pg.start();
    const started = Date.now();
    const firstServed = await eventually(
      () => answers.find((a) => a.at >= started && typeof a.status === 'number' && a.status < 300)?.at,
      15_000,
    );
    await new Promise((r) => setTimeout(r, 2_000));
    running = false;
    await load;

    // The process lived through it.
    expect(server.child.exitCode).toBeNull();
    expect(server.child.signalCode).toBeNull();
    expect(readyDuringOutage.status).toBe(503);
    expect(readyDuringOutage.body.code).toBe('unavailable');
    expect((await call(base, 'GET', '/readyz')).status).toBe(200);

    const ok = (a: Answer) => (a.kind === 'orders' ? a.status === 201 : a.status === 202);
    const refused = (a: Answer) => a.status === 503 && a.code === 'unavailable' && a.retryAfter !== null;
    // Nothing but acknowledgements and refusals in the Error shape with Retry-After.
    expect(answers.filter((a) => !ok(a) && !refused(a))).toEqual([]);
    // Sent while the server was down: refused, and fast (the pool's connection timeout is
    // DATABASE_TIMEOUT_MS; a refusal comes from a failed probe, not from each request waiting for one).
    const duringOutage = answers.filter((a) => a.at >= stopped && a.at + a.ms < starting);
    expect(duringOutage.length).toBeGreaterThan(50);
    expect(duringOutage.filter((a) => !refused(a))).toEqual([]);
    const slowest = Math.max(...duringOutage.map((a) => a.ms));
    expect(slowest).toBeLessThan(2_000);
    const recoveredMs = firstServed - started;
    expect(recoveredMs).toBeLessThan(5_000);

    // Every message queued is delivered once the database is back: the worker survived.
    await eventually(
      async () => ((await sqlOn(url, "select count(*) as n from messages where status = 'queued'")) === 0 ? true : undefined),
      15_000,
    );
    expect(await server.stop()).toBe(0);

    // A 2xx means committed, so every acknowledged write is stored. A 503 may still have
    // been stored: a connection that broke while its COMMIT was under way leaves the
    // outcome unknown to the service (PostgreSQL may have committed before it went), so the
    // rows may exceed the acknowledgements by at most the refusals (and unanswered requests).
    const log = server.log();
    const counts = { orders: 0, messages: 0 };
    for (const kind of ['orders', 'messages'] as const) {
      const acknowledged = answers.filter((a) => a.kind === kind && ok(a)).length;
      const ambiguous = answers.filter((a) => a.kind === kind && !ok(a)).length;
      const stored = await sqlOn(url, `select count(*) as n from ${kind}`);
      counts[kind] = stored;
      expect({ kind, stored: stored >= acknowledged }).toEqual({ kind, stored: true });
      expect({ kind, stored: stored <= acknowledged + ambiguous }).toEqual({ kind, stored: true });
    }
    // The stock adds up: what was sold plus what is left is what there was.
    const sold = await sqlOn(url, 'select coalesce(sum(quantity), 0) as n from orders');
    const left = await sqlOn(url, `select quantity as n from inventory where pet_id = ${petId}`);
    expect(sold + left).toBe(initialStock);

    // Said once, where the outage began and where it ended; never a crash.
    expect(log.match(/PostgreSQL does not answer/g)?.length).toBe(1);
    expect(log.match(/PostgreSQL answers again/g)?.length).toBe(1);
    expect(log).not.toMatch(/"level":60/);

    const count = (p: (a: Answer) => boolean) => answers.filter(p).length;
    console.log(
      `PostgreSQL restart: ${answers.length} writes sent, ${count(ok)} acknowledged, ${count(refused)} refused 503 ` +
        `(${duringOutage.length} during the ${starting - stopped} ms outage, slowest ${slowest} ms), ${count((a) => a.status === 'no answer')} unanswered; ` +
        `stored ${counts.orders} orders and ${counts.messages} messages; pg_ctl stop took ${stopped - stopping} ms, start ${started - starting} ms; ` +
        `first 2xx ${recoveredMs} ms after PostgreSQL was up`,
    );
  }, 120_000);
});
