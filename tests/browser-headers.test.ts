// What a browser is told beyond the body (openapi.yaml, "Limits" and "Cross-origin use"):
// nosniff on every answer, no-store on every answer of an operation that takes
// credentials, and CORS only for the origins the operator allows.
import request from 'supertest';
import { loadConfig } from '../server/config';
import { loadSpec } from '../server/spec';
import { customer, expectError, password, setupApp, uniqueEmail, type Caller, type TestApp } from './helpers';

describe('X-Content-Type-Options: nosniff', () => {
  const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });

  it.each([
    ['an operation', (t: TestApp) => request(t.app).get('/pets').set(me.auth), 200],
    ['a 401', (t: TestApp) => request(t.app).get('/pets'), 401],
    [
      'a body refused before the validator',
      (t: TestApp) => request(t.app).post('/store/orders').set(me.auth).set('Content-Type', 'application/json').send('{"a":'),
      400,
    ],
    ['an unknown path', (t: TestApp) => request(t.app).get('/nowhere'), 404],
    ['an undeclared method', (t: TestApp) => request(t.app).patch('/pets'), 405],
    ['a probe', (t: TestApp) => request(t.app).get('/healthz'), 200],
    ['the contract', (t: TestApp) => request(t.app).get('/openapi.json'), 200],
    ['the reference', (t: TestApp) => request(t.app).get('/docs'), 200],
  ] as const)('is on %s', async (_what, send, status) => {
    const res = await send(t);
    expect(res.status).toBe(status);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });
});

describe('Cache-Control: no-store', () => {
  const t = setupApp();
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });

  it.each([
    ['a Bearer operation', () => request(t.app).get('/api-keys').set(me.auth), 200],
    ['its 401', () => request(t.app).get('/api-keys'), 401],
    ['a 403', () => request(t.app).post('/categories').set(me.auth).send({ name: 'Nope' }), 403],
    ['a 404 of a resource', () => request(t.app).get('/store/orders/999999').set(me.auth), 404],
    [
      'a body refused before the validator',
      () => request(t.app).post('/messages').set(me.auth).set('Content-Type', 'application/json').send('{"message":"a","message":"b"}'),
      400,
    ],
    ['the HTTP Basic operation', () => request(t.app).post('/api-keys').auth(me.email, password), 201],
    ['its 401', () => request(t.app).post('/api-keys').auth(me.email, 'wrong password'), 401],
    ['a HEAD', () => request(t.app).head('/pets').set(me.auth), 200],
  ] as const)('is on %s', async (_what, send, status) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('is on a rate-limit refusal, made before authentication', async () => {
    const limited = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '1' } });
    await request(limited.app).get('/pets');
    const res = await request(limited.app).get('/pets');
    expectError(res, 429, 'rate_limited');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it.each([
    [
      'the public sign-up',
      () =>
        request(t.app)
          .post('/accounts')
          .send({ email: uniqueEmail('public'), password }),
      201,
    ],
    ['a probe', () => request(t.app).get('/healthz'), 200],
    ['an unknown path', () => request(t.app).get('/nowhere'), 404],
  ] as const)('is not on %s, which takes no credentials', async (_what, send, status) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers['cache-control']).toBeUndefined();
  });
});

