import { and, asc, eq, gt, ne } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { writeTransaction, type Db } from './client';
import { categories, pets } from './schema';

export type Category = components['schemas']['Category'];
export type NewCategory = components['schemas']['NewCategory'];

const toCategory = (row: typeof categories.$inferSelect): Category => ({
  id: row.id,
  name: row.name,
  ...(row.description !== null && { description: row.description }),
});

// The unique key behind "names are unique ignoring case".
const nameKeyOf = (name: string) => name.toLowerCase();

const nameTaken = (name: string) => new ApiError('conflict', `A category named "${name}" already exists`, 409);

export function createCategoriesRepository(db: Db) {
  return {
    /** One page by id, after the given id. */
    list(page: { after: number; limit: number }): Category[] {
      return db
        .select()
        .from(categories)
        .where(gt(categories.id, page.after))
        .orderBy(asc(categories.id))
        .limit(page.limit)
        .all()
        .map(toCategory);
    },

    findById(id: number): Category | null {
      const row = db.select().from(categories).where(eq(categories.id, id)).get();
      return row ? toCategory(row) : null;
    },

    /** Throws 409 `conflict` when the name is taken, ignoring case. */
    create(input: NewCategory): Category {
      const row = db
        .insert(categories)
        .values({ name: input.name, nameKey: nameKeyOf(input.name), description: input.description ?? null })
        .onConflictDoNothing({ target: categories.nameKey })
        .returning()
        .get();
      if (!row) throw nameTaken(input.name);
      return toCategory(row);
    },

    /**
     * Replaces name and description (an omitted description is removed). Null when there
     * is no such category; 409 `conflict` when another category has the name.
     */
    replace(id: number, input: NewCategory): Category | null {
      return writeTransaction(db, () => {
        if (!db.select({ id: categories.id }).from(categories).where(eq(categories.id, id)).get()) return null;
        const nameKey = nameKeyOf(input.name);
        const other = db
          .select({ id: categories.id })
          .from(categories)
          .where(and(eq(categories.nameKey, nameKey), ne(categories.id, id)))
          .get();
        if (other) throw nameTaken(input.name);
        const row = db
          .update(categories)
          .set({ name: input.name, nameKey, description: input.description ?? null })
          .where(eq(categories.id, id))
          .returning()
          .get();
        return row ? toCategory(row) : null;
      });
    },

    /** False when there is no such category; 409 `category_in_use` while pets use it. */
    remove(id: number): boolean {
      return writeTransaction(db, () => {
        if (!db.select({ id: categories.id }).from(categories).where(eq(categories.id, id)).get()) return false;
        const used = db.select({ id: pets.id }).from(pets).where(eq(pets.categoryId, id)).limit(1).get();
        if (used) throw new ApiError('category_in_use', `Category ${id} is used by pets (pet ${used.id} at least)`, 409);
        db.delete(categories).where(eq(categories.id, id)).run();
        return true;
      });
    },
  };
}
