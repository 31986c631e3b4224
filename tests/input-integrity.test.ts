// What a client sends is either taken exactly or refused: no value that is accepted may
// later break a read, no number is silently rounded, no text silently replaced.
import request from 'supertest';
import { createPet, customer, expectError, password, setupWithCallers } from './helpers';

const t = setupWithCallers();

async function placeOrder(): Promise<number> {
  const pet = await createPet(t.app, t.boss, { stock: 5 });
  const res = await request(t.app).post('/store/orders').set(t.buyer.auth).send({ petId: pet.id, quantity: 1 });
  expect(res.status).toBe(201);
  return res.body.id as number;
}

describe('a date-time is accepted only if it can be stored and read back', () => {
  it('refuses a shipDate that is year 10000 in UTC, and completes nothing', async () => {
    const id = await placeOrder();
    const res = await request(t.app)
      .patch(`/store/orders/${id}`)
      .set(t.boss.auth)
      .send({ complete: true, shipDate: '9999-12-31T23:59:59-23:59' });
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).toContain('request/body/shipDate');
    const read = await request(t.app).get(`/store/orders/${id}`).set(t.boss.auth);
    expect(read.status).toBe(200);
    expect(read.body.complete).toBe(false);
  });

  it('refuses an expiresAt that is year 10000 in UTC, and stores no key', async () => {
    const caller = await customer(t.app);
    const before = await request(t.app).get('/api-keys').set(caller.auth);
    const res = await request(t.app).post('/api-keys').auth(caller.email, password).send({ expiresAt: '9999-12-31T23:59:59-23:59' });
    expectError(res, 400, 'validation_failed');
    const after = await request(t.app).get('/api-keys').set(caller.auth);
    expect(after.status).toBe(200);
    expect(after.body).toHaveLength(before.body.length);
  });

  // Every extreme corner of RFC 3339 (first and last moment of the first, an ordinary
  // and the last four-digit year, with the widest offsets): whatever the service
  // accepts, every documented read of it answers 200 afterwards.
  const extremes = ['0000', '1970', '9999'].flatMap((year) =>
    ['01-01T00:00:00', '12-31T23:59:59.999'].flatMap((moment) => ['Z', '+23:59', '-23:59'].map((offset) => `${year}-${moment}${offset}`)),
  );

  it('leaves every order read answering 200 whatever shipDate was accepted', async () => {
    for (const shipDate of extremes) {
      const id = await placeOrder();
      const res = await request(t.app).patch(`/store/orders/${id}`).set(t.boss.auth).send({ complete: true, shipDate });
      const reads = [
        (await request(t.app).get(`/store/orders/${id}`).set(t.boss.auth)).status,
        (await request(t.app).get('/store/orders?limit=100').set(t.boss.auth)).status,
      ];
      expect({ shipDate, status: res.status === 200 || res.status === 400, reads }).toEqual({ shipDate, status: true, reads: [200, 200] });
    }
  });

  it('leaves the key list answering 200 whatever expiresAt was accepted', async () => {
    const caller = await customer(t.app);
    for (const expiresAt of extremes) {
      const res = await request(t.app).post('/api-keys').auth(caller.email, password).send({ expiresAt });
      const read = (await request(t.app).get('/api-keys?limit=100').set(caller.auth)).status;
      expect({ expiresAt, status: [201, 400].includes(res.status), read }).toEqual({ expiresAt, status: true, read: 200 });
    }
  });
});

describe('numbers are exact or refused', () => {
  it.each(['1.9999999999999999', '1.0000000000000001', '2.00000000000000001e0'])(
    'refuses petId %s, which no double holds exactly',
    async (petId) => {
      const res = await request(t.app)
        .post('/store/orders')
        .set(t.buyer.auth)
        .set('Content-Type', 'application/json')
        .send(`{"petId":${petId}}`);
      expectError(res, 400, 'validation_failed');
      expect(res.body.message).toContain(petId);
    },
  );

  it('refuses quantity 999999.99999999999 instead of storing 1,000,000', async () => {
    const pet = await createPet(t.app, t.boss, { stock: 1 });
    const res = await request(t.app)
      .put(`/store/inventory/${pet.id}`)
      .set(t.boss.auth)
      .set('Content-Type', 'application/json')
      .send('{"quantity":999999.99999999999}');
    expectError(res, 400, 'validation_failed');
    expect((await request(t.app).get(`/store/inventory/${pet.id}`).set(t.boss.auth)).body.quantity).toBe(1);
  });

  it('still takes exact decimal and exponent forms of an integer', async () => {
    const pet = await createPet(t.app, t.boss, { stock: 1 });
    for (const text of ['2', '2.0', '2e0', '0.2e1', '-0']) {
      const res = await request(t.app)
        .put(`/store/inventory/${pet.id}`)
        .set(t.boss.auth)
        .set('Content-Type', 'application/json')
        .send(`{"quantity":${text}}`);
      expect(res.status).toBe(200);
      expect(res.body.quantity).toBe(Number(text) === 0 ? 0 : 2);
    }
  });

  const lists = ['/pets', '/categories', '/store/inventory', '/store/orders', '/api-keys'];
  const cases = lists.flatMap((path) => ['Infinity', '-Infinity', '1e400', '1e1', '0x10', '+5', '5.0'].map((v) => [path, v]));
  it.each(cases)('answers %s?limit=%s with 400 validation_failed', async (path, value) => {
    const res = await request(t.app)
      .get(`${path}?limit=${encodeURIComponent(value)}`)
      .set(t.boss.auth);
    expectError(res, 400, 'validation_failed');
  });

  it.each(['Infinity', '1e3', '0x10', '+1', '1.0000000000000001', '1.0', '01', '-1', '0', '%2B1', ' 1'])(
    'answers /pets/%s with 400 validation_failed: ids are canonical positive integers',
    async (id) => {
      const pet = await createPet(t.app, t.boss);
      expect(pet.id).toBeGreaterThan(0);
      const res = await request(t.app).get(`/pets/${id}`).set(t.boss.auth);
      expectError(res, 400, 'validation_failed');
    },
  );

  it.each([
    ['get', '/categories/1e0'],
    ['get', '/store/orders/0x1'],
    ['get', '/store/inventory/+1'],
    ['delete', '/api-keys/1.0'],
    ['get', '/messages/Infinity'],
  ] as const)('answers %s %s with 400 validation_failed: every id path is checked', async (method, path) => {
    expectError(await request(t.app)[method](path).set(t.boss.auth), 400, 'validation_failed');
  });
});