describe('CORS', () => {
  const allowed = 'https://app.example.com';
  const cors = { CORS_ORIGINS: `${allowed}, http://localhost:5173` };
  const preflight = (t: TestApp, path: string, origin: string, method = 'POST') =>
    request(t.app)
      .options(path)
      .set('Origin', origin)
      .set('Access-Control-Request-Method', method)
      .set('Access-Control-Request-Headers', 'authorization, content-type');
  const corsHeaders = (res: request.Response) => Object.keys(res.headers).filter((h) => h.startsWith('access-control-'));

  describe('off by default', () => {
    const t = setupApp();

    it('sends no CORS header, and OPTIONS stays 405', async () => {
      const res = await request(t.app).get('/healthz').set('Origin', allowed);
      expect(corsHeaders(res)).toEqual([]);
      expect(res.headers['vary']).toBeUndefined();
      const options = await preflight(t, '/pets', allowed);
      expectError(options, 405, 'method_not_allowed');
      expect(corsHeaders(options)).toEqual([]);
    });
  });

  describe('with CORS_ORIGINS', () => {
    const t = setupApp({ env: cors });
    let me: Caller;
    beforeAll(async () => {
      me = await customer(t.app);
    });

    it('lets an allowed origin read the answer and the headers a client needs', async () => {
      const res = await request(t.app).get('/pets').set(me.auth).set('Origin', allowed);
      expect(res.status).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBe(allowed);
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(res.headers['vary']).toMatch(/\bOrigin\b/);
      const exposed = (res.headers['access-control-expose-headers'] ?? '').split(/,\s*/);
      expect(exposed).toEqual(
        expect.arrayContaining([
          'Location',
          'RateLimit',
          'RateLimit-Policy',
          'Retry-After',
          'X-Request-Id',
          'Link',
          'Deprecation',
          'Sunset',
          'X-Mock',
        ]),
      );
    });

    it('lets it read errors too', async () => {
      const res = await request(t.app).get('/pets').set('Origin', 'http://localhost:5173');
      expectError(res, 401, 'unauthorized');
      expect(res.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    });

    it('answers a preflight with 204, the methods the spec declares on the path and the request headers', async () => {
      const res = await preflight(t, '/store/orders/12', allowed, 'DELETE');
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect(res.headers['access-control-allow-origin']).toBe(allowed);
      expect(res.headers['access-control-allow-methods']).toBe('GET, DELETE, PATCH');
      const headers = (res.headers['access-control-allow-headers'] ?? '').split(/,\s*/);
      expect(headers).toEqual(expect.arrayContaining(['Authorization', 'Content-Type', 'Idempotency-Key', 'X-Request-Id', 'Prefer']));
      expect(Number(res.headers['access-control-max-age'])).toBeGreaterThan(0);
    });

    it("reads each path's methods from the spec", async () => {
      const spec = loadSpec();
      const methods = ['get', 'put', 'post', 'delete', 'patch'];
      for (const [template, item] of Object.entries(spec.paths)) {
        const path = template.replace(/\{\w+\}/g, '1');
        const declared = methods.filter((m) => m in (item as object)).map((m) => m.toUpperCase());
        const res = await preflight(t, path, allowed);
        expect({ path, status: res.status, methods: res.headers['access-control-allow-methods']?.split(', ').sort() }).toEqual({
          path,
          status: 204,
          methods: declared.sort(),
        });
      }
    });

    it.each(['https://evil.example.com', 'https://app.example.com.evil.com', 'http://app.example.com', 'https://APP.example.com', 'null'])(
      'sends no CORS header to %s, and its OPTIONS is 405',
      async (origin) => {
        const res = await request(t.app).get('/pets').set(me.auth).set('Origin', origin);
        expect(res.status).toBe(200);
        expect(corsHeaders(res)).toEqual([]);
        expect(res.headers['vary']).toMatch(/\bOrigin\b/);
        const options = await preflight(t, '/pets', origin);
        expectError(options, 405, 'method_not_allowed');
        expect(corsHeaders(options)).toEqual([]);
      },
    );

    it('leaves an OPTIONS that is no preflight, or on an unknown path, to the usual answers', async () => {
      expectError(await request(t.app).options('/pets').set('Origin', allowed), 405, 'method_not_allowed');
      const unknown = await preflight(t, '/nowhere', allowed);
      expectError(unknown, 404, 'not_found');
    });
  });

  it.each([
    '*',
    'app.example.com',
    'https://app.example.com/',
    'https://app.example.com/path',
    'ftp://files.example.com',
    'https://App.example.com',
  ])('refuses CORS_ORIGINS=%s at start-up: not an origin as a browser sends it', (value) => {
    expect(() => loadConfig({ CORS_ORIGINS: value })).toThrow(/CORS_ORIGINS/);
  });

  it('takes a comma-separated list of exact origins, none by default', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://a.example, http://localhost:8080' }).corsOrigins).toEqual([
      'https://a.example',
      'http://localhost:8080',
    ]);
  });
});
