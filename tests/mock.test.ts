// MOCK_UNIMPLEMENTED (docs/contract.md, "Mock answers"): operations added to a copy of
// openapi.yaml, their handlers still the generated stub, answer from the spec, after the
// rest of their chain (401, 403, 400, limits) as the real service would; implemented
// operations never. tests/system/changing-the-contract.test.ts does the same on the built
// service of a copy of the project.
import request from 'supertest';
import { notImplemented, type HandlerTable } from '../handlers/types';
import { loadSpec, type OpenApiDocument } from '../server/spec';
import { admin, captureLog, customer, expectError, setupApp, type Caller, type TestApp } from './helpers';

const ref = (name: string) => ({ $ref: `#/components/responses/${name}` });
const pet = { id: 1, name: 'Rex', categoryId: 1, status: 'available' };

/** openapi.yaml with three operations added: a list with named examples, a create with none, a delete. */
function specWithNewOperations(edit: (paths: Record<string, Record<string, unknown>>) => void = () => {}): OpenApiDocument {
  const spec = loadSpec();
  const paths = spec.paths as Record<string, Record<string, unknown>>;
  paths['/categories/{categoryId}/pets'] = {
    parameters: [{ $ref: '#/components/parameters/CategoryId' }],
    get: {
      operationId: 'listCategoryPets',
      tags: ['categories'],
      parameters: [{ $ref: '#/components/parameters/Limit' }],
      responses: {
        '200': {
          description: "The category's pets.",
          content: {
            'application/json': {
              schema: { $ref: '#/components/schemas/Pets' },
              examples: { some: { value: [pet] }, none: { value: [] } },
            },
          },
        },
        '400': ref('BadRequest'),
        '401': ref('Unauthorized'),
        '404': ref('NotFound'),
        '429': ref('TooManyRequests'),
      },
    },
  };
  paths['/categories/{categoryId}/tags'] = {
    parameters: [{ $ref: '#/components/parameters/CategoryId' }],
    post: {
      operationId: 'createCategoryTag',
      tags: ['categories'],
      'x-required-role': 'admin',
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: {
              type: 'object',
              additionalProperties: false,
              required: ['label'],
              properties: { label: { type: 'string', minLength: 1 } },
            },
          },
        },
      },
      responses: {
        '201': {
          description: 'The tag.',
          headers: { Location: { $ref: '#/components/headers/Location' } },
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                required: ['id', 'label', 'createdAt'],
                properties: {
                  id: { $ref: '#/components/schemas/Id' },
                  label: { type: 'string', minLength: 1, maxLength: 40 },
                  colour: { type: 'string', enum: ['red', 'green'] },
                  createdAt: { type: 'string', format: 'date-time' },
                },
              },
            },
          },
        },
        '400': ref('BadRequest'),
        '401': ref('Unauthorized'),
        '403': ref('Forbidden'),
        '409': {
          description: 'A tag with this label exists.',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    },
  };
  paths['/categories/{categoryId}/tags/{tagId}'] = {
    parameters: [
      { $ref: '#/components/parameters/CategoryId' },
      { name: 'tagId', in: 'path', required: true, schema: { $ref: '#/components/schemas/Id' } },
    ],
    delete: {
      operationId: 'deleteCategoryTag',
      tags: ['categories'],
      'x-required-role': 'admin',
      responses: { '204': { description: 'Deleted.' }, '401': ref('Unauthorized'), '403': ref('Forbidden'), '404': ref('NotFound') },
    },
  };
  edit(paths);
  return spec;
}

/** The stubs `npm run generate` would write for them. */
const stubs = Object.fromEntries(
  ['listCategoryPets', 'createCategoryTag', 'deleteCategoryTag'].map((id) => [id, notImplemented(id as never)]),
) as unknown as Partial<HandlerTable>;

