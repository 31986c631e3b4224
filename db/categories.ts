import { and, asc, eq, gt, ne, sql } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { bound, prepared, writeTransaction, type Db } from './client';
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

const p = sql.placeholder;

export function createCategoriesRepository(db: Db) {
  const pageOf = prepared(() =>
    db.select().from(categories).where(gt(categories.id, p('after'))).orderBy(asc(categories.id)).limit(p('limit')).prepare(),
  );
  const byId = prepared(() => db.select().from(categories).where(eq(categories.id, p('id'))).prepare());
  const exists = prepared(() => db.select({ id: categories.id }).from(categories).where(eq(categories.id, p('id'))).prepare());
  const insert = prepared(() =>
    db
      .insert(categories)
      .values({ name: p('name'), nameKey: p('nameKey'), description: p('description') })
      .onConflictDoNothing({ target: categories.nameKey })
      .returning()
      .prepare(),
  );
  const otherNamed = prepared(() =>
    db
      .select({ id: categories.id })
      .from(categories)
      .where(and(eq(categories.nameKey, p('nameKey')), ne(categories.id, p('id'))))
      .prepare(),
  );
  const update = prepared(() =>
    db
      .update(categories)
      .set({ name: bound('name'), nameKey: bound('nameKey'), description: bound('description') })
      .where(eq(categories.id, p('id')))
      .returning()
      .prepare(),
  );
  const usedBy = prepared(() => db.select({ id: pets.id }).from(pets).where(eq(pets.categoryId, p('id'))).limit(1).prepare());
  const remove = prepared(() => db.delete(categories).where(eq(categories.id, p('id'))).prepare());

  return {
    /** One page by id, after the given id. */
    list(page: { after: number; limit: number }): Category[] {
      return pageOf().all({ after: page.after, limit: page.limit }).map(toCategory);
    },

    findById(id: number): Category | null {
      const row = byId().get({ id });
      return row ? toCategory(row) : null;
    },

    /** Throws 409 `conflict` when the name is taken, ignoring case. */
    create(input: NewCategory): Category {
      const row = insert().get({ name: input.name, nameKey: nameKeyOf(input.name), description: input.description ?? null });
      if (!row) throw nameTaken(input.name);
      return toCategory(row);
    },

    /**
     * Replaces name and description (an omitted description is removed). Null when there
     * is no such category; 409 `conflict` when another category has the name.
     */
    replace(id: number, input: NewCategory): Category | null {
      return writeTransaction(db, () => {
        if (!exists().get({ id })) return null;
        const nameKey = nameKeyOf(input.name);
        if (otherNamed().get({ nameKey, id })) throw nameTaken(input.name);
        const row = update().get({ id, name: input.name, nameKey, description: input.description ?? null });
        return row ? toCategory(row) : null;
      });
    },

    /** False when there is no such category; 409 `category_in_use` while pets use it. */
    remove(id: number): boolean {
      return writeTransaction(db, () => {
        if (!exists().get({ id })) return false;
        const used = usedBy().get({ id });
        if (used) throw new ApiError('category_in_use', `Category ${id} is used by pets (pet ${used.id} at least)`, 409);
        remove().run({ id });
        return true;
      });
    },
  };
}
