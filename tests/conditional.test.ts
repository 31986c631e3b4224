// Conditional and Range requests get the answer HTTP defines, in the Error shape when
// it is an error; the API sends no ETag, so no GET of it ever answers 304 (the pages do:
// tests/compression.test.ts).
import request from 'supertest';
import { admin, createPet, expectError, setupApp, type Caller } from './helpers';

const t = setupApp();
let boss: Caller;
beforeAll(async () => {
  boss = await admin(t);
});

describe('/docs/assets', () => {
  const assets = ['/docs/assets/docs.css', '/docs/assets/swagger-ui.css'];

  it.each(assets)('answers a Range past the end of %s with 416 range_not_satisfiable and Content-Range', async (path) => {
    const res = await request(t.app).get(path).set('Range', 'bytes=999999999-');
    expectError(res, 416, 'range_not_satisfiable');
    expect(res.headers['content-range']).toMatch(/^bytes \*\/\d+$/);
  });

  it.each(assets)('answers a Range inside %s with 206', async (path) => {
    const res = await request(t.app).get(path).set('Range', 'bytes=0-9');
    expect(res.status).toBe(206);
    expect(res.headers['content-range']).toMatch(/^bytes 0-9\/\d+$/);
  });

  it.each([
    ['If-Match', '"not-the-etag"'],
    ['If-Unmodified-Since', 'Mon, 01 Jan 1990 00:00:00 GMT'],
  ])('answers a failed %s with 412 precondition_failed', async (header, value) => {
    const res = await request(t.app).get('/docs/assets/docs.css').set(header, value);
    expectError(res, 412, 'precondition_failed');
  });

  it('answers a matching If-None-Match with 304 and no body', async () => {
    const first = await request(t.app).get('/docs/assets/docs.css');
    const res = await request(t.app)
      .get('/docs/assets/docs.css')
      .set('If-None-Match', first.headers.etag as string);
    expect(res.status).toBe(304);
    expect(res.text ?? '').toBe('');
  });
});

describe('the API', () => {
  it.each(['/healthz', '/pets'])('sends no ETag on GET %s and ignores If-None-Match', async (path) => {
    const first = await request(t.app).get(path).set(boss.auth);
    expect(first.status).toBe(200);
    expect(first.headers.etag).toBeUndefined();
    const again = await request(t.app).get(path).set(boss.auth).set('If-None-Match', '*');
    expect(again.status).toBe(200);
  });

  it('answers a GET of a pet with If-None-Match with 200', async () => {
    const pet = await createPet(t.app, boss);
    const res = await request(t.app).get(`/pets?ids=${pet.id}`).set(boss.auth).set('If-None-Match', 'W/"anything", *');
    expect(res.status).toBe(200);
  });
});
