// docs/decisions.md, Who may do what: accounts, keys and the exact 401 rules.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { fullFormats } from 'ajv-formats/dist/formats';
import { parse } from 'yaml';
import { repoRoot } from '../scripts/server-process';
import { customer, expectError, keyFor, password, setupApp, uniqueEmail } from './helpers';

describe('POST /accounts', () => {
  const t = setupApp();

  it('signs up a customer without a key and never returns the password', async () => {
    const email = uniqueEmail('Signup').replace('Signup', 'SignUp');
    const res = await request(t.app).post('/accounts').send({ email, password });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(Number), email: email.toLowerCase(), role: 'customer', createdAt: expect.any(String) });
  });

  it('refuses a taken email, ignoring case, with 409 conflict', async () => {
    const email = uniqueEmail();
    await request(t.app).post('/accounts').send({ email, password });
    expectError(await request(t.app).post('/accounts').send({ email: email.toUpperCase(), password }), 409, 'conflict');
  });

  it('refuses a role in the body: sign-up cannot make an admin', async () => {
    const res = await request(t.app).post('/accounts').send({ email: uniqueEmail(), password, role: 'admin' });
    expectError(res, 400, 'validation_failed');
  });

  it('refuses a malformed email and a short password', async () => {
    expectError(await request(t.app).post('/accounts').send({ email: 'not-an-email', password }), 400, 'validation_failed');
    expectError(await request(t.app).post('/accounts').send({ email: uniqueEmail(), password: 'short' }), 400, 'validation_failed');
  });

  it("takes exactly the emails NewAccount.email's pattern in openapi.yaml allows", async () => {
    type Spec = { components: { schemas: { NewAccount: { properties: { email: { pattern: string } } } } } };
    const spec = parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')) as Spec;
    const pattern = new RegExp(spec.components.schemas.NewAccount.properties.email.pattern, 'u');
    const n = Date.now().toString(36);
    const addresses = [
      `a.b+c-${n}@example.co.uk`,
      `o'neil{}~${n}@mail-1.example.com`,
      `UP${n}@EXAMPLE.ORG`,
      `a${n}@localhost`,
      `0${n}@com`,
      `"a b${n}"@example.com`,
      `a:${n}@example.com`,
      `a..${n}@example.com`,
      `.a${n}@example.com`,
      `a${n}@-x.example.com`,
      `a${n}@[127.0.0.1]`,
      `ä${n}@example.com`,
    ];
    const answered: Array<{ email: string; status: number }> = [];
    for (const email of addresses) {
      const res = await request(t.app).post('/accounts').send({ email, password });
      answered.push({ email, status: res.status });
    }
    expect(answered).toEqual(addresses.map((email) => ({ email, status: pattern.test(email) ? 201 : 400 })));
    expect(answered.filter((a) => a.status === 201)).toHaveLength(3);
  });
});

