import { and, asc, eq, gt, inArray, sql, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { bound, prepared, writeTransaction, type Db } from './client';
import { inventory, pets } from './schema';
import type { PetStatus } from './pets';

export type InventoryItem = components['schemas']['InventoryItem'];

// InventoryItem.status is the pet's status: it is read through the pet, never copied.
const columns = { petId: pets.id, quantity: inventory.quantity, status: pets.status };

const p = sql.placeholder;

export function createInventoryRepository(db: Db) {
  const byPetId = prepared(() =>
    db.select(columns).from(pets).innerJoin(inventory, eq(inventory.petId, pets.id)).where(eq(pets.id, p('petId'))).prepare(),
  );
  const findByPetId = (petId: number): InventoryItem | null => byPetId().get({ petId }) ?? null;
  const page = (byStatus: boolean) =>
    prepared(() => {
      const where: SQL[] = [gt(pets.id, p('after'))];
      if (byStatus) where.push(eq(pets.status, p('status')));
      return db
        .select(columns)
        .from(pets)
        .innerJoin(inventory, eq(inventory.petId, pets.id))
        .where(and(...where))
        .orderBy(asc(pets.id))
        .limit(p('limit'))
        .prepare();
    });
  const pageAll = page(false);
  const pageByStatus = page(true);
  const setStock = prepared(() =>
    db.update(inventory).set({ quantity: bound('quantity') }).where(eq(inventory.petId, p('petId'))).returning().prepare(),
  );
  const makeAvailable = prepared(() =>
    db
      .update(pets)
      .set({ status: 'available' })
      .where(and(eq(pets.id, p('petId')), inArray(pets.status, ['pending', 'sold'])))
      .prepare(),
  );

  return {
    /**
     * One page by pet id, after the given id. Ordered and filtered on pets' own
     * indexes (the primary key, or pets_status_idx), then one primary-key lookup
     * into inventory per row.
     */
    list(filter: { status?: PetStatus }, page: { after: number; limit: number }): InventoryItem[] {
      const { after, limit } = page;
      if (filter.status === undefined) return pageAll().all({ after, limit });
      return pageByStatus().all({ after, limit, status: filter.status });
    },

    findByPetId,

    /**
     * Sets the stock. Above 0 makes a `pending` or `sold` pet `available` again; 0 leaves
     * the status alone. Null when there is no such pet.
     */
    setQuantity(petId: number, quantity: number): InventoryItem | null {
      return writeTransaction(db, () => {
        const updated = setStock().get({ petId, quantity });
        if (!updated) return null;
        if (quantity > 0) makeAvailable().run({ petId });
        return findByPetId(petId);
      });
    },
  };
}
