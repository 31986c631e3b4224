// What a consumer writes with the typed client, start to finish: sign up, get a key,
// list pets, order one, read the order back, and handle a 409 by its typed code.
// `npx tsx client/example.ts http://localhost:3000` runs it against a service;
// tests/client.test.ts runs it against a fresh one in CI.
import { basicAuth, createPetStoreClient } from './index';

/**
 * Narrows a response whose schema leaves `keys` optional to one that has them. Order marks
 * no field required and Pet leaves `status` optional (the interface's rule); the service
 * sends them all the same, and a consumer checks rather than asserts with `!`.
 */
function has<T extends object, K extends keyof T>(value: T, ...keys: K[]): value is T & Required<Pick<T, K>> {
  return keys.every((key) => value[key] !== undefined);
}

export async function example(baseUrl: string, log: (line: string) => void = console.log): Promise<void> {
  const email = `client-${Date.now()}@example.com`;
  const password = 'correct horse battery staple';

  const open = createPetStoreClient(baseUrl);
  const signUp = await open.POST('/accounts', { body: { email, password } });
  if (signUp.error) throw new Error(`sign-up: ${signUp.error.code}`);

  const created = await open.POST('/api-keys', { headers: { Authorization: basicAuth(email, password) }, body: { name: 'example' } });
  if (created.error) throw new Error(`key: ${created.error.code}`);
  const client = createPetStoreClient(baseUrl, { apiKey: created.data.key });

  const stock = await client.GET('/store/inventory', { params: { query: { status: 'available', limit: 100 } } });
  if (stock.error) throw new Error(`inventory: ${stock.error.code}`);
  const item = stock.data.find((entry) => entry.quantity > 0);
  if (!item) throw new Error('no pet in stock to order');
  const pets = await client.GET('/pets', { params: { query: { ids: [item.petId] } } });
  if (pets.error) throw new Error(`pets: ${pets.error.code}`);
  for (const pet of pets.data) log(`pet ${pet.id}: ${pet.name} (${pet.status ?? 'no status given'})`);

  const placed = await client.POST('/store/orders', { body: { petId: item.petId } });
  if (placed.error) throw new Error(`order: ${placed.error.code}`);
  if (!has(placed.data, 'id')) throw new Error('order: the placed order came back without an id');
  const order = await client.GET('/store/orders/{orderId}', { params: { path: { orderId: placed.data.id } } });
  if (order.error) throw new Error(`read back: ${order.error.code}`);
  if (!has(order.data, 'id', 'petId', 'quantity', 'complete')) throw new Error(`read back: order ${placed.data.id} is missing a field`);
  log(`order ${order.data.id}: ${order.data.quantity} x pet ${order.data.petId}, complete: ${order.data.complete}`);

  // More than the stock: a 409 whose body is the typed Error.
  const tooMany = await client.POST('/store/orders', { body: { petId: item.petId, quantity: 1000 } });
  if (!tooMany.error) throw new Error('an order past the stock was accepted');
  switch (tooMany.error.code) {
    case 'insufficient_stock':
    case 'pet_not_available':
      log(`refused with ${tooMany.response.status} ${tooMany.error.code}: ${tooMany.error.message}`);
      break;
    default:
      throw new Error(`unexpected refusal: ${tooMany.error.code}`);
  }
}

if (require.main === module) {
  const baseUrl = process.argv[2] ?? 'http://localhost:3000';
  example(baseUrl).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
