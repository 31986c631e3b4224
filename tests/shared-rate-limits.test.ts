// Rate limits shared by processes through leases of each client's window budget
// (server/security/rate-limit-store.ts; docs/deployment.md, "Shared rate limits"): they answer as
// the in-memory counters do, a busy client costs the database a write per many requests,
// and three instances on one PostgreSQL hold one limit exactly.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import request from 'supertest';
import type { Storage } from '../domain/storage';
import { memoryStores } from '../server/security/rate-limit';
import { createRateLimitStore } from '../server/security/rate-limit-store';
import { startServer, type ServerProcess } from '../scripts/server-process';
import { createPgDatabase, customer, password, setupApp, testDatabaseUrl, testStorage, uniqueEmail } from './helpers';

describe('in one process, the leases answer as the in-memory counters do', () => {
  /** Runs `scenario` on an app with each store and expects the same answers from both. */
  async function sameAnswers(env: Record<string, string>, scenario: (app: ReturnType<typeof setupApp>['app']) => Promise<string[]>) {
    const memory = await scenario(setupApp({ env, rateLimitStores: memoryStores }).app);
    const { storage } = testStorage();
    const leases = await scenario(setupApp({ storage, env, rateLimitStores: (name) => createRateLimitStore(storage, name) }).app);
    expect(leases).toEqual(memory);
    return memory;
  }
  // The reset (t=) and Retry-After count seconds from each app's own first request.
  const seen = (res: request.Response) =>
    [res.status, res.headers['ratelimit'], res.headers['ratelimit-policy'], res.headers['retry-after'] && 'Retry-After']
      .join(' ')
      .replace(/t=\d+/g, 't=T');

  it('past leases of several tokens: the same statuses, RateLimit, RateLimit-Policy and Retry-After', async () => {
    // A limit of 100 leases up to 5 tokens at a time.
    const answers = await sameAnswers({ RATE_LIMIT_PER_MINUTE: '100', RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '105' }, async (app) => {
      const me = await customer(app, uniqueEmail('same'));
      const out: string[] = [];
      for (let i = 0; i < 110; i++) out.push(seen(await request(app).get('/api-keys').set(me.auth)));
      return out;
    });
    // The key creation was the account's first request: 99 more, then refusals.
    expect(answers.filter((a) => a.startsWith('200 '))).toHaveLength(99);
    expect(answers[98]).toMatch(/"account"; r=0;/);
    expect(answers[99]).toMatch(/^429 .*"account"; r=0; t=T.* Retry-After$/);
  });

  it('counting only failed logins: requests taken back spend nothing', async () => {
    const answers = await sameAnswers({ LOGIN_FAILURES_PER_ACCOUNT: '3' }, async (app) => {
      const me = await customer(app, uniqueEmail('logins'));
      const out: string[] = [];
      for (const pw of [password, 'guess', password, password, 'guess', password, 'guess', password, 'guess', password])
        out.push(seen(await request(app).post('/api-keys').auth(me.email, pw)));
      return out;
    });
    expect(answers.map((a) => a.slice(0, 3))).toEqual(['201', '401', '201', '201', '401', '201', '401', '429', '429', '429']);
  });

  it('counting every password check, right or wrong', async () => {
    const answers = await sameAnswers({ PASSWORD_CHECKS_PER_MINUTE: '4' }, async (app) => {
      const me = await customer(app, uniqueEmail('checks'));
      const out: string[] = [];
      for (const pw of [password, 'guess', password, password, 'guess'])
        out.push(seen(await request(app).post('/api-keys').auth(me.email, pw)));
      return out;
    });
    expect(answers.map((a) => a.slice(0, 3))).toEqual(['201', '401', '201', '429', '429']);
    expect(answers[3]).toMatch(/Retry-After$/);
  });

  it('counting only sign-ups that made an account', async () => {
    const answers = await sameAnswers({ SIGNUPS_PER_ADDRESS_PER_HOUR: '2' }, async (app) => {
      const taken = uniqueEmail('taken');
      const out: string[] = [];
      for (const email of [taken, taken, taken, uniqueEmail('signup'), uniqueEmail('signup')])
        out.push(seen(await request(app).post('/accounts').send({ email, password })));
      return out;
    });
    expect(answers.map((a) => a.slice(0, 3))).toEqual(['201', '409', '409', '201', '429']);
  });
});

