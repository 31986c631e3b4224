// A handler's answer leaves through the app's res.json (server/pipeline/json.ts), an error
// through the error mapper: either way the body as JSON.stringify writes it, its type with
// the charset and its length in bytes; a HEAD gets the same headers and no body.
import request from 'supertest';
import { createPet, setupWithCallers } from './helpers';

const t = setupWithCallers();

describe('JSON answers', () => {
  it('carry their type with the charset and their length in bytes, characters beyond ASCII included', async () => {
    const pet = await createPet(t.app, t.boss, { name: 'Zoë the ☃' });
    const res = await request(t.app).get(`/pets/${pet.id}`).set(t.buyer.auth);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.text).toBe(JSON.stringify(res.body));
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(res.body.name).toBe('Zoë the ☃');
  });

  it('answers HEAD with the GET headers, its length among them, and no body', async () => {
    const pet = await createPet(t.app, t.boss, { name: 'Héloïse' });
    const get = await request(t.app).get(`/pets/${pet.id}`).set(t.buyer.auth);
    const head = await request(t.app).head(`/pets/${pet.id}`).set(t.buyer.auth);
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toBe(get.headers['content-type']);
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
    expect(head.text ?? '').toBe('');
  });

  it('answers an error in the Error shape the same way', async () => {
    const res = await request(t.app).get('/pets/999999').set(t.buyer.auth);
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.text));
    expect(res.body).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
  });
});
