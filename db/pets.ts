import { and, asc, eq, gt, inArray, sql, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { bound, prepared, writeTransaction, type Db } from './client';
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

const p = sql.placeholder;

export function createPetsRepository(db: Db) {
  const categoryExists = prepared(() =>
    db.select({ id: categories.id }).from(categories).where(eq(categories.id, p('id'))).prepare(),
  );
  const byId = prepared(() => db.select().from(pets).where(eq(pets.id, p('id'))).prepare());
  const petExists = prepared(() => db.select({ id: pets.id }).from(pets).where(eq(pets.id, p('id'))).prepare());
  const insertPet = prepared(() =>
    db.insert(pets).values({ name: p('name'), categoryId: p('categoryId'), status: p('status') }).returning().prepare(),
  );
  const insertStock = prepared(() => db.insert(inventory).values({ petId: p('petId'), quantity: 0 }).prepare());
  const updatePet = prepared(() =>
    db
      .update(pets)
      .set({ name: bound('name'), categoryId: bound('categoryId'), status: bound('status') })
      .where(eq(pets.id, p('id')))
      .returning()
      .prepare(),
  );
  const openOrder = prepared(() =>
    db
      .select({ id: orders.id })
      .from(orders)
      .where(and(eq(orders.petId, p('petId')), eq(orders.complete, false)))
      .limit(1)
      .prepare(),
  );
  const deleteStock = prepared(() => db.delete(inventory).where(eq(inventory.petId, p('id'))).prepare());
  const deletePet = prepared(() => db.delete(pets).where(eq(pets.id, p('id'))).prepare());

  // One statement per combination of filters and number of ids (at most 4 + 4 x 100, as
  // the spec caps ids at 100), each built on first use, so every combination keeps its
  // own index plan: each id is a primary-key search.
  const listStatements = new Map<string, ReturnType<typeof buildList>>();
  function buildList(filter: PetFilter) {
    const where: SQL[] = [gt(pets.id, p('after'))];
    if (filter.status !== undefined) where.push(eq(pets.status, p('status')));
    if (filter.categoryId !== undefined) where.push(eq(pets.categoryId, p('categoryId')));
    if (filter.ids !== undefined) where.push(inArray(pets.id, filter.ids.map((_, i) => p(`id${i}`))));
    return db
      .select()
      .from(pets)
      .where(and(...where))
      .orderBy(asc(pets.id))
      .limit(p('limit'))
      .prepare();
  }

  function requireCategory(categoryId: number): void {
    if (!categoryExists().get({ id: categoryId })) {
      throw new ApiError('category_not_found', `Category ${categoryId} does not exist`, 422);
    }
  }

  return {
    /**
     * One page by id, after the given id. Each filter is an equality on the leading
     * column of an index that ends in id (pets_status_idx, pets_category_idx, the
     * primary key), so a deep page costs what the first one does.
     */
    list(filter: PetFilter, page: { after: number; limit: number }): Pet[] {
      const shape = `${+(filter.status !== undefined)}${+(filter.categoryId !== undefined)}${filter.ids?.length ?? '-'}`;
      let statement = listStatements.get(shape);
      if (!statement) listStatements.set(shape, (statement = buildList(filter)));
      const values: Record<string, unknown> = { after: page.after, limit: page.limit, status: filter.status, categoryId: filter.categoryId };
      filter.ids?.forEach((id, i) => (values[`id${i}`] = id));
      return statement.all(values).map(toPet);
    },

    findById(id: number): Pet | null {
      const row = byId().get({ id });
      return row ? toPet(row) : null;
    },

    /**
     * Creates the pet and its inventory entry (quantity 0) together. 422
     * `category_not_found` when the category does not exist.
     */
    create(input: NewPet): Pet {
      return writeTransaction(db, () => {
        requireCategory(input.categoryId);
        const row = insertPet().get({ name: input.name, categoryId: input.categoryId, status: input.status ?? 'available' });
        insertStock().run({ petId: row.id });
        return toPet(row);
      });
    },

    /** Replaces name, category and status (omitted: `available`). Null when there is no such pet. */
    replace(id: number, input: NewPet): Pet | null {
      return writeTransaction(db, () => {
        if (!petExists().get({ id })) return null;
        requireCategory(input.categoryId);
        const row = updatePet().get({ id, name: input.name, categoryId: input.categoryId, status: input.status ?? 'available' });
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
        if (!petExists().get({ id })) return false;
        const open = openOrder().get({ petId: id });
        if (open) throw new ApiError('pet_has_open_orders', `Pet ${id} has open orders (order ${open.id} at least)`, 409);
        deleteStock().run({ id });
        deletePet().run({ id });
        return true;
      });
    },
  };
}
