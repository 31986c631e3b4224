import { and, asc, eq, gt, inArray, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { writeTransaction, type Db } from './client';
import { inventory, pets } from './schema';
import type { PetStatus } from './pets';

export type InventoryItem = components['schemas']['InventoryItem'];

// InventoryItem.status is the pet's status: it is read through the pet, never copied.
const columns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

export function createInventoryRepository(db: Db) {
  const findByPetId = (petId: number): InventoryItem | null =>
    db.select(columns).from(pets).innerJoin(inventory, eq(inventory.petId, pets.id)).where(eq(pets.id, petId)).get() ?? null;

  return {
    /**
     * One page by pet id, after the given id. Ordered and filtered on pets' own
     * indexes (the primary key, or pets_status_idx), then one primary-key lookup
     * into inventory per row.
     */
    list(filter: { status?: PetStatus }, page: { after: number; limit: number }): InventoryItem[] {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      return db
        .select(columns)
        .from(pets)
        .innerJoin(inventory, eq(inventory.petId, pets.id))
        .where(and(...where))
        .orderBy(asc(pets.id))
        .limit(page.limit)
        .all();
    },

    findByPetId,

    /**
     * Sets the stock. Above 0 makes a `pending` or `sold` pet `available` again; 0 leaves
     * the status alone. Null when there is no such pet.
     */
    setQuantity(petId: number, quantity: number): InventoryItem | null {
      return writeTransaction(db, () => {
        const updated = db.update(inventory).set({ quantity }).where(eq(inventory.petId, petId)).returning().get();
        if (!updated) return null;
        if (quantity > 0) {
          db.update(pets)
            .set({ status: 'available' })
            .where(and(eq(pets.id, petId), inArray(pets.status, ['pending', 'sold'])))
            .run();
        }
        return findByPetId(petId);
      });
    },
  };
}