describe('a busy client', () => {
  it('costs the shared store a write per many requests: 1,000 requests, at most 18 leases per limiter', async () => {
    // The real lease store on the real database, its statements counted on the way.
    const { storage } = testStorage();
    const leases = new Map<string, number>();
    const counted: Pick<Storage, 'takeRateLimitLease' | 'resetRateLimit'> = {
      takeRateLimitLease: (key, ...rest) => {
        const limiter = key.split(':')[0]!;
        leases.set(limiter, (leases.get(limiter) ?? 0) + 1);
        return storage.takeRateLimitLease(key, ...rest);
      },
      resetRateLimit: (key) => storage.resetRateLimit(key),
    };
    const { app } = setupApp({
      storage,
      env: { RATE_LIMIT_PER_MINUTE: '2000' },
      rateLimitStores: (name) => createRateLimitStore(counted, name),
    });
    const me = await customer(app, uniqueEmail('busy'));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const statuses: number[] = [];
      // 16 requests in flight at a time, as a busy client's connection pool sends them.
      let sent = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (sent < 1000) {
            sent++;
            const res = await fetch(`${base}/api-keys`, { headers: { Authorization: `Bearer ${me.key}` } });
            await res.arrayBuffer();
            statuses.push(res.status);
          }
        }),
      );
      expect(statuses).toEqual(Array(1000).fill(200));
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    // Leases of 1, 2, 4 ... 64 tokens, then 100 (a twentieth of 2,000): 7 leases for the
    // first 127 requests and one per 100 after them, 16 for the 1,002 requests (sign-up and
    // key creation included) of each limiter; one write per request would be 1,002.
    expect(leases.get('address')).toBeLessThanOrEqual(18);
    expect(leases.get('account')).toBeLessThanOrEqual(18);
    expect(leases.get('address')).toBeGreaterThanOrEqual(16);
  }, 60_000);
});

// Three instances as a deployment runs them (dist/server/main.js, one process each), on one
// PostgreSQL (when the suite runs with TEST_DATABASE_URL), a client's requests spread
// round-robin over them.
if (testDatabaseUrl)
  describe('three instances on one PostgreSQL', () => {
    // Leases of up to 10 tokens; every request comes from one address, whose own limit is out of the way.
    const limit = 200;
    const servers: ServerProcess[] = [];
    let url: string;
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
    }, 60_000);

    it(`let exactly ${limit} requests of one client through, in total, whichever instance each lands on`, async () => {
      url = await createPgDatabase(testDatabaseUrl!, `petstore_limits_${randomBytes(6).toString('hex')}`);
      const env = {
        DATABASE_URL: url,
        RATE_LIMIT_PER_MINUTE: String(limit),
        RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '1000000',
        SEED_DEMO_DATA: 'false',
      };
      servers.push(...(await Promise.all([startServer(env, 60_000), startServer(env, 60_000), startServer(env, 60_000)])));
      const bases = servers.map((s) => s.url);
      const email = uniqueEmail('three');
      const signUp = await fetch(`${bases[0]}/accounts`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email, password }),
      });
      const { id } = (await signUp.json()) as { id: number };
      const made = await fetch(`${bases[1]}/api-keys`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` },
      });
      const { key } = (await made.json()) as { key: string };

      // Three times the limit, 12 in flight at a time, round-robin: every instance is asked
      // until it refuses, so none is left holding tokens.
      const answers: Array<{ status: number; retryAfter: string | null; rateLimit: string | null }> = [];
      let sent = 0;
      await Promise.all(
        Array.from({ length: 12 }, async () => {
          while (sent < limit * 3) {
            const base = bases[sent++ % bases.length]!;
            const res = await fetch(`${base}/api-keys`, { headers: { Authorization: `Bearer ${key}` } });
            await res.arrayBuffer();
            answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), rateLimit: res.headers.get('ratelimit') });
          }
        }),
      );
      // The key creation was the account's first request of the window.
      expect(answers.filter((a) => a.status === 200)).toHaveLength(limit - 1);
      const refused = answers.filter((a) => a.status === 429);
      expect(refused).toHaveLength(limit * 2 + 1);
      for (const a of refused) {
        expect(Number(a.retryAfter)).toBeGreaterThan(0);
        expect(a.rateLimit).toMatch(/"account"; r=0; t=\d+/);
      }
      // And the database granted the instances exactly the limit.
      const client = new Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query('select hits from rate_limits where key = $1', [`account:account:${id}`]);
        expect(rows).toEqual([{ hits: limit }]);
      } finally {
        await client.end();
      }
    }, 120_000);
  });