describe('MOCK_UNIMPLEMENTED=true', () => {
  const logged = captureLog('info');
  let t: TestApp;
  let boss: Caller;
  let buyer: Caller;
  beforeAll(async () => {
    t = setupApp({ spec: specWithNewOperations(), handlers: stubs, env: { MOCK_UNIMPLEMENTED: 'true' }, log: logged.log });
    boss = await admin(t);
    buyer = await customer(t.app);
  });

  it('lists the operations it mocks in one start-up line', () => {
    expect(logged.lines().filter((l) => String(l.msg).startsWith('MOCK_UNIMPLEMENTED'))).toEqual([
      expect.objectContaining({
        level: 40, // warn
        operations: ['listCategoryPets', 'createCategoryTag', 'deleteCategoryTag'],
        msg: 'MOCK_UNIMPLEMENTED: operations not implemented yet answer from openapi.yaml (X-Mock)',
      }),
    ]);
  });

  it("answers the first 2xx response's first example, saying so in X-Mock", async () => {
    const res = await request(t.app).get('/categories/1/pets').set(buyer.auth);
    expect({ status: res.status, mock: res.headers['x-mock'], body: res.body }).toEqual({ status: 200, mock: 'example=some', body: [pet] });
  });

  it('answers a named example on Prefer: example=NAME', async () => {
    const res = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'example=none');
    expect({ status: res.status, mock: res.headers['x-mock'], body: res.body }).toEqual({ status: 200, mock: 'example=none', body: [] });
  });

  it("answers another documented status on Prefer: code=404, in the Error shape with that status's example", async () => {
    const res = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'code=404');
    expectError(res, 404, 'not_found');
    expect(res.headers['x-mock']).toBe('example');
  });

  it("words an Error of a shared response (NotFound, BadRequest) after the operation, never another operation's example", async () => {
    const notFound = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'code=404');
    const named = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'code=400, example=invalidJson');
    expect([notFound.body, named.body]).toEqual([
      { code: 'not_found', message: 'A mock 404 not_found of listCategoryPets (GET /categories/{categoryId}/pets)', status: 404 },
      { code: 'invalid_json', message: 'A mock 400 invalid_json of listCategoryPets (GET /categories/{categoryId}/pets)', status: 400 },
    ]);
    expect(named.headers['x-mock']).toBe('example=invalidJson');
    // The shared example itself, which speaks of a pet.
    const spec = loadSpec() as unknown as {
      components: { responses: { NotFound: { content: Record<string, { example: { message: string } }> } } };
    };
    expect(spec.components.responses.NotFound.content['application/json']!.example.message).not.toBe(notFound.body.message);
  });

  it('answers 501, naming what there is, for a status or example name the spec does not document', async () => {
    const code = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'code=418');
    expectError(code, 501, 'not_implemented');
    expect(code.body.message).toContain('no 418 answer to mock (Prefer: code=418): it documents 200, 400, 401, 404, 429');
    const example = await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', 'example=lots');
    expectError(example, 501, 'not_implemented');
    expect(example.body.message).toContain('no example named lots (Prefer: example=lots): it has some, none');
    expect(code.headers['x-mock']).toBeUndefined();
  });

  it('logs nothing above info for what a client sends: a 501 for a preference is a designed answer', async () => {
    const before = logged.lines().length;
    const preferences = ['code=418', 'example=lots', 'code=404, example=nope', 'code=999', 'code=abc', 'example=', 'code=200;x'];
    const statuses = [];
    for (const prefer of preferences) {
      statuses.push((await request(t.app).get('/categories/1/pets').set(buyer.auth).set('Prefer', prefer)).status);
    }
    const lines = logged.lines().slice(before);
    expect(statuses).toEqual([501, 501, 501, 501, 501, 501, 200]);
    expect(lines.filter((l) => (l.level as number) > 30)).toEqual([]);
    expect(lines.filter((l) => l.msg === 'request')).toHaveLength(preferences.length);
  });

  it('authenticates and validates first: 401 without a key, 400 on a bad parameter, never a mock', async () => {
    const anonymous = await request(t.app).get('/categories/1/pets');
    expectError(anonymous, 401, 'unauthorized');
    const badLimit = await request(t.app).get('/categories/1/pets?limit=0').set(buyer.auth);
    expectError(badLimit, 400, 'validation_failed');
    const badId = await request(t.app).get('/categories/abc/pets').set(buyer.auth).set('Prefer', 'code=200');
    expectError(badId, 400, 'validation_failed');
    expect([anonymous, badLimit, badId].map((r) => r.headers['x-mock'])).toEqual([undefined, undefined, undefined]);
  });

  it('authorises and reads the body first: 403 for a customer, 400 for a body the schema refuses', async () => {
    expectError(await request(t.app).post('/categories/1/tags').set(buyer.auth).send({ label: 'calm' }), 403, 'forbidden');
    expectError(await request(t.app).post('/categories/1/tags').set(boss.auth).send({ label: '' }), 400, 'validation_failed');
    expectError(await request(t.app).post('/categories/1/tags').set(boss.auth).send({ label: 'calm', id: 1 }), 400, 'validation_failed');
  });

  it('makes an answer from the schema when there is no example: valid, the same every time, with a Location', async () => {
    const first = await request(t.app).post('/categories/1/tags').set(boss.auth).send({ label: 'calm' });
    const again = await request(t.app).post('/categories/7/tags').set(boss.auth).send({ label: 'shy' });
    expect({ status: first.status, mock: first.headers['x-mock'], location: first.headers.location }).toEqual({
      status: 201,
      mock: 'schema',
      location: '/categories/1/tags/1',
    });
    // Required and optional fields, from the schema's own examples (Id), enums and formats.
    expect(first.body).toEqual({ id: 1, label: expect.any(String), colour: 'red', createdAt: expect.any(String) });
    expect(Number.isNaN(Date.parse(first.body.createdAt))).toBe(false);
    expect(again.body).toEqual(first.body);
    expect(again.headers.location).toBe('/categories/7/tags/1');
  });

  it('makes an Error from its schema, with the status it answers, when that response has no example', async () => {
    const res = await request(t.app).post('/categories/1/tags').set(boss.auth).set('Prefer', 'code=409').send({ label: 'calm' });
    expect({ status: res.status, mock: res.headers['x-mock'] }).toEqual({ status: 409, mock: 'schema' });
    expect(res.body).toEqual({ code: expect.any(String), message: 'A mock 409: openapi.yaml gives no example for it', status: 409 });
  });

  it('answers a response without content with no body', async () => {
    const res = await request(t.app).delete('/categories/1/tags/2').set(boss.auth);
    expect({ status: res.status, mock: res.headers['x-mock'], body: res.text }).toEqual({ status: 204, mock: 'empty', body: '' });
  });

  it('never mocks an implemented operation, whatever the request prefers', async () => {
    const res = await request(t.app).get('/categories').set(buyer.auth).set('Prefer', 'code=404');
    expect({ status: res.status, mock: res.headers['x-mock'], body: res.body }).toEqual({ status: 200, mock: undefined, body: [] });
  });
});

