// Every failure leaves as the contract's Error body, whatever produced it.
import request from 'supertest';
import { ApiError } from '../domain/errors';
import { admin, captureLog, customer, expectError, password, postWithoutContentType, setupApp, type Caller } from './helpers';

describe('errors', () => {
  const t = setupApp();
  let boss: Caller;

  beforeAll(async () => {
    boss = await admin(t);
  });

  describe('400 for a bad request body (POST /categories, an admin operation)', () => {
    const post = () => request(t.app).post('/categories').set(boss.auth);

    it('answers invalid JSON with invalid_json', async () => {
      const res = await post().set('Content-Type', 'application/json').send('{"name": "Dogs",');
      expectError(res, 400, 'invalid_json');
    });

    it('answers a missing required field with validation_failed naming it', async () => {
      const res = await post().send({ description: 'no name' });
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/body/name is required');
    });

    it('answers a body without Content-Type with invalid_content_type, not 415', async () => {
      expect(await postWithoutContentType(t.app, '/categories', boss.auth, '{"name":"Dogs"}')).toEqual({
        status: 400,
        body: { code: 'invalid_content_type', message: expect.any(String), status: 400 },
      });
    });

    it('answers text/plain with invalid_content_type', async () => {
      const res = await post().set('Content-Type', 'text/plain').send('{"name":"Dogs"}');
      expectError(res, 400, 'invalid_content_type');
    });

    it('answers no body at all with invalid_content_type', async () => {
      const res = await post();
      expectError(res, 400, 'invalid_content_type');
    });

    it('rejects an unknown property', async () => {
      const res = await post().send({ name: 'Dogs', colour: 'brown' });
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/body/colour is not allowed');
    });

    it('rejects an id in a create body instead of ignoring it', async () => {
      const res = await post().send({ id: 5, name: 'Dogs' });
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/body/id');
    });

    it('rejects a __proto__ key', async () => {
      const res = await post().set('Content-Type', 'application/json').send('{"name":"Dogs","__proto__":{"isAdmin":true}}');
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('__proto__');
    });

    it('rejects 2^53+1 instead of rounding it', async () => {
      const res = await request(t.app)
        .post('/pets')
        .set(boss.auth)
        .set('Content-Type', 'application/json')
        .send('{"name":"Rex","categoryId":9007199254740993}');
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('9007199254740993');
    });

    it('rejects 2^53+1 in a path parameter', async () => {
      const res = await request(t.app).get('/categories/9007199254740993').set(boss.auth);
      expectError(res, 400, 'validation_failed');
    });

    it('rejects JSON nested deeper than 32 levels', async () => {
      const deep = '{"name":"x","description":' + '['.repeat(5000) + ']'.repeat(5000) + '}';
      const res = await post().set('Content-Type', 'application/json').send(deep);
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('nested deeper than 32');
    });

    it('answers a 70 KiB body with 413 payload_too_large', async () => {
      const res = await post().send({ name: 'x', description: 'y'.repeat(70 * 1024) });
      expectError(res, 413, 'payload_too_large');
    });

    it('answers a 70 KiB body with 413 whatever its content type', async () => {
      const res = await post()
        .set('Content-Type', 'text/plain')
        .send('y'.repeat(70 * 1024));
      expectError(res, 413, 'payload_too_large');
    });

    it('answers a body that claims gzip but is not with 400 in the Error shape', async () => {
      const res = await post().set('Content-Type', 'application/json').set('Content-Encoding', 'gzip').send('{"name":"x"}');
      expectError(res, 400, 'invalid_json');
    });

    it('answers an unsupported Content-Encoding with invalid_content_type', async () => {
      const res = await post().set('Content-Type', 'application/json').set('Content-Encoding', 'compress').send('{"name":"x"}');
      expectError(res, 400, 'invalid_content_type');
    });

    it('refuses a non-JSON body even where the body is optional (POST /api-keys)', async () => {
      const res = await request(t.app).post('/api-keys').auth(boss.email, password).set('Content-Type', 'text/plain').send('{"name":"x"}');
      expectError(res, 400, 'invalid_content_type');
    });

    it('refuses a leap-second date-time, which no JavaScript Date can hold', async () => {
      const res = await request(t.app).post('/api-keys').auth(boss.email, password).send({ expiresAt: '2030-12-31T23:59:60Z' });
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/body/expiresAt');
    });

    it('answers an out-of-range query parameter with validation_failed', async () => {
      const res = await request(t.app).get('/api-keys?limit=101').set(boss.auth);
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain('request/query/limit');
    });

    it('answers an unknown query parameter with validation_failed', async () => {
      const res = await request(t.app).get('/api-keys?colour=brown').set(boss.auth);
      expectError(res, 400, 'validation_failed');
    });

    it('answers a cursor it never issued, which the schema allows, with an empty page', async () => {
      const res = await request(t.app).get('/api-keys?cursor=bm9wZQ').set(boss.auth);
      expect({ status: res.status, body: res.body, link: res.headers.link }).toEqual({ status: 200, body: [], link: undefined });
    });
  });

  describe('routing', () => {
    it('answers an unknown path with 404 not_found', async () => {
      expectError(await request(t.app).get('/no/such/thing'), 404, 'not_found');
    });

    it('serves HEAD wherever GET is declared, with no body', async () => {
      const res = await request(t.app).head('/healthz');
      expect(res.status).toBe(200);
      expect(res.text ?? '').toBe('');
    });

    it('answers an undeclared method with 405 and Allow', async () => {
      const res = await request(t.app).patch('/pets').set(boss.auth);
      expectError(res, 405, 'method_not_allowed');
      expect(res.headers.allow).toBe('GET, POST');
    });
  });

  describe('403', () => {
    it('answers a customer on an admin operation with forbidden', async () => {
      const buyer = await customer(t.app);
      expectError(await request(t.app).post('/categories').set(buyer.auth).send({ name: 'Cats' }), 403, 'forbidden');
    });
  });

  describe('every response', () => {
    it('carries a fresh X-Request-Id and no X-Powered-By', async () => {
      const res = await request(t.app).get('/healthz');
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers['x-powered-by']).toBeUndefined();
    });

    it('echoes a sane client X-Request-Id and replaces an insane one', async () => {
      const sane = await request(t.app).get('/nowhere').set('X-Request-Id', 'trace-42.a:b');
      expect(sane.headers['x-request-id']).toBe('trace-42.a:b');
      const insane = await request(t.app).get('/healthz').set('X-Request-Id', 'a b<script>');
      expect(insane.headers['x-request-id']).not.toBe('a b<script>');
    });
  });
});

