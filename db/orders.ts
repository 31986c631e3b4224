// Orders and the store rules (docs/decisions.md, Store rules). Each rule is one function
// running one IMMEDIATE transaction: it takes the write lock before reading, so what it checks
// is still true when it writes, across connections and processes. A broken rule throws
// the contract's ApiError, which rolls the transaction back; a missing row is null/false.
import { and, asc, eq, gt, type SQL } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { ApiError } from '../server/errors';
import { writeTransaction, type Db } from './client';
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

const visibleTo = (viewer: Viewer): SQL[] => (viewer.role === 'admin' ? [] : [eq(orders.accountId, viewer.accountId)]);

const toStored = (error: ApiError): StoredResponse => ({
  status: error.status,
  body: { code: error.code, message: error.message, status: error.status },
});

export function createOrdersRepository(db: Db) {
  const idempotency = createIdempotencyRepository(db);

  /** Checks the pet and its stock, takes the stock and records the order. */
  function placeNow(input: NewOrder, now: Date): Order {
    const { petId, quantity } = input;
    const pet = db.select({ status: pets.status }).from(pets).where(eq(pets.id, petId)).get();
    if (!pet) throw new ApiError('pet_not_found', `Pet ${petId} does not exist`, 422);
    if (pet.status !== 'available') throw new ApiError('pet_not_available', `Pet ${petId} is ${pet.status}, not available`, 409);
    const stock = db.select({ quantity: inventory.quantity }).from(inventory).where(eq(inventory.petId, petId)).get();
    const inStock = stock?.quantity ?? 0;
    if (inStock < quantity) {
      throw new ApiError('insufficient_stock', `Only ${inStock} unit${inStock === 1 ? '' : 's'} of pet ${petId} in stock`, 409);
    }
    db.update(inventory).set({ quantity: inStock - quantity }).where(eq(inventory.petId, petId)).run();
    if (inStock === quantity) db.update(pets).set({ status: 'pending' }).where(eq(pets.id, petId)).run();
    const row = db
      .insert(orders)
      .values({ accountId: input.accountId, petId, quantity, complete: false, createdAt: now.toISOString() })
      .returning()
      .get();
    return toOrder(row);
  }

  return {
    /** One page by id, after the given id, of the orders the viewer may see. */
    list(viewer: Viewer, filter: { complete?: boolean }, page: { after: number; limit: number }): Order[] {
      const where = [...visibleTo(viewer), gt(orders.id, page.after)];
      if (filter.complete !== undefined) where.push(eq(orders.complete, filter.complete));
      return db
        .select()
        .from(orders)
        .where(and(...where))
        .orderBy(asc(orders.id))
        .limit(page.limit)
        .all()
        .map(toOrder);
    },

    /** Null when there is no such order or the viewer may not see it. */
    findById(viewer: Viewer, id: number): Order | null {
      const row = db
        .select()
        .from(orders)
        .where(and(eq(orders.id, id), ...visibleTo(viewer)))
        .get();
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
        const row = db.select().from(orders).where(eq(orders.id, id)).get();
        if (!row) return null;
        if (row.complete) return toOrder(row);
        const done = db
          .update(orders)
          .set({ complete: true, shipDate: shipped.toISOString() })
          .where(eq(orders.id, id))
          .returning()
          .get();
        const stillOpen = db
          .select({ id: orders.id })
          .from(orders)
          .where(and(eq(orders.petId, row.petId), eq(orders.complete, false)))
          .limit(1)
          .get();
        const stock = db.select({ quantity: inventory.quantity }).from(inventory).where(eq(inventory.petId, row.petId)).get();
        if (!stillOpen && stock?.quantity === 0) db.update(pets).set({ status: 'sold' }).where(eq(pets.id, row.petId)).run();
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
        const row = db
          .select()
          .from(orders)
          .where(and(eq(orders.id, id), ...visibleTo(viewer)))
          .get();
        if (!row) return false;
        if (row.complete) throw new ApiError('order_completed', `Order ${id} is complete and cannot be cancelled`, 409);
        db.delete(orders).where(eq(orders.id, id)).run();
        const stock = db.select({ quantity: inventory.quantity }).from(inventory).where(eq(inventory.petId, row.petId)).get();
        if (stock) {
          // The contract bounds stock at 1,000,000; an admin may have set it that high meanwhile.
          const restored = Math.min(stock.quantity + row.quantity, maxStock);
          db.update(inventory).set({ quantity: restored }).where(eq(inventory.petId, row.petId)).run();
          db.update(pets).set({ status: 'available' }).where(eq(pets.id, row.petId)).run();
        }
        return true;
      });
    },
  };
}