describe('MOCK_UNIMPLEMENTED', () => {
  it('keeps the rate limits: past the per-address limit a stub is 429, not a mock', async () => {
    const t = setupApp({
      spec: specWithNewOperations(),
      handlers: stubs,
      env: { MOCK_UNIMPLEMENTED: 'true', RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '4' },
    });
    const buyer = await customer(t.app); // two requests: sign-up and a key
    const statuses: Array<[number, string | undefined]> = [];
    for (let i = 0; i < 3; i++) {
      const res = await request(t.app).get('/categories/1/pets').set(buyer.auth);
      statuses.push([res.status, res.headers['x-mock']]);
    }
    expect(statuses).toEqual([
      [200, 'example=some'],
      [200, 'example=some'],
      [429, undefined],
    ]);
  });

  it('off (the default), a stub answers 501 not_implemented', async () => {
    const t = setupApp({ spec: specWithNewOperations(), handlers: stubs });
    const buyer = await customer(t.app);
    const res = await request(t.app).get('/categories/1/pets').set(buyer.auth);
    expectError(res, 501, 'not_implemented');
    expect(res.headers['x-mock']).toBeUndefined();
  });

  it('stops start-up, naming the operation, when an answer does not fit its schema', () => {
    const spec = specWithNewOperations((paths) => {
      const get = paths['/categories/{categoryId}/pets']?.get as { responses: Record<string, { content: Record<string, object> }> };
      get.responses['200']!.content['application/json'] = { schema: { $ref: '#/components/schemas/Pets' }, example: [{ ...pet, id: 0 }] };
    });
    expect(() => setupApp({ spec, handlers: stubs, env: { MOCK_UNIMPLEMENTED: 'true' } })).toThrow(
      'MOCK_UNIMPLEMENTED: listCategoryPets (GET /categories/{categoryId}/pets) 200 (example) does not fit its schema: /0/id must be >= 1',
    );
  });
});
