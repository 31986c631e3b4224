// docs/decisions.md, Passwords: argon2id for new hashes, old hashes verified by what they
// say they are and upgraded at login, no timing oracle, and a bound on hashes at once.
// Runs on PostgreSQL too (TEST_DATABASE_URL).
import { argon2, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import request from 'supertest';
import { hashPasswordAsReleased, scryptHashWith } from './fixtures/released-password-hash';
import { customer, expectError, password, setupApp, uniqueEmail, type TestApp } from './helpers';
import { itOnLinux } from './platform';
import { ApiError } from '../domain/errors';
import { HashGate, createPasswordHashing } from '../server/security/passwords';

const argon2Raw = (
  algorithm: 'argon2id' | 'argon2i' | 'argon2d',
  message: string,
  salt: Buffer,
  memory: number,
  passes: number,
  parallelism: number,
) =>
  new Promise<Buffer>((resolve, reject) =>
    argon2(algorithm, { message, nonce: salt, memory, passes, parallelism, tagLength: 32 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );

/** A PHC string made here, with crypto.argon2 directly, with the parameters given. */
async function argon2idHash(pw: string, memory: number, passes: number, parallelism = 1): Promise<string> {
  const salt = randomBytes(16);
  const hash = await argon2Raw('argon2id', pw, salt, memory, passes, parallelism);
  const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');
  return `$argon2id$v=19$m=${memory},t=${passes},p=${parallelism}$${b64(salt)}$${b64(hash)}`;
}

const storedHash = async (t: TestApp, email: string) =>
  ((await t.query('select password_hash from accounts where email = ?', email.toLowerCase()))[0]?.password_hash as string | undefined) ??
  '';

/** An account whose stored hash is `passwordHash`, as if an earlier release had written it. */
async function accountWithHash(t: TestApp, passwordHash: string, email = uniqueEmail('old')): Promise<string> {
  const made = await t.repos.accounts.create({ email, passwordHash, role: 'customer' });
  if (!made) throw new Error(`could not create ${email}`);
  return email;
}

const login = (t: TestApp, email: string, pw = password) => request(t.app).post('/api-keys').auth(email, pw);

const phcCurrent = /^\$argon2id\$v=19\$m=19456,t=2,p=1\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$/;

describe('new passwords', () => {
  const t = setupApp();

  it('are stored as argon2id at OWASP minimum (19 MiB, 2 passes, 1 lane) in a PHC string that names every parameter', async () => {
    const me = await customer(t.app);
    const stored = await storedHash(t, me.email);
    const [, salt, hash] = phcCurrent.exec(stored) ?? [];
    expect(salt).toBeDefined();
    // The tag is what those parameters make of the password with that salt: nothing cheaper was run.
    const expected = await argon2Raw('argon2id', password, Buffer.from(salt as string, 'base64'), 19456, 2, 1);
    expect(Buffer.from(hash as string, 'base64').equals(expected)).toBe(true);
  });

  it('are not rewritten when a login finds them current', async () => {
    const me = await customer(t.app);
    const before = await storedHash(t, me.email);
    expect((await login(t, me.email)).status).toBe(201);
    expect(await storedHash(t, me.email)).toBe(before);
  });
});

describe('hashes written by earlier releases', () => {
  const t = setupApp();

  it('log in, and that login replaces the hash with a current one in the same request', async () => {
    const released = await hashPasswordAsReleased(password);
    expect(released).toMatch(/^scrypt\$16384\$8\$1\$/);
    const email = await accountWithHash(t, released);

    expect((await login(t, email)).status).toBe(201);
    const upgraded = await storedHash(t, email);
    expect(upgraded).toMatch(phcCurrent);
    // The new hash is of the same password: the next login works and changes nothing.
    expect((await login(t, email)).status).toBe(201);
    expect(await storedHash(t, email)).toBe(upgraded);
    expectError(await login(t, email, 'not the password'), 401, 'unauthorized');
  });

  it('refuse a wrong password with 401 and stay as they were', async () => {
    const released = await hashPasswordAsReleased(password);
    const email = await accountWithHash(t, released);
    expectError(await login(t, email, 'not the password'), 401, 'unauthorized');
    expect(await storedHash(t, email)).toBe(released);
  });

  it("are checked with the parameters written in them, not today's: scrypt N=2^12, r=8, p=2", async () => {
    const email = await accountWithHash(t, await scryptHashWith(password, { N: 4096, r: 8, p: 2 }));
    expect((await login(t, email)).status).toBe(201);
    expect(await storedHash(t, email)).toMatch(phcCurrent);
  });

  it('argon2id with other parameters (an OWASP equivalent, 9 MiB and 4 passes) logs in and is brought to today’s', async () => {
    const email = await accountWithHash(t, await argon2idHash(password, 9216, 4));
    expect((await login(t, email)).status).toBe(201);
    expect(await storedHash(t, email)).toMatch(phcCurrent);
  });

  it('a stored string that is no hash we know refuses the login with 401, not 500', async () => {
    const email = await accountWithHash(t, `md5$${randomBytes(16).toString('hex')}`);
    expectError(await login(t, email), 401, 'unauthorized');
  });
});

describe('verification reads the algorithm and parameters from the string', () => {
  const passwords = createPasswordHashing({ concurrency: 2, queue: 100 });

  // The reference implementation's own vectors (phc-winner-argon2, src/test.c): made by
  // another encoder, with salts, lanes, passes and variants other than ours.
  it.each([
    ['password', '$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4'],
    ['password', '$argon2id$v=19$m=256,t=2,p=2$c29tZXNhbHQ$bQk8UB/VmZZF4Oo79iDXuL5/0ttZwg2f/5U52iv1cDc'],
    ['password', '$argon2id$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$vfMrBczELrFdWP0ZsfhWsRPaHppYdP3MVEMIVlqoFBw'],
    ['differentpassword', '$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$C4TWUs9rDEvq7w3+J4umqA32aWKB1+DSiRuBfYxFj94'],
    ['password', '$argon2i$v=19$m=256,t=2,p=2$c29tZXNhbHQ$T/XOJ2mh1/TIpJHfCdQan76Q5esCFVoT5MAeIM1Oq2E'],
  ])('%s against %s', async (pw, stored) => {
    expect(await passwords.verify(pw, stored)).toEqual({ ok: true, upgraded: expect.stringMatching(phcCurrent) });
    expect(await passwords.verify(`${pw}!`, stored)).toEqual({ ok: false, upgraded: null });
  });

  it('refuses strings asking for more than it will compute, without computing them', async () => {
    // 2 GiB of memory; a scrypt N of 2^30.
    const salt = 'c29tZXNhbHQ';
    const tag = 'nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4';
    expect(await passwords.verify('password', `$argon2id$v=19$m=2097152,t=2,p=1$${salt}$${tag}`)).toEqual({ ok: false, upgraded: null });
    expect(await passwords.verify('password', `scrypt$1073741824$8$1$${salt}=$${tag}=`)).toEqual({ ok: false, upgraded: null });
  });
});

describe('an unknown email', () => {
  const t = setupApp();

  it('costs what a wrong password costs (medians of interleaved logins within 0.5x..2x)', async () => {
    const me = await customer(t.app);
    const time = async (email: string) => {
      const started = performance.now();
      const res = await login(t, email, 'a wrong password');
      expect(res.status).toBe(401);
      return performance.now() - started;
    };
    // Warm both paths first.
    await time(me.email);
    await time(uniqueEmail('nobody'));
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 15; i++) {
      known.push(await time(me.email));
      unknown.push(await time(uniqueEmail('nobody')));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
    const ratio = median(unknown) / median(known);
    // Without the decoy an unknown email answers in a few ms beside ~40 ms: a ratio near 0.05.
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(2);
  });
});

describe('hashes at once', () => {
  it('are bounded: `limit` run, `queueLimit` wait in order, the rest are refused with 503 overloaded', async () => {
    const gate = new HashGate(2, 3);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const work = (n: number) => async () => {
      running++;
      most = Math.max(most, running);
      order.push(n);
      await new Promise<void>((resolve) => releases.push(resolve));
      running--;
      return n;
    };
    const runs = Array.from({ length: 8 }, (_, n) => gate.run(work(n)).catch((error: unknown) => error));
    await new Promise((r) => setImmediate(r));
    expect(gate.load).toEqual({ running: 2, waiting: 3 });
    // The three past the queue were refused at once, before any work of theirs began.
    for (const refused of await Promise.all(runs.slice(5))) {
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ code: 'overloaded', status: 503, headers: { 'Retry-After': '1' } });
    }
    while (order.length < 5 || releases.length > 0) {
      releases.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await Promise.all(runs.slice(0, 5))).toEqual([0, 1, 2, 3, 4]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  describe('over HTTP, with one hash at a time and one waiting', () => {
    const t = setupApp({ env: { PASSWORD_HASH_CONCURRENCY: '1', PASSWORD_HASH_QUEUE: '1' } });

    it('refuses logins and sign-ups past them with 503 overloaded and Retry-After, and serves the rest', async () => {
      // A stored hash that takes long to check (40 passes): the one slot stays busy meanwhile.
      const email = await accountWithHash(t, await argon2idHash(password, 19456, 40));
      const first = login(t, email).then((r) => r);
      const second = login(t, email).then((r) => r);
      for (let i = 0; i < 500 && (t.passwords.gate.load.running < 1 || t.passwords.gate.load.waiting < 1); i++) {
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(t.passwords.gate.load).toEqual({ running: 1, waiting: 1 });

      const refusedLogin = await login(t, email);
      expectError(refusedLogin, 503, 'overloaded');
      expect(refusedLogin.headers['retry-after']).toBe('1');
      // Sign-up hashes through the same gate.
      const refusedSignUp = await request(t.app).post('/accounts').send({ email: uniqueEmail(), password });
      expectError(refusedSignUp, 503, 'overloaded');
      expect(refusedSignUp.headers['retry-after']).toBe('1');

      expect((await first).status).toBe(201);
      expect((await second).status).toBe(201);
      expect(await storedHash(t, email)).toMatch(phcCurrent);
      expect(t.passwords.gate.load).toEqual({ running: 0, waiting: 0 });
    });

    it('run off the event loop: timers keep firing while a hash is computed', async () => {
      const email = await accountWithHash(t, await argon2idHash(password, 19456, 40));
      let lag = 0;
      let due = performance.now() + 10;
      const timer = setInterval(() => {
        const now = performance.now();
        lag = Math.max(lag, now - due);
        due = now + 10;
      }, 10);
      const started = performance.now();
      const res = await login(t, email);
      const took = performance.now() - started;
      clearInterval(timer);
      expect(res.status).toBe(201);
      // A hash on the loop would hold it for the whole check (hundreds of ms).
      expect(lag).toBeLessThan(took / 2);
    });
  });
});

describe('hashing threads', () => {
  const fresh = setupApp();

  itOnLinux(
    'a thread’s own priority, read from /proc',
    'run on a thread of their own below the event loop’s priority (nice 10), reused from one hash to the next',
    async () => {
      const niceOf = (tid: string) => {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        // Fields after the command name, which may hold spaces: nice is the 19th field.
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      };
      const niced = () => readdirSync('/proc/self/task').filter((tid) => niceOf(tid) === 10);
      // Threads of earlier tests' apps may end meanwhile (each ends once idle): only new ones count.
      const before = new Set(niced());
      expect((await login(fresh, (await customer(fresh.app)).email)).status).toBe(201);
      expect(niced().filter((tid) => !before.has(tid))).toHaveLength(1);
      // The main thread, which runs the event loop, keeps its own.
      expect(niceOf(String(process.pid))).toBeLessThan(10);
    },
  );

  it('end once they have waited their idle time for another hash, and start again for the next', async () => {
    // Idle long enough that a hash on a busy machine comes within it.
    const hashing = createPasswordHashing({ concurrency: 2, queue: 0, threadIdleMs: 3_000 });
    expect(hashing.threads).toBe(0);
    const stored = await Promise.all([hashing.hash('one password'), hashing.hash('another one')]);
    expect(hashing.threads).toBe(2);
    // A hash within the idle time reuses a waiting thread.
    expect((await hashing.verify('one password', stored[0])).ok).toBe(true);
    expect(hashing.threads).toBe(2);
    for (let i = 0; i < 200 && hashing.threads > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(hashing.threads).toBe(0);
    expect((await hashing.verify('another one', stored[1])).ok).toBe(true);
    expect(hashing.threads).toBe(1);
  });

  it('leave the priority of the event loop’s thread as it was, on every system', async () => {
    const before = getPriority();
    expect((await login(fresh, (await customer(fresh.app)).email)).status).toBe(201);
    expect(getPriority()).toBe(before);
  });
});
