// Deprecation headers come from the spec at start-up, for whichever operations it marks
// deprecated (openapi.yaml, info.description, "Stability and deprecation").
import request from 'supertest';
import { loadSpec, type OpenApiDocument } from '../server/spec';
import { admin, customer, setupApp, type Caller } from './helpers';

const deprecationHeaders = (res: request.Response) => ({
  deprecation: res.headers.deprecation,
  sunset: res.headers.sunset,
  link: res.headers.link,
});
const none = { deprecation: undefined, sunset: undefined, link: undefined };

describe('GET /pets/{petId}, deprecated in openapi.yaml', () => {
  const t = setupApp();
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });

  // 2026-06-30 (x-deprecated-since) and 2027-06-30 (x-deprecated-sunset) in openapi.yaml.
  const expected = (petId: string) => ({
    deprecation: '@1782777600',
    sunset: 'Wed, 30 Jun 2027 00:00:00 GMT',
    link: `</pets?ids=${petId}>; rel="successor-version"`,
  });

  it('answers with Deprecation, Sunset and a Link to GET /pets?ids={petId}', async () => {
    const boss = await admin(t);
    const category = await request(t.app).post('/categories').set(boss.auth).send({ name: 'Dogs' });
    const pet = await request(t.app).post('/pets').set(boss.auth).send({ name: 'Rex', categoryId: category.body.id });
    const res = await request(t.app).get(`/pets/${pet.body.id}`).set(me.auth);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(pet.body);
    expect(deprecationHeaders(res)).toEqual(expected(String(pet.body.id)));
    const missing = await request(t.app).get('/pets/123456').set(me.auth);
    expect(missing.status).toBe(404);
    expect(deprecationHeaders(missing)).toEqual(expected('123456'));
  });

  it('says so on its error responses too', async () => {
    const unauthenticated = await request(t.app).get('/pets/7');
    expect(unauthenticated.status).toBe(401);
    expect(deprecationHeaders(unauthenticated)).toEqual(expected('7'));
    const badId = await request(t.app).get('/pets/0').set(me.auth);
    expect(badId.status).toBe(400);
    expect(deprecationHeaders(badId)).toEqual(expected('0'));
  });

  it('says so on HEAD and with a trailing slash', async () => {
    expect(deprecationHeaders(await request(t.app).head('/pets/7').set(me.auth))).toEqual(expected('7'));
    expect(deprecationHeaders(await request(t.app).get('/pets/7/').set(me.auth))).toEqual(expected('7'));
  });

  it('leaves the operations that are not deprecated alone, on the same path too', async () => {
    for (const res of [
      await request(t.app).get('/pets').set(me.auth),
      await request(t.app).put('/pets/7').set(me.auth).send({ name: 'Rex', categoryId: 1 }),
      await request(t.app).delete('/pets/7').set(me.auth),
      await request(t.app).get('/pets/7/photos').set(me.auth),
      await request(t.app).get('/healthz'),
    ]) {
      expect(deprecationHeaders(res)).toEqual(none);
    }
  });
});

describe('a spec that deprecates other operations', () => {
  const spec = structuredClone(loadSpec());
  const op = (path: string, method: string) => spec.paths[path]?.[method] as Record<string, unknown>;
  // Nothing is deprecated any more where openapi.yaml says it is...
  const petById = op('/pets/{petId}', 'get');
  for (const key of ['deprecated', 'x-deprecated-since', 'x-deprecated-sunset', 'x-successor']) delete petById[key];
  // ...and two category operations are, one with no sunset.
  Object.assign(op('/categories', 'get'), {
    deprecated: true,
    'x-deprecated-since': '2026-01-15',
    'x-deprecated-sunset': '2026-12-31T12:00:00Z',
    'x-successor': '/pets',
  });
  Object.assign(op('/categories/{categoryId}', 'get'), {
    deprecated: true,
    'x-deprecated-since': '2026-01-15',
    'x-successor': '/v2/categories/{categoryId}',
  });

  const t = setupApp({
    spec,
    // A handler that sets its own Link, to see the successor added beside it.
    handlers: {
      listCategories: () => ({ status: 200, body: [], headers: { Link: '</categories?cursor=abc>; rel="next"' } }),
    },
  });
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });

  it('adds the headers to the newly deprecated operations, from their extensions', async () => {
    const list = await request(t.app).get('/categories').set(me.auth);
    expect(list.status).toBe(200);
    expect(deprecationHeaders(list)).toEqual({
      deprecation: '@1768435200',
      sunset: 'Thu, 31 Dec 2026 12:00:00 GMT',
      link: '</categories?cursor=abc>; rel="next", </pets>; rel="successor-version"',
    });
    const one = await request(t.app).get('/categories/42').set(me.auth);
    expect(deprecationHeaders(one)).toEqual({
      deprecation: '@1768435200',
      sunset: undefined,
      link: '</v2/categories/42>; rel="successor-version"',
    });
  });

  it('no longer adds them to GET /pets/{petId}, nor to other methods of the deprecated paths', async () => {
    expect(deprecationHeaders(await request(t.app).get('/pets/7').set(me.auth))).toEqual(none);
    expect(deprecationHeaders(await request(t.app).post('/categories').set(me.auth).send({ name: 'Dogs' }))).toEqual(none);
    expect(deprecationHeaders(await request(t.app).delete('/categories/42').set(me.auth))).toEqual(none);
  });
});

describe('start-up', () => {
  const deprecate = (extensions: Record<string, unknown>): OpenApiDocument => {
    const spec = structuredClone(loadSpec());
    Object.assign(spec.paths['/categories/{categoryId}']?.get as object, { deprecated: true, ...extensions });
    return spec;
  };

  it('refuses a deprecated operation without x-deprecated-since', () => {
    expect(() => setupApp({ spec: deprecate({}) })).toThrow('GET /categories/{categoryId} is deprecated but has no x-deprecated-since');
  });

  it('refuses dates it cannot read and a successor using an unknown parameter', () => {
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': 'soon' }) })).toThrow('x-deprecated-since is not a date');
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': '2026-01-15', 'x-deprecated-sunset': 'later' }) })).toThrow(
      'x-deprecated-sunset is not a date',
    );
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': '2026-01-15', 'x-successor': '/pets?ids={petId}' }) })).toThrow(
      'x-successor uses {petId}, not a path parameter',
    );
  });
});
