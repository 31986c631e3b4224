// Orders and the store rules of PRODUCT.md section 4. Each rule is one function running
// one IMMEDIATE transaction: it takes the write lock before reading, so what it checks
// is still true when it writes, across connections and processes. A broken rule throws
// the contract's ApiError, which rolls the transaction back; a missing row is null/false.
import { and, asc, eq, gt, sql, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { bound, prepared, writeTransaction, type Db } from './client';
import { createIdempotencyRepository, requestHashOf, type StoredResponse } from './idempotency';
import { inventory, orders, pets } from './schema';
import type { Role } from './accounts';

export type Order = components['schemas']['Order'];

/** Who is asking: a customer sees only its own orders, an admin every order. */
export interface Viewer {
  accountId: number;
  role: Role;
}

export interface NewOrder {
  accountId: number;
  petId: number;
  quantity: number;
  /** The client's Idempotency-Key, if it sent one. */
  idempotencyKey?: string | undefined;
}

const maxStock = 1_000_000;

const toOrder = (row: typeof orders.$inferSelect): Order => ({
  id: row.id,
  petId: row.petId,
  quantity: row.quantity,
  complete: row.complete,
  ...(row.shipDate !== null && { shipDate: row.shipDate }),
});

const p = sql.placeholder;

// A customer's statements carry the account condition; an admin's have none.
const visibleTo = (role: Role): SQL[] => (role === 'admin' ? [] : [eq(orders.accountId, p('accountId'))]);

const toStored = (error: ApiError): StoredResponse => ({
  status: error.status,
  body: { code: error.code, message: error.message, status: error.status },
});

export function createOrdersRepository(db: Db) {
  const idempotency = createIdempotencyRepository(db);

  const petStatus = prepared(() => db.select({ status: pets.status }).from(pets).where(eq(pets.id, p('petId'))).prepare());
  const setPetStatus = prepared(() => db.update(pets).set({ status: bound('status') }).where(eq(pets.id, p('petId'))).prepare());
  const stockOf = prepared(() =>
    db.select({ quantity: inventory.quantity }).from(inventory).where(eq(inventory.petId, p('petId'))).prepare(),
  );
  const setStock = prepared(() =>
    db.update(inventory).set({ quantity: bound('quantity') }).where(eq(inventory.petId, p('petId'))).prepare(),
  );
  const insertOrder = prepared(() =>
    db
      .insert(orders)
      .values({ accountId: p('accountId'), petId: p('petId'), quantity: p('quantity'), complete: false, createdAt: p('createdAt') })
      .returning()
      .prepare(),
  );
  const byId = prepared(() => db.select().from(orders).where(eq(orders.id, p('id'))).prepare());
  const complete = prepared(() =>
    db.update(orders).set({ complete: true, shipDate: bound('shipDate') }).where(eq(orders.id, p('id'))).returning().prepare(),
  );
  const openForPet = prepared(() =>
    db
      .select({ id: orders.id })
      .from(orders)
      .where(and(eq(orders.petId, p('petId')), eq(orders.complete, false)))
      .limit(1)
      .prepare(),
  );
  const deleteOrder = prepared(() => db.delete(orders).where(eq(orders.id, p('id'))).prepare());
  const visibleById = {
    admin: byId,
    customer: prepared(() =>
      db
        .select()
        .from(orders)
        .where(and(eq(orders.id, p('id')), ...visibleTo('customer')))
        .prepare(),
    ),
  };
  // One statement per viewer kind and `complete` filter, each with its own index.
  const page = (role: Role, byComplete: boolean) =>
    prepared(() => {
      const where = [...visibleTo(role), gt(orders.id, p('after'))];
      // A placeholder skips the column's boolean mapping: `complete` is bound as 0/1.
      if (byComplete) where.push(eq(orders.complete, p('complete')));
      return db
        .select()
        .from(orders)
        .where(and(...where))
        .orderBy(asc(orders.id))
        .limit(p('limit'))
        .prepare();
    });
  const pages = {
    admin: { all: page('admin', false), byComplete: page('admin', true) },
    customer: { all: page('customer', false), byComplete: page('customer', true) },
  };

  /** Checks the pet and its stock, takes the stock and records the order. */
  function placeNow(input: NewOrder, now: Date): Order {
    const { petId, quantity } = input;
    const pet = petStatus().get({ petId });
    if (!pet) throw new ApiError('pet_not_found', `Pet ${petId} does not exist`, 422);
    if (pet.status !== 'available') throw new ApiError('pet_not_available', `Pet ${petId} is ${pet.status}, not available`, 409);
    const stock = stockOf().get({ petId });
    const inStock = stock?.quantity ?? 0;
    if (inStock < quantity) {
      throw new ApiError('insufficient_stock', `Only ${inStock} unit${inStock === 1 ? '' : 's'} of pet ${petId} in stock`, 409);
    }
    setStock().run({ petId, quantity: inStock - quantity });
    if (inStock === quantity) setPetStatus().run({ petId, status: 'pending' });
    const row = insertOrder().get({ accountId: input.accountId, petId, quantity, createdAt: now.toISOString() });
    return toOrder(row);
  }

  return {
    /** One page by id, after the given id, of the orders the viewer may see. */
    list(viewer: Viewer, filter: { complete?: boolean }, page: { after: number; limit: number }): Order[] {
      const { after, limit } = page;
      const { accountId } = viewer;
      const statements = pages[viewer.role];
      const rows =
        filter.complete === undefined
          ? statements.all().all({ accountId, after, limit })
          : statements.byComplete().all({ accountId, after, limit, complete: filter.complete ? 1 : 0 });
      return rows.map(toOrder);
    },

    /** Null when there is no such order or the viewer may not see it. */
    findById(viewer: Viewer, id: number): Order | null {
      const row = visibleById[viewer.role]().get({ id, accountId: viewer.accountId });
      return row ? toOrder(row) : null;
    },

    /**
     * Places an order: the pet must exist (422 `pet_not_found`), be `available` (409
     * `pet_not_available`) and have the stock (409 `insufficient_stock`). Stock reaching
     * 0 makes the pet `pending`.
     *
     * With an Idempotency-Key, the first outcome, refusals included, is stored in the
     * same transaction and replayed for the same body (`replayed: true`, or the stored
     * refusal rethrown); another body is 409 `idempotency_key_reused`.
     */
    place(input: NewOrder): { order: Order; replayed: boolean } {
      const { accountId, idempotencyKey: key } = input;
      const requestHash = requestHashOf({ petId: input.petId, quantity: input.quantity });
      const { response, replayed } = writeTransaction(db, () => {
        const now = new Date();
        if (key === undefined) return { response: { status: 201, body: placeNow(input, now) }, replayed: false };
        idempotency.purgeExpired(now);
        const stored = idempotency.find(accountId, key);
        if (stored) {
          if (stored.requestHash !== requestHash) {
            throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different body', 409);
          }
          return { response: stored.response, replayed: true };
        }
        let response: StoredResponse;
        try {
          // A savepoint: a refusal stored below must not keep any half-made change.
          response = { status: 201, body: db.$client.transaction(() => placeNow(input, now))() };
        } catch (error) {
          if (!(error instanceof ApiError)) throw error;
          response = toStored(error);
        }
        idempotency.save(accountId, key, requestHash, response, now);
        return { response, replayed: false };
      });
      if (response.status === 201) return { order: response.body as Order, replayed };
      const { code, message, status } = response.body as { code: ApiError['code']; message: string; status: number };
      throw new ApiError(code, message, status, replayed ? { 'Idempotent-Replayed': 'true' } : {});
    },

    /**
     * Marks an order complete, once: shipDate is the given one or now. Completing a
     * complete order changes nothing. When the pet's last open order is completed and
     * its stock is 0, the pet is `sold`. Null when there is no such order.
     */
    fulfil(id: number, shipDate?: string): Order | null {
      // The validator's date-time format already refuses what a Date cannot hold (a leap second).
      const shipped = shipDate === undefined ? new Date() : new Date(shipDate);
      return writeTransaction(db, () => {
        const row = byId().get({ id });
        if (!row) return null;
        if (row.complete) return toOrder(row);
        const done = complete().get({ id, shipDate: shipped.toISOString() });
        const stillOpen = openForPet().get({ petId: row.petId });
        const stock = stockOf().get({ petId: row.petId });
        if (!stillOpen && stock?.quantity === 0) setPetStatus().run({ petId: row.petId, status: 'sold' });
        return toOrder(done ?? row);
      });
    },

    /**
     * Cancels an open order the viewer may see: removes it, returns its quantity to
     * stock and makes the pet `available`. False when there is no such order (or it is
     * another customer's); 409 `order_completed` for a completed one.
     */
    cancel(viewer: Viewer, id: number): boolean {
      return writeTransaction(db, () => {
        const row = visibleById[viewer.role]().get({ id, accountId: viewer.accountId });
        if (!row) return false;
        if (row.complete) throw new ApiError('order_completed', `Order ${id} is complete and cannot be cancelled`, 409);
        deleteOrder().run({ id });
        const stock = stockOf().get({ petId: row.petId });
        if (stock) {
          // The contract bounds stock at 1,000,000; an admin may have set it that high meanwhile.
          const restored = Math.min(stock.quantity + row.quantity, maxStock);
          setStock().run({ petId: row.petId, quantity: restored });
          setPetStatus().run({ petId: row.petId, status: 'available' });
        }
        return true;
      });
    },
  };
}
