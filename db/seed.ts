// The demo catalogue `npm start` loads into a brand-new database, so a first run has
// something to list and order. Written through the repositories, so it obeys the same
// rules as the API (every pet gets its inventory entry, stock sets the status).
import type { components } from '../generated/openapi';
import { writeTransaction, type Db } from './client';
import { createRepositories } from './repositories';

type PetStatus = components['schemas']['PetStatus'];

const demo: Array<{
  category: string;
  description: string;
  pets: Array<{ name: string; stock: number; status?: PetStatus }>;
}> = [
  {
    category: 'Dogs',
    description: 'Loyal, loud, and always hungry.',
    pets: [
      { name: 'Rex', stock: 3 },
      { name: 'Biscuit', stock: 1 },
    ],
  },
  {
    category: 'Cats',
    description: 'They will let you know.',
    pets: [
      { name: 'Whiskers', stock: 2 },
      { name: 'Tom', stock: 0, status: 'sold' },
    ],
  },
  {
    category: 'Rabbits',
    description: 'Quiet, quick, and fond of carrots.',
    pets: [{ name: 'Clover', stock: 5 }],
  },
];

/** Loads the demo catalogue in one transaction: all of it or nothing. */
export function seedDemoData(db: Db): { categories: number; pets: number } {
  const repos = createRepositories(db);
  return writeTransaction(db, () => {
    let pets = 0;
    for (const { category, description, pets: animals } of demo) {
      const { id: categoryId } = repos.categories.create({ name: category, description });
      for (const { name, stock, status } of animals) {
        const pet = repos.pets.create({ name, categoryId, status: status ?? 'available' });
        if (stock > 0) repos.inventory.setQuantity(pet.id, stock);
        pets++;
      }
    }
    return { categories: demo.length, pets };
  });
}