describe("POST /accounts: RFC 5321's bounds on an email", () => {
  const t = setupApp();
  type Email = { pattern: string; maxLength: number };
  const spec = parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')) as {
    components: { schemas: { NewAccount: { properties: { email: Email } } } };
  };
  const rule = spec.components.schemas.NewAccount.properties.email;
  const email = fullFormats.email as RegExp;
  let n = 0;
  /** An address with a local part of `local` characters and domain labels of these lengths, unique in this file. */
  const address = (local: number, labels: number[]) => {
    const tag = `u${process.pid}x${++n}x`;
    return `${tag}${'a'.repeat(local - tag.length)}@${labels.map((length, i) => (i === labels.length - 1 ? 'c' : 'b').repeat(length)).join('.')}`;
  };
  /** The local part's length, the longest label's and the whole address's. */
  const sizes = (value: string) => {
    const [local = '', domain = ''] = value.split('@');
    return { local: local.length, label: Math.max(...domain.split('.').map((l) => l.length)), total: value.length };
  };
  const edges: Array<[string, string, Partial<ReturnType<typeof sizes>>]> = [
    ['a local part of 64 characters', address(64, [10, 3]), { local: 64 }],
    ['a domain label of 63 characters', address(10, [63, 3]), { label: 63 }],
    ['254 characters in all', address(64, [63, 63, 61]), { local: 64, label: 63, total: 254 }],
  ];
  const pastEdges: Array<[string, string, Partial<ReturnType<typeof sizes>>]> = [
    ['a local part of 65 characters', address(65, [10, 3]), { local: 65 }],
    ['a domain label of 64 characters', address(10, [64, 3]), { label: 64 }],
    ['255 characters in all, every part within its bound', address(64, [63, 63, 62]), { local: 64, label: 63, total: 255 }],
  ];

  it('takes an address at each bound', async () => {
    for (const [what, value, size] of edges) {
      expect(sizes(value)).toMatchObject(size);
      const res = await request(t.app).post('/accounts').send({ email: value, password });
      expect({ what, status: res.status, email: res.body.email }).toEqual({ what, status: 201, email: value });
    }
  });

  it('refuses one past each bound with 400 validation_failed naming the field', async () => {
    for (const [what, value, size] of pastEdges) {
      expect(sizes(value)).toMatchObject(size);
      const res = await request(t.app).post('/accounts').send({ email: value, password });
      expectError(res, 400, 'validation_failed');
      expect({ what, message: res.body.message }).toEqual({ what, message: expect.stringMatching(/^request\/body\/email /) });
    }
  });

  it("is the rule of openapi.yaml's pattern and maxLength, which the email format never contradicts", () => {
    for (const [, value] of [...edges, ...pastEdges]) {
      const allowed = new RegExp(rule.pattern, 'u').test(value) && value.length <= rule.maxLength;
      expect({ value, allowed }).toEqual({ value, allowed: edges.some(([, edge]) => edge === value) });
      // ajv-formats' full `email`, which the service's validator applies beside the pattern, takes them all.
      expect({ value, format: email.test(value) }).toEqual({ value, format: true });
    }
  });
});

describe('POST /api-keys (HTTP Basic)', () => {
  const t = setupApp();

  it('creates a key shown once, with a prefix and 256 random bits', async () => {
    const { email } = await customer(t.app);
    const res = await request(t.app).post('/api-keys').auth(email, password).send({ name: 'laptop' });
    expect(res.status).toBe(201);
    expect(res.body.key).toMatch(/^ps_live_[A-Za-z0-9_-]{43}$/);
    expect(res.body).toMatchObject({ name: 'laptop', prefix: 'ps_live_', lastFour: res.body.key.slice(-4) });
  });

  it('works with no body at all', async () => {
    const { email } = await customer(t.app);
    const res = await request(t.app).post('/api-keys').auth(email, password);
    expect(res.status).toBe(201);
  });

  it('answers a wrong password or unknown email with 401 and a Basic challenge', async () => {
    const { email } = await customer(t.app);
    for (const res of [
      await request(t.app).post('/api-keys').auth(email, 'wrong password'),
      await request(t.app).post('/api-keys').auth(uniqueEmail('nobody'), password),
      await request(t.app).post('/api-keys'),
    ]) {
      expectError(res, 401, 'unauthorized');
      expect(res.headers['www-authenticate']).toBe('Basic realm="petstore", charset="UTF-8"');
    }
  });

  it('refuses an expiry in the past', async () => {
    const { email } = await customer(t.app);
    const res = await request(t.app).post('/api-keys').auth(email, password).send({ expiresAt: '2001-01-01T00:00:00Z' });
    expectError(res, 400, 'validation_failed');
  });
});