describe('an unexpected exception', () => {
  const logged = captureLog();
  const t = setupApp({
    handlers: {
      getHealth: () => {
        throw new Error('secret detail: /etc/passwd at line 3');
      },
    },
    log: logged.log,
  });

  it('is a 500 internal_error with a generic message, the detail only in the log', async () => {
    const res = await request(t.app).get('/healthz');
    expectError(res, 500, 'internal_error');
    expect(res.body.message).not.toContain('secret');
    const failure = logged.lines().find((line) => line.msg === 'request failed');
    expect(failure).toMatchObject({ level: 50, requestId: res.headers['x-request-id'] });
    expect((failure?.err as { stack?: string }).stack).toContain('secret detail');
  });
});

describe('a response that breaks the contract', () => {
  const t = setupApp({
    handlers: { getHealth: () => ({ status: 200, body: { status: 'ok', extra: 'leak' } as never }) },
  });

  it('is caught by response validation and becomes a 500, not sent', async () => {
    const res = await request(t.app).get('/healthz');
    expectError(res, 500, 'internal_error');
    expect(JSON.stringify(res.body)).not.toContain('leak');
  });
});

describe('rate limit', () => {
  // Each test gets its own app, so none depends on what an earlier one used up. Requests
  // without a key count against their address before authentication refuses them.
  const exhausted = async () => {
    const t = setupApp({ env: { RATE_LIMIT_PER_MINUTE: '3' } });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(t.app).get('/pets')).status);
    expect(statuses).toEqual([401, 401, 401]);
    return t;
  };

  it('answers the fourth request in a minute with 429, Retry-After and RateLimit headers', async () => {
    const t = await exhausted();
    const res = await request(t.app).get('/pets');
    expectError(res, 429, 'rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.headers['ratelimit-policy']).toMatch(/q=3; w=60/);
    expect(res.headers.ratelimit).toMatch(/r=0/);
  });

  it('keeps /healthz answering while a client is limited', async () => {
    const t = await exhausted();
    expectError(await request(t.app).get('/pets'), 429, 'rate_limited');
    expect((await request(t.app).get('/healthz')).status).toBe(200);
    // Routing comes first: an unknown path is still a 404 for a limited client.
    expectError(await request(t.app).get('/nowhere'), 404, 'not_found');
  });
});

describe('an ApiError', () => {
  const frames = (error: Error) => (error.stack ?? '').split('\n').filter((line) => line.trimStart().startsWith('at ')).length;

  it('has no stack when it is a refusal (4xx) or a designed 5xx, which nothing logs, and keeps one as any other 5xx, which the log prints', () => {
    expect(frames(new ApiError('rate_limited', 'Too many requests', 429))).toBe(0);
    expect(frames(new ApiError('overloaded', 'The service is overloaded', 503))).toBe(0);
    expect(frames(new ApiError('internal_error', 'Something failed', 500))).toBeGreaterThan(0);
    // Errors made after one keep their stacks.
    expect(frames(new Error('after'))).toBeGreaterThan(0);
  });
});