describe('text is what was sent, or refused', () => {
  const post = () => request(t.app).post('/categories').set(t.boss.auth);

  it.each(['latin1', 'iso-8859-1', 'utf-16'])('refuses charset=%s with invalid_content_type', async (charset) => {
    const res = await post()
      .set('Content-Type', `application/json; charset=${charset}`)
      .serialize((bytes) => bytes)
      .send(Buffer.from('{"name":"caf\xe9"}', 'latin1'));
    expectError(res, 400, 'invalid_content_type');
  });

  it.each(['utf-8', 'UTF-8', '"utf-8"'])('takes charset=%s', async (charset) => {
    const name = `Café ${charset} ${Date.now()}`;
    const res = await post().set('Content-Type', `application/json; charset=${charset}`).send(JSON.stringify({ name }));
    expect({ status: res.status, body: res.body }).toEqual({ status: 201, body: expect.objectContaining({ name }) });
  });

  it('refuses invalid UTF-8 bytes with invalid_json', async () => {
    const body = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
    // Raw bytes: superagent would otherwise serialise the Buffer as JSON.
    const res = await post()
      .set('Content-Type', 'application/json')
      .serialize((bytes) => bytes)
      .send(body);
    expectError(res, 400, 'invalid_json');
  });

  it.each(['\\ud800', '\\udc00', 'a\\ud83d', '\\ud83dx'])('refuses the lone surrogate escape %s with invalid_json', async (escape) => {
    const res = await post().set('Content-Type', 'application/json').send(`{"name":"${escape}"}`);
    expectError(res, 400, 'invalid_json');
  });

  it.each([
    ['a category name', '/categories', '{"name":"a\\u0000b"}'],
    ['a message', '/messages', '{"message":"\\u0000}#"}'],
    ['a property name', '/categories', '{"name":"Ok","\\u0000":1}'],
  ])('refuses U+0000 in %s with validation_failed, on every engine', async (_what, path, body) => {
    const res = await request(t.app).post(path).set(t.boss.auth).set('Content-Type', 'application/json').send(body);
    expectError(res, 400, 'validation_failed');
  });

  it('takes a surrogate pair escape as the character it names', async () => {
    const res = await post().set('Content-Type', 'application/json').send('{"name":"Dog \\ud83d\\udc36"}');
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('Dog \u{1F436}');
  });
});

describe('a member name appears once per object (I-JSON, RFC 7493)', () => {
  const send = (body: string) => request(t.app).post('/categories').set(t.boss.auth).set('Content-Type', 'application/json').send(body);

  it.each([
    ['at the top level', '{"name":"Dogs","name":"Cats"}'],
    ['in a nested object', '{"name":"Dogs","extra":{"a":1,"b":{"c":2,"c":3}}}'],
    ['in an object inside an array', '{"name":"Dogs","extra":[{"a":1},{"a":2,"b":3,"a":4}]}'],
    ['written once plainly and once with an escape', '{"name":"Dogs","\\u006eame":"Cats"}'],
    ['written with two different escapes', '{"extra":{"\\u0061":1,"\\u0041":2,"\\u0061":3},"name":"Dogs"}'],
  ])('refuses a name given twice %s with invalid_json', async (_where, body) => {
    const res = await send(body);
    expectError(res, 400, 'invalid_json');
    expect(res.body.message).toMatch(/twice/);
  });

  it('takes equal names in sibling objects, and a value equal to a name', async () => {
    // Not duplicates: the schema, not the JSON check, refuses the unknown `extra`.
    const res = await send('{"name":"Dogs","extra":[{"a":1},{"a":2}],"b":{"name":1},"c":{"x":{"y":1},"y":2}}');
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).toMatch(/extra|unknown property/);
    const ok = await send(`{"name":"name ${process.pid}","description":"name"}`);
    expect(ok.status).toBe(201);
  });
});
