// Deprecation headers come from the spec at start-up, for whichever operations it marks
// deprecated (openapi.yaml, info.description, "Stability and deprecation").
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { repoRoot, startServer } from '../scripts/server-process';
import { createDeprecatedCallLog } from '../server/deprecation/call-log';
import { createLogger } from '../server/observability/log';
import { loadSpec, type OpenApiDocument } from '../server/spec';
import { admin, createPgDatabase, customer, expectError, setupApp, testDatabaseUrl, testStorage, type Caller } from './helpers';

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

  it('says so on HEAD, and not on a path with a trailing slash, which is no operation', async () => {
    expect(deprecationHeaders(await request(t.app).head('/pets/7').set(me.auth))).toEqual(expected('7'));
    const slash = await request(t.app).get('/pets/7/').set(me.auth);
    expect(slash.status).toBe(404);
    expect(deprecationHeaders(slash)).toEqual(none);
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
  Object.assign(op('/categories', 'get').responses as object, { '410': { $ref: '#/components/responses/Gone' } });
  Object.assign(op('/categories/{categoryId}', 'get'), {
    deprecated: true,
    'x-deprecated-since': '2026-01-15',
    'x-successor': '/v2/categories/{categoryId}',
  });

  const t = setupApp({
    spec,
    // Before the sunset.
    now: () => Date.parse('2026-12-31T11:59:59Z'),
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

describe('after the sunset', () => {
  // 2027-06-30 (x-deprecated-sunset of GET /pets/{petId} in openapi.yaml), midnight UTC.
  const sunset = Date.parse('2027-06-30T00:00:00Z');
  let clock = sunset - 1;
  const t = setupApp({ now: () => clock });
  let me: Caller;
  beforeAll(async () => {
    me = await customer(t.app);
  });

  it('answers 410 gone with the Link to the successor, from the sunset instant on, with or without a key', async () => {
    clock = sunset - 1;
    expect((await request(t.app).get('/pets/7').set(me.auth)).status).toBe(404);
    clock = sunset;
    for (const res of [
      await request(t.app).get('/pets/7').set(me.auth),
      await request(t.app).get('/pets/7'),
      await request(t.app).head('/pets/7'),
    ]) {
      expect(res.status).toBe(410);
      expect(deprecationHeaders(res)).toEqual({
        deprecation: '@1782777600',
        sunset: 'Wed, 30 Jun 2027 00:00:00 GMT',
        link: '</pets?ids=7>; rel="successor-version"',
      });
    }
    const res = await request(t.app).get('/pets/7');
    expectError(res, 410, 'gone');
    expect(res.body.message).toBe('GET /pets/{petId} was retired on Wed, 30 Jun 2027 00:00:00 GMT; use /pets?ids=7');
  });

  it('leaves the other operations alone', async () => {
    clock = sunset + 365 * 86_400_000;
    expect((await request(t.app).get('/pets?ids=7').set(me.auth)).status).toBe(200);
    expect((await request(t.app).delete('/pets/7').set(me.auth)).status).toBe(403);
  });
});

describe('after the sunset of other operations', () => {
  const spec = structuredClone(loadSpec());
  const op = (path: string, method: string) => spec.paths[path]?.[method] as Record<string, unknown>;
  const gone = { $ref: '#/components/responses/Gone' };
  Object.assign(op('/categories', 'get'), {
    deprecated: true,
    'x-deprecated-since': '2026-01-15',
    'x-deprecated-sunset': '2026-12-31T12:00:00Z',
    'x-successor': '/pets',
  });
  Object.assign(op('/categories', 'get').responses as object, { '410': gone });
  // Deprecated, with no sunset: it never answers 410.
  Object.assign(op('/categories/{categoryId}', 'get'), { deprecated: true, 'x-deprecated-since': '2026-01-15' });
  const t = setupApp({ spec, now: () => Date.parse('2030-01-01T00:00:00Z') });

  it('answers 410 for the operation whose sunset has passed, and only for it', async () => {
    const me = await customer(t.app);
    const list = await request(t.app).get('/categories').set(me.auth);
    expectError(list, 410, 'gone');
    expect(list.headers.link).toBe('</pets>; rel="successor-version"');
    expect(list.body.message).toBe('GET /categories was retired on Thu, 31 Dec 2026 12:00:00 GMT; use /pets');
    expect((await request(t.app).get('/categories/42').set(me.auth)).status).toBe(404);
    expect((await request(t.app).get('/pets/7').set(me.auth)).status).toBe(410);
  });
});

describe('who calls a deprecated operation', () => {
  const { storage } = testStorage();
  const calls = createDeprecatedCallLog(storage, createLogger('silent'));
  let clock = Date.parse('2027-01-10T23:59:00Z');
  const t = setupApp({ storage, deprecatedCalls: calls, now: () => clock });

  it('counts the calls of each account by day, whatever the answer, and keeps the last call', async () => {
    const [early, late] = [await customer(t.app), await customer(t.app)];
    for (let i = 0; i < 3; i++) await request(t.app).get('/pets/7').set(early.auth);
    await request(t.app).get('/pets/0').set(early.auth);
    clock = Date.parse('2027-01-11T08:00:00Z');
    await request(t.app).get('/pets/8').set(late.auth);
    // Not counted: no account known, or an operation that is not deprecated.
    await request(t.app).get('/pets/7');
    await request(t.app).get('/pets?ids=7').set(early.auth);
    // Nothing is written before a flush (the interval, or shutdown).
    expect(await storage.deprecatedCallers('getPetById', '2027-01-01')).toEqual([]);
    await calls.flush();
    expect(await storage.deprecatedCallers('getPetById', '2027-01-01')).toEqual([
      { accountId: late.accountId, email: late.email, calls: 1, lastAt: '2027-01-11T08:00:00.000Z' },
      { accountId: early.accountId, email: early.email, calls: 4, lastAt: '2027-01-10T23:59:00.000Z' },
    ]);
    // Later calls add to the rows already written.
    await request(t.app).get('/pets/7').set(early.auth);
    await calls.flush();
    expect(await storage.deprecatedCallers('getPetById', '2027-01-11')).toEqual([
      { accountId: early.accountId, email: early.email, calls: 1, lastAt: '2027-01-11T08:00:00.000Z' },
      { accountId: late.accountId, email: late.email, calls: 1, lastAt: '2027-01-11T08:00:00.000Z' },
    ]);
    expect(await storage.deprecatedCallers('getPetById', '2027-01-01')).toContainEqual({
      accountId: early.accountId,
      email: early.email,
      calls: 5,
      lastAt: '2027-01-11T08:00:00.000Z',
    });
    expect(await storage.deprecatedCallers('listPets', '2027-01-01')).toEqual([]);
  });
});

describe('npm run deprecations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-deprecations-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lists who called GET /pets/{petId}, written by the service when it stops', async () => {
    const env: Record<string, string> = testDatabaseUrl
      ? { DATABASE_URL: await createPgDatabase(testDatabaseUrl, `petstore_dep${process.pid}`) }
      : { DATABASE_PATH: join(dir, 'petstore.db') };
    const server = await startServer({ ...env, SEED_DEMO_DATA: 'false' });
    let caller: Caller;
    try {
      caller = await customer(server.url as never);
      await request(server.url).get('/pets/7').set(caller.auth).expect(404);
      await request(server.url).get('/pets/7').set(caller.auth).expect(404);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const run = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/deprecations.ts', ...args], {
        cwd: repoRoot,
        env: { ...process.env, ...env, LOG_LEVEL: 'silent' },
      });
    const { stdout } = await run();
    expect(stdout).toContain(`getPetById: 1 account(s) since `);
    expect(stdout).toContain(`  ${caller!.accountId}\t${caller!.email}\t2 call(s)\tlast `);
    await expect(run('--days', '0')).rejects.toMatchObject({ code: 2 });
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

  it('refuses a sunset on an operation that does not declare its 410', () => {
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': '2026-01-15', 'x-deprecated-sunset': '2027-01-01' }) })).toThrow(
      'GET /categories/{categoryId} has an x-deprecated-sunset but does not declare the 410 it answers after it',
    );
  });

  it('refuses dates it cannot read and a successor using an unknown parameter', () => {
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': 'soon' }) })).toThrow('x-deprecated-since is not a date');
    const gone = { responses: { ...(loadSpec().paths['/categories/{categoryId}']?.get as { responses: object }).responses, '410': {} } };
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': '2026-01-15', 'x-deprecated-sunset': 'later', ...gone }) })).toThrow(
      'x-deprecated-sunset is not a date',
    );
    expect(() => setupApp({ spec: deprecate({ 'x-deprecated-since': '2026-01-15', 'x-successor': '/pets?ids={petId}' }) })).toThrow(
      'x-successor uses {petId}, not a path parameter',
    );
  });
});
