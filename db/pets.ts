import { and, asc, eq, gt, inArray, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { writeTransaction, type Db } from './client';
import { categories, inventory, orders, pets } from './schema';

export type Pet = components['schemas']['Pet'];
export type PetStatus = components['schemas']['PetStatus'];
/** NewPet of the contract; `status` may be omitted (`available`), as it may in a request. */
export type NewPet = Omit<components['schemas']['NewPet'], 'status'> & { status?: PetStatus };

export interface PetFilter {
  status?: PetStatus;
  categoryId?: number;
  ids?: number[];
}

const toPet = (row: typeof pets.$inferSelect): Pet => ({
  id: row.id,
  name: row.name,
  categoryId: row.categoryId,
  status: row.status,
});

function requireCategory(db: Db, categoryId: number): void {
  if (!db.select({ id: categories.id }).from(categories).where(eq(categories.id, categoryId)).get()) {
    throw new ApiError('category_not_found', `Category ${categoryId} does not exist`, 422);
  }
}

export function createPetsRepository(db: Db) {
  return {
    /**
     * One page by id, after the given id. Each filter is an equality on the leading
     * column of an index that ends in id (pets_status_idx, pets_category_idx, the
     * primary key), so a deep page costs what the first one does.
     */
    list(filter: PetFilter, page: { after: number; limit: number }): Pet[] {
      const where: SQL[] = [gt(pets.id, page.after)];
      if (filter.status !== undefined) where.push(eq(pets.status, filter.status));
      if (filter.categoryId !== undefined) where.push(eq(pets.categoryId, filter.categoryId));
      if (filter.ids !== undefined) where.push(inArray(pets.id, filter.ids));
      return db
        .select()
        .from(pets)
        .where(and(...where))
        .orderBy(asc(pets.id))
        .limit(page.limit)
        .all()
        .map(toPet);
    },

    findById(id: number): Pet | null {
      const row = db.select().from(pets).where(eq(pets.id, id)).get();
      return row ? toPet(row) : null;
    },

    /**
     * Creates the pet and its inventory entry (quantity 0) together. 422
     * `category_not_found` when the category does not exist.
     */
    create(input: NewPet): Pet {
      return writeTransaction(db, () => {
        requireCategory(db, input.categoryId);
        const row = db
          .insert(pets)
          .values({ name: input.name, categoryId: input.categoryId, status: input.status ?? 'available' })
          .returning()
          .get();
        db.insert(inventory).values({ petId: row.id, quantity: 0 }).run();
        return toPet(row);
      });
    },

    /** Replaces name, category and status (omitted: `available`). Null when there is no such pet. */
    replace(id: number, input: NewPet): Pet | null {
      return writeTransaction(db, () => {
        if (!db.select({ id: pets.id }).from(pets).where(eq(pets.id, id)).get()) return null;
        requireCategory(db, input.categoryId);
        const row = db
          .update(pets)
          .set({ name: input.name, categoryId: input.categoryId, status: input.status ?? 'available' })
          .where(eq(pets.id, id))
          .returning()
          .get();
        return row ? toPet(row) : null;
      });
    },

    /**
     * Deletes the pet and its inventory entry. False when there is no such pet; 409
     * `pet_has_open_orders` while an incomplete order names it. Completed orders keep
     * their petId as history.
     */
    remove(id: number): boolean {
      return writeTransaction(db, () => {
        if (!db.select({ id: pets.id }).from(pets).where(eq(pets.id, id)).get()) return false;
        const open = db
          .select({ id: orders.id })
          .from(orders)
          .where(and(eq(orders.petId, id), eq(orders.complete, false)))
          .limit(1)
          .get();
        if (open) throw new ApiError('pet_has_open_orders', `Pet ${id} has open orders (order ${open.id} at least)`, 409);
        db.delete(inventory).where(eq(inventory.petId, id)).run();
        db.delete(pets).where(eq(pets.id, id)).run();
        return true;
      });
    },
  };
}
