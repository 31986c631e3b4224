// The demo catalogue `npm start` loads into a brand-new database, so a first run has
// something to list and order. Written through domain/, so it obeys the same rules as the
// API (every pet gets its inventory entry, stock sets the status).
import type { Store } from '../domain/store';
import type { PetStatus } from '../domain/types';

const demo: Array<{
  category: string;
  description: string;
  pets: Array<{ name: string; stock: number; status: PetStatus }>;
}> = [
  {
    category: 'Dogs',
    description: 'Loyal, loud, and always hungry.',
    pets: [
      { name: 'Rex', stock: 3, status: 'available' },
      { name: 'Biscuit', stock: 1, status: 'available' },
    ],
  },
  {
    category: 'Cats',
    description: 'They will let you know.',
    pets: [
      { name: 'Whiskers', stock: 2, status: 'available' },
      { name: 'Tom', stock: 0, status: 'sold' },
    ],
  },
  {
    category: 'Rabbits',
    description: 'Quiet, quick, and fond of carrots.',
    pets: [{ name: 'Clover', stock: 5, status: 'available' }],
  },
];

/**
 * Loads the demo catalogue. Each step is one store rule, so a start interrupted halfway
 * leaves a smaller catalogue, never a broken one; it runs only on a brand-new database.
 */
export async function seedDemoData(store: Store): Promise<{ categories: number; pets: number }> {
  let pets = 0;
  for (const { category, description, pets: animals } of demo) {
    const { id: categoryId } = await store.categories.create({ name: category, description });
    for (const { name, stock, status } of animals) {
      const pet = await store.pets.create({ name, categoryId, status });
      if (stock > 0) await store.inventory.setQuantity(pet.id, stock);
      pets++;
    }
  }
  return { categories: demo.length, pets };
}
