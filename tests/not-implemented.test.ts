// Operations that are routed but not served yet: none any more. The list stays pinned
// (empty), and every operation of the contract is called once with a valid request and
// must answer its documented success status, never 501.
import request from 'supertest';
import { handlers } from '../handlers';
import { isNotImplemented, notImplemented } from '../server/operations';
import { operationTable, type OperationId } from '../generated/operations';
import { checkSpec } from '../scripts/spec-check';
import { loadSpec } from '../server/spec';
import { admin, customer, expectError, password, setupApp, uniqueEmail } from './helpers';

const stillNotImplemented: string[] = [];

describe('operations not implemented yet', () => {
  it('are exactly the pinned list', () => {
    const actual = Object.entries(handlers)
      .filter(([, handler]) => isNotImplemented(handler))
      .map(([id]) => id);
    expect(actual.sort()).toEqual([...stillNotImplemented].sort());
  });

  it('every operation of the spec has a handler and every handler an operation', () => {
    expect(Object.keys(handlers).sort()).toEqual(Object.keys(operationTable).sort());
  });

  it('a document that is not valid OpenAPI is refused by `npm run generate`, naming where', () => {
    const spec = loadSpec();
    expect(() => checkSpec(spec)).not.toThrow();
    (spec.paths['/pets'] as Record<string, Record<string, unknown>>).get!.responses = 'none';
    expect(() => checkSpec(spec)).toThrow(/is not valid OpenAPI 3\.\d\.\d:\n {2}\/paths\/~1pets\/get\/responses: must be object/);
  });

  it('a handler whose operation left the spec stops start-up, named', () => {
    const spec = loadSpec();
    delete (spec.paths['/healthz'] as Record<string, unknown>).get;
    expect(() => setupApp({ spec })).toThrow('Handlers with no operation in openapi.yaml: getHealth. Delete them');
  });

  it('an operation of the spec without a handler stops start-up, named', () => {
    const spec = loadSpec();
    (spec.paths['/healthz'] as Record<string, unknown>).post = {
      operationId: 'pokeHealth',
      tags: ['service'],
      responses: { '204': { description: 'Poked.' } },
    };
    expect(() => setupApp({ spec })).toThrow('Operation pokeHealth (POST /healthz) has no matching handler: run `npm run generate`');
  });

  it('answer 501 not_implemented in the Error shape, through the same handler table', async () => {
    const t = setupApp({ handlers: { getHealth: notImplemented('getHealth') } });
    expectError(await request(t.app).get('/healthz'), 501, 'not_implemented');
  });
});

describe('every operation of the contract', () => {
  const spec = loadSpec();
  /** The one 2xx status the spec documents for the operation. */
  const successOf = (id: OperationId): number => {
    const { method, path } = operationTable[id];
    const responses = (spec.paths[path]?.[method] as { responses: Record<string, unknown> }).responses;
    const statuses = Object.keys(responses).filter((s) => s.startsWith('2'));
    if (statuses.length !== 1) throw new Error(`${id} documents ${statuses.length} success statuses`);
    return Number(statuses[0]);
  };

  it('answers a valid request with its documented success status', async () => {
    const t = setupApp();
    const boss = await admin(t);
    const called = new Set<OperationId>();
    const call = async (id: OperationId, req: request.Test) => {
      const res = await req;
      expect({ id, status: res.status, body: res.status >= 300 ? res.body : undefined }).toEqual({
        id,
        status: successOf(id),
        body: undefined,
      });
      called.add(id);
      return res.body;
    };
    const app = request(t.app);

    await call('getHealth', app.get('/healthz'));
    await call('getReadiness', app.get('/readyz'));
    const email = uniqueEmail('every-op');
    await call('createAccount', app.post('/accounts').send({ email, password }));
    const { key } = await call('createApiKey', app.post('/api-keys').auth(email, password).send({ name: 'every-op' }));
    const me = { Authorization: `Bearer ${key}` };
    const spare = await customer(t.app);
    await call('listApiKeys', app.get('/api-keys').set(me));

    const category = await call('createCategory', app.post('/categories').set(boss.auth).send({ name: 'Dogs' }));
    const empty = await call('createCategory', app.post('/categories').set(boss.auth).send({ name: 'Unused' }));
    await call('listCategories', app.get('/categories').set(me));
    await call('getCategory', app.get(`/categories/${category.id}`).set(me));
    await call('updateCategory', app.put(`/categories/${category.id}`).set(boss.auth).send({ name: 'Dogs', description: 'Woof' }));

    const pet = await call('createPet', app.post('/pets').set(boss.auth).send({ name: 'Rex', categoryId: category.id }));
    await call('listPets', app.get('/pets').set(me));
    await call('getPetById', app.get(`/pets/${pet.id}`).set(me));
    await call('updatePet', app.put(`/pets/${pet.id}`).set(boss.auth).send({ name: 'Rex', categoryId: category.id }));
    await call('updateInventory', app.put(`/store/inventory/${pet.id}`).set(boss.auth).send({ quantity: 5 }));
    await call('listInventory', app.get('/store/inventory').set(me));
    await call('getInventoryItem', app.get(`/store/inventory/${pet.id}`).set(me));

    const kept = await call('placeOrder', app.post('/store/orders').set(me).send({ petId: pet.id }));
    const cancelled = await call('placeOrder', app.post('/store/orders').set(me).send({ petId: pet.id, quantity: 2 }));
    await call('listOrders', app.get('/store/orders').set(me));
    await call('getOrder', app.get(`/store/orders/${kept.id}`).set(me));
    await call('fulfilOrder', app.patch(`/store/orders/${kept.id}`).set(boss.auth).send({ complete: true }));
    await call('cancelOrder', app.delete(`/store/orders/${cancelled.id}`).set(me));

    const message = await call('sendMessage', app.post('/messages').set(me).send({ message: 'Hello' }));
    await call('getMessage', app.get(`/messages/${message.id}`).set(me));

    const spareKey = (await app.get('/api-keys').set(spare.auth)).body[0];
    await call('revokeApiKey', app.delete(`/api-keys/${spareKey.id}`).set(spare.auth));
    await call('deletePet', app.delete(`/pets/${pet.id}`).set(boss.auth));
    await call('deleteCategory', app.delete(`/categories/${empty.id}`).set(boss.auth));

    expect([...called].sort()).toEqual(Object.keys(operationTable).sort());
  });
});
