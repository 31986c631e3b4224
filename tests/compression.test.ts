// Bytes on the wire: the contract and the reference's files precompressed (br, gzip) with a
// strong ETag per coding and 304 on If-None-Match; JSON answers compressed above
// server/pipeline/compress.ts's minBytes when the client asks; `Vary: Accept-Encoding`
// on all of them; every refusal still the Error shape. Over real HTTP on loopback, with
// the bytes read raw (no client decompressing for us).
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { negotiate } from '../server/content-coding';
import { minBytes } from '../server/pipeline/compress';
import { admin, createCategory, createPet, setupApp, type Caller } from './helpers';

const t = setupApp();
let server: Server;
let base: string;
let boss: Caller;

beforeAll(async () => {
  boss = await admin(t);
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** One request, its body as sent: no Accept-Encoding unless given, nothing decoded. */
function raw(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const decoded = (res: Raw): Buffer => {
  const coding = res.headers['content-encoding'];
  if (coding === 'br') return brotliDecompressSync(res.body);
  if (coding === 'gzip') return gunzipSync(res.body);
  expect(coding).toBeUndefined();
  return res.body;
};

const varies = (res: Raw) => expect(String(res.headers.vary).toLowerCase()).toContain('accept-encoding');

/** The Error shape from raw bytes, whatever the coding. */
function expectRawError(res: Raw, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(JSON.parse(decoded(res).toString('utf8'))).toEqual({ code, message: expect.any(String), status });
}

describe('Accept-Encoding negotiation', () => {
  it.each([
    [undefined, 'identity'],
    ['', 'identity'],
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, br', 'br'],
    ['gzip, deflate, br, zstd', 'br'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['BR;Q=0.9, GZIP;q=0.8', 'br'],
    ['br;q=0, gzip;q=0', 'identity'],
    ['br;q=0, gzip', 'gzip'],
    ['*', 'br'],
    ['*;q=0.5, br;q=0.2', 'gzip'],
    ['identity;q=1, gzip;q=0.5', 'identity'],
    ['identity;q=0, gzip;q=0.5', 'gzip'],
    ['deflate', 'identity'],
    ['*;q=0', 'identity'],
    ['gzip;q=nonsense', 'identity'],
  ])('answers %j with %s', (header, coding) => {
    expect(negotiate(header)).toBe(coding);
  });
});

describe.each(['/openapi.json', '/openapi.yaml'])('GET %s', (path) => {
  it('sends br, gzip or none as asked, each the same document under a strong ETag of its own, with Vary', async () => {
    const plain = await raw(path);
    const br = await raw(path, { 'Accept-Encoding': 'gzip, deflate, br' });
    const gz = await raw(path, { 'Accept-Encoding': 'gzip' });
    for (const res of [plain, br, gz]) {
      expect(res.status).toBe(200);
      varies(res);
      expect(res.headers.etag).toMatch(/^"[^"]+"$/);
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
    }
    expect(br.headers['content-encoding']).toBe('br');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(decoded(br).equals(plain.body)).toBe(true);
    expect(decoded(gz).equals(plain.body)).toBe(true);
    expect(new Set([plain.headers.etag, br.headers.etag, gz.headers.etag]).size).toBe(3);
    // The compressed document is a fraction of the plain one.
    expect(br.body.length).toBeLessThan(plain.body.length / 4);
    expect(br.body.length).toBeLessThan(gz.body.length);
  });

  it("answers 304 without a body to If-None-Match naming the coding's ETag (weak or strong), and 200 to another coding's", async () => {
    const first = await raw(path, { 'Accept-Encoding': 'br' });
    const etag = first.headers.etag as string;
    const again = await raw(path, { 'Accept-Encoding': 'br', 'If-None-Match': `"other", W/${etag}` });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers.etag).toBe(etag);
    varies(again);
    const otherCoding = await raw(path, { 'Accept-Encoding': 'gzip', 'If-None-Match': etag });
    expect(otherCoding.status).toBe(200);
    expect(otherCoding.headers['content-encoding']).toBe('gzip');
  });

  it('answers a failed If-Match with 412 precondition_failed in the Error shape, compressed or not', async () => {
    expectRawError(await raw(path, { 'If-Match': '"not-the-etag"' }), 412, 'precondition_failed');
    expectRawError(await raw(path, { 'If-Match': '"not-the-etag"', 'Accept-Encoding': 'br' }), 412, 'precondition_failed');
  });

  it('answers HEAD with the headers of the GET and no body', async () => {
    const get = await raw(path, { 'Accept-Encoding': 'br' });
    const head = await raw(path, { 'Accept-Encoding': 'br' }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect(head.headers.etag).toBe(get.headers.etag);
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
  });
});

describe('/docs/assets', () => {
  it.each(['swagger-ui-bundle.js', 'swagger-ui.css', 'docs.css', 'docs.js'])(
    'sends %s precompressed, with an ETag and 304',
    async (file) => {
      const plain = await raw(`/docs/assets/${file}`);
      const br = await raw(`/docs/assets/${file}`, { 'Accept-Encoding': 'br, gzip' });
      expect(br.status).toBe(200);
      expect(br.headers['content-encoding']).toBe('br');
      expect(br.headers['content-type']).toBe(plain.headers['content-type']);
      expect(br.headers['content-security-policy']).toBeDefined();
      varies(br);
      expect(decoded(br).equals(plain.body)).toBe(true);
      const again = await raw(`/docs/assets/${file}`, { 'Accept-Encoding': 'br, gzip', 'If-None-Match': br.headers.etag as string });
      expect(again.status).toBe(304);
    },
  );

  it('sends an image as it is: compressing it would not make it smaller', async () => {
    const res = await raw('/docs/assets/favicon-32x32.png', { 'Accept-Encoding': 'br, gzip' });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['content-type']).toBe('image/png');
  });

  it('answers a Range from the plain file, and one past the end with 416 in the Error shape', async () => {
    const part = await raw('/docs/assets/docs.css', { Range: 'bytes=0-9', 'Accept-Encoding': 'br' });
    expect(part.status).toBe(206);
    expect(part.headers['content-encoding']).toBeUndefined();
    expect(part.body.length).toBe(10);
    expectRawError(
      await raw('/docs/assets/docs.css', { Range: 'bytes=999999999-', 'Accept-Encoding': 'br' }),
      416,
      'range_not_satisfiable',
    );
  });
});

describe('JSON answers', () => {
  let categoryId = 0;
  beforeAll(async () => {
    categoryId = (await createCategory(t.app, boss)).id;
    for (let i = 0; i < 50; i++) await createPet(t.app, boss, { categoryId, name: `Compressed pet number ${i}` });
  });

  it(`compresses one of at least ${minBytes} bytes in the coding asked for, with Vary`, async () => {
    const path = `/pets?categoryId=${categoryId}&limit=50`;
    const plain = await raw(path, boss.auth);
    expect(plain.body.length).toBeGreaterThanOrEqual(minBytes);
    expect(plain.headers['content-encoding']).toBeUndefined();
    varies(plain);
    for (const coding of ['br', 'gzip']) {
      const res = await raw(path, { ...boss.auth, 'Accept-Encoding': coding });
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBe(coding);
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
      expect(res.body.length).toBeLessThan(plain.body.length / 2);
      varies(res);
      expect(JSON.parse(decoded(res).toString('utf8'))).toEqual(JSON.parse(plain.body.toString('utf8')));
    }
  });

  it(`sends one under ${minBytes} bytes as it is, still with Vary`, async () => {
    const pet = await createPet(t.app, boss, { categoryId });
    const res = await raw(`/pets?ids=${pet.id}`, { ...boss.auth, 'Accept-Encoding': 'br, gzip' });
    expect(res.status).toBe(200);
    expect(res.body.length).toBeLessThan(minBytes);
    expect(res.headers['content-encoding']).toBeUndefined();
    varies(res);
  });

  it('keeps every refusal in the Error shape when the client accepts a coding', async () => {
    const accept = { 'Accept-Encoding': 'br, gzip' };
    expectRawError(await raw('/pets', accept), 401, 'unauthorized');
    expectRawError(await raw('/nowhere', { ...accept, ...boss.auth }), 404, 'not_found');
    expectRawError(await raw('/pets?limit=1000', { ...accept, ...boss.auth }), 400, 'validation_failed');
    expectRawError(await raw('/pets/999999', { ...accept, ...boss.auth }), 404, 'not_found');
  });
});