describe('Bearer: the 401 matrix', () => {
  const t = setupApp();
  const bare = 'Bearer realm="petstore"';
  const invalid = 'Bearer realm="petstore", error="invalid_token"';

  async function expect401(authorization: string | undefined, challenge: string) {
    const req = request(t.app).get('/api-keys');
    const res = authorization === undefined ? await req : await req.set('Authorization', authorization);
    expectError(res, 401, 'unauthorized');
    expect(res.headers['www-authenticate']).toBe(challenge);
  }

  it('no header', () => expect401(undefined, bare));
  it('"Bearer" alone', () => expect401('Bearer', bare));
  it('"Bearer " with only a space', () => expect401('Bearer ', bare));
  it('an unknown key', () => expect401('Bearer ps_live_' + 'A'.repeat(43), invalid));

  it('a revoked key, from the very next request', async () => {
    const me = await customer(t.app);
    const keys = await request(t.app).get('/api-keys').set(me.auth);
    expect(keys.status).toBe(200);
    const res = await request(t.app).delete(`/api-keys/${keys.body[0].id}`).set(me.auth);
    expect(res.status).toBe(204);
    await expect401(`Bearer ${me.key}`, invalid);
  });

  it('an expired key', async () => {
    const me = await customer(t.app);
    const key = await keyFor(t.app, me.email, password, { expiresAt: new Date(Date.now() + 60_000).toISOString() });
    expect((await request(t.app).get('/api-keys').set('Authorization', `Bearer ${key}`)).status).toBe(200);
    await t.query("update api_keys set expires_at = '2001-01-01T00:00:00.000Z' where last_four = ?", key.slice(-4));
    await expect401(`Bearer ${key}`, invalid);
  });

  it('another scheme: "Token <key>"', async () => {
    const me = await customer(t.app);
    await expect401(`Token ${me.key}`, bare);
  });

  it('the key with no scheme', async () => {
    const me = await customer(t.app);
    await expect401(me.key, bare);
  });

  it('"Basic ..." on a Bearer operation', async () => {
    const me = await customer(t.app);
    await expect401(`Basic ${Buffer.from(`${me.email}:${password}`).toString('base64')}`, bare);
  });

  it('"Bearer <key> extra"', async () => {
    const me = await customer(t.app);
    await expect401(`Bearer ${me.key} extra`, invalid);
  });

  it('a key that differs in case from the real one', async () => {
    const me = await customer(t.app);
    const flipped = me.key.replace(/[a-z]/, (c) => c.toUpperCase());
    expect(flipped).not.toBe(me.key);
    await expect401(`Bearer ${flipped}`, invalid);
  });

  it('accepts the scheme name in any case', async () => {
    const me = await customer(t.app);
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      expect((await request(t.app).get('/api-keys').set('Authorization', `${scheme} ${me.key}`)).status).toBe(200);
    }
  });
});

describe('GET /api-keys and DELETE /api-keys/{keyId}', () => {
  const t = setupApp();

  it('lists only the caller’s keys, never a secret, with lastUsedAt kept', async () => {
    const me = await customer(t.app);
    const other = await customer(t.app);
    const res = await request(t.app).get('/api-keys').set(me.auth);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toEqual({
      id: expect.any(Number),
      prefix: 'ps_live_',
      lastFour: me.key.slice(-4),
      createdAt: expect.any(String),
      lastUsedAt: expect.any(String),
    });
    expect(JSON.stringify(res.body)).not.toContain(me.key);
    expect(JSON.stringify(res.body)).not.toContain(other.key.slice(-8));
  });

  it('pages with limit and a Link to the next page', async () => {
    const me = await customer(t.app);
    for (let i = 0; i < 4; i++) await keyFor(t.app, me.email);
    const seen: number[] = [];
    let url: string | undefined = '/api-keys?limit=2';
    while (url) {
      const res: request.Response = await request(t.app).get(url).set(me.auth);
      expect(res.status).toBe(200);
      seen.push(...res.body.map((k: { id: number }) => k.id));
      url = /<([^>]+)>; rel="next"/.exec(res.headers.link ?? '')?.[1];
    }
    expect(seen).toHaveLength(5);
    expect(new Set(seen).size).toBe(5);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  it('answers another account’s key with 404 and leaves it working', async () => {
    const me = await customer(t.app);
    const other = await customer(t.app);
    const theirs = (await request(t.app).get('/api-keys').set(other.auth)).body[0].id;
    expectError(await request(t.app).delete(`/api-keys/${theirs}`).set(me.auth), 404, 'not_found');
    expect((await request(t.app).get('/api-keys').set(other.auth)).status).toBe(200);
  });

  it('shows revokedAt after revocation, and revoking twice is harmless', async () => {
    const me = await customer(t.app);
    const spare = await keyFor(t.app, me.email);
    const list = (await request(t.app).get('/api-keys').set(me.auth)).body as Array<{ id: number; lastFour: string }>;
    const spareId = list.find((k) => k.lastFour === spare.slice(-4))!.id;
    expect((await request(t.app).delete(`/api-keys/${spareId}`).set(me.auth)).status).toBe(204);
    expect((await request(t.app).delete(`/api-keys/${spareId}`).set(me.auth)).status).toBe(204);
    const after = (await request(t.app).get('/api-keys').set(me.auth)).body as Array<{ id: number; revokedAt?: string }>;
    expect(after.find((k) => k.id === spareId)?.revokedAt).toEqual(expect.any(String));
  });
});
