// The store rules, once, over the storage port (domain/storage.ts), for both engines.
// Each rule is one transaction that first locks the rows it will decide on (the pet's
// stock row, the category row), so what it checks is still true when it writes, across
// processes and instances; placing an order is one atomic step of the storage's
// (placeOrder), given the rule's terms. A broken rule throws DomainError, which rolls it back; a
// missing row is null/false. The rules are written down once, in docs/decisions.md (Store rules).
import { randomBytes } from 'node:crypto';
import { DomainError, type Outcome } from './errors';
import { idempotent, kept } from './idempotency';
import type { KeptIdempotency, Queries, Storage } from './storage';
import type { NewCategory, NewPet, Order, Principal, PetFilter, Page, PetStatus, Role } from './types';

/** The contract bounds stock at 1,000,000 (InventoryUpdate.quantity). */
const maxStock = 1_000_000;

// The unique key behind "category names are unique ignoring case".
const nameKeyOf = (name: string) => name.toLowerCase();
const nameTaken = (name: string) => new DomainError('conflict', `A category named "${name}" already exists`);

/** `msg_` and 96 random bits as 24 hex digits: the spec's MessageId pattern. */
const newMessageId = () => `msg_${randomBytes(12).toString('hex')}`;

/** What one account may hold at once; the operator sets them (docs/configuration.md). */
export interface Bounds {
  /** Keys neither revoked nor expired. */
  activeApiKeysPerAccount: number;
  /** Messages not delivered yet. */
  queuedMessagesPerAccount: number;
}

export const defaultBounds: Bounds = { activeApiKeysPerAccount: 20, queuedMessagesPerAccount: 100 };

export interface NewOrder {
  accountId: number;
  petId: number;
  quantity: number;
}

/** What the store tells an observer (server/observability/metrics.ts), once the transaction committed. */
export interface StoreEvents {
  /** An order was placed (not a replay of one). */
  orderPlaced?(): void;
  messageQueued?(): void;
}

export function createStore(storage: Storage, bounds: Bounds = defaultBounds, events: StoreEvents = {}) {
  return {
    accounts: {
      /** Null when the email is taken (ignoring case: stored lower-cased under a unique index). */
      create: (input: { email: string; passwordHash: string; role: Role }) =>
        storage.insertAccount({ ...input, email: input.email.toLowerCase(), createdAt: new Date().toISOString() }),
      findByEmail: (email: string) => storage.findAccountByEmail(email.toLowerCase()),
      /** A login's upgrade of an old hash; a no-op when the hash changed since it was read. */
      upgradePasswordHash: (accountId: number, from: string, to: string) => storage.replacePasswordHash(accountId, from, to),
    },

    apiKeys: {
      /**
       * 409 `api_key_limit_reached` when the account already holds its bound of active keys.
       * Counted under the account's lock, so concurrent creations cannot pass it together;
       * keys held beyond a lowered bound keep working, only new ones are refused.
       */
      create: (input: { accountId: number; name?: string; keyHash: string; prefix: string; lastFour: string; expiresAt?: string }) =>
        storage.transaction(async (tx) => {
          const createdAt = new Date().toISOString();
          await tx.lockAccount(input.accountId);
          const active = await tx.countActiveApiKeys(input.accountId, createdAt);
          if (active >= bounds.activeApiKeysPerAccount) {
            throw new DomainError(
              'api_key_limit_reached',
              `The account already holds ${active} active API keys (at most ${bounds.activeApiKeysPerAccount}); revoke one to create another`,
            );
          }
          return tx.insertApiKey({ ...input, createdAt });
        }),
      findOwnerByHash: (keyHash: string) => storage.findKeyOwner(keyHash),
      listForAccount: (accountId: number, page: Page) => storage.listApiKeys(accountId, page),
      revoke: (accountId: number, keyId: number) => storage.revokeApiKey(accountId, keyId, new Date().toISOString()),
      touch: (keyId: number, at: string) => storage.touchApiKey(keyId, at),
    },

    categories: {
      list: (page: Page) => storage.listCategories(page),
      findById: (id: number) => storage.findCategory(id),

      /** 409 `conflict` when the name is taken, ignoring case (the unique index decides). */
      async create(input: NewCategory) {
        const row = await storage.insertCategory({
          name: input.name,
          nameKey: nameKeyOf(input.name),
          description: input.description ?? null,
        });
        if (row === 'taken') throw nameTaken(input.name);
        return row;
      },

      /** Replaces name and description (omitted: removed). Null when there is none; 409 `conflict` for a taken name. */
      async replace(id: number, input: NewCategory) {
        const row = await storage.updateCategory(id, {
          name: input.name,
          nameKey: nameKeyOf(input.name),
          description: input.description ?? null,
        });
        if (row === 'taken') throw nameTaken(input.name);
        return row;
      },

      /** False when there is no such category; 409 `category_in_use` while pets use it. */
      remove: (id: number) =>
        storage.transaction(async (tx) => {
          if (!(await tx.lockCategory(id))) return false;
          const used = await tx.petInCategory(id);
          if (used !== null) throw new DomainError('category_in_use', `Category ${id} is used by pets (pet ${used} at least)`);
          await tx.deleteCategory(id);
          return true;
        }),
    },

    pets: {
      list: (filter: PetFilter, page: Page) => storage.listPets(filter, page),
      findById: (id: number) => storage.findPet(id),

      /** Creates the pet and its inventory entry (quantity 0). 422 `category_not_found` without the category. */
      create: (input: NewPet) =>
        storage.transaction(async (tx) => {
          // Locked so that the category cannot be deleted before the pet that names it commits.
          if (!(await tx.lockCategory(input.categoryId))) {
            throw new DomainError('category_not_found', `Category ${input.categoryId} does not exist`);
          }
          return tx.insertPet({ name: input.name, categoryId: input.categoryId, status: input.status });
        }),

      /** Replaces name, category and status. Null when there is no such pet. */
      replace: (id: number, input: NewPet) =>
        storage.transaction(async (tx) => {
          if (!(await tx.lockStock(id))) return null;
          if (!(await tx.lockCategory(input.categoryId))) {
            throw new DomainError('category_not_found', `Category ${input.categoryId} does not exist`);
          }
          return tx.updatePet(id, { name: input.name, categoryId: input.categoryId, status: input.status });
        }),

      /** False when there is no such pet; 409 `pet_has_open_orders` while an incomplete order names it. */
      remove: (id: number) =>
        storage.transaction(async (tx) => {
          if (!(await tx.lockStock(id))) return false;
          const open = await tx.openOrderOfPet(id);
          if (open !== null) throw new DomainError('pet_has_open_orders', `Pet ${id} has open orders (order ${open} at least)`);
          await tx.deletePet(id);
          return true;
        }),
    },

    inventory: {
      list: (filter: { status?: PetStatus | undefined }, page: Page) => storage.listInventory(filter, page),
      findByPetId: (petId: number) => storage.findInventory(petId),

      /** Sets the stock; above 0 makes a `pending` or `sold` pet `available`. Null when there is no such pet. */
      setQuantity: (petId: number, quantity: number) =>
        storage.transaction(async (tx) => {
          const stock = await tx.lockStock(petId);
          if (!stock) return null;
          await tx.setStock(petId, quantity);
          if (quantity > 0 && stock.status !== 'available') await tx.setPetStatus(petId, 'available');
          return { petId, quantity, status: quantity > 0 ? 'available' : stock.status } as const;
        }),
    },

    orders: {
      list: (viewer: Principal, filter: { complete?: boolean | undefined }, page: Page) => storage.listOrders(viewer, filter, page),
      findById: (viewer: Principal, id: number) => storage.findOrder(viewer, id),

      /**
       * Places an order: the pet must exist (`pet_not_found`), be `available`
       * (`pet_not_available`) and have the stock (`insufficient_stock`); stock reaching 0
       * makes it `pending`. With an Idempotency-Key the first outcome is replayed
       * (domain/idempotency.ts).
       */
      async place(input: NewOrder, idempotencyKey?: string): Promise<{ outcome: Outcome<Order>; replayed: boolean }> {
        const now = new Date();
        const work = async (q: Queries, unlessKept?: KeptIdempotency): Promise<Order | typeof kept> => {
          const { petId, quantity } = input;
          // The checks below run in the storage, in the same atomic step as the writes (one
          // statement on PostgreSQL); what it found when it refused names the refusal here.
          const result = await q.placeOrder(
            { accountId: input.accountId, petId, quantity, createdAt: now.toISOString() },
            { requires: 'available', whenEmpty: 'pending' },
            unlessKept,
          );
          if (result === kept) return kept;
          if (result.placed) return result.placed;
          const stock = result.found;
          if (!stock) throw new DomainError('pet_not_found', `Pet ${petId} does not exist`);
          if (stock.status !== 'available') throw new DomainError('pet_not_available', `Pet ${petId} is ${stock.status}, not available`);
          const n = stock.quantity;
          throw new DomainError('insufficient_stock', `Only ${n} unit${n === 1 ? '' : 's'} of pet ${petId} in stock`);
        };
        let placed: { outcome: Outcome<Order>; replayed: boolean };
        if (idempotencyKey === undefined) {
          // One atomic step of the storage's: no transaction around it.
          const order = await work(storage);
          if (order === kept) throw new Error('An order without an Idempotency-Key was kept');
          placed = { outcome: { ok: true, value: order }, replayed: false };
        } else {
          const request = { petId: input.petId, quantity: input.quantity };
          placed = await storage.transaction((tx) =>
            idempotent(tx, { accountId: input.accountId, key: idempotencyKey, request, now }, (unlessKept) => work(tx, unlessKept)),
          );
        }
        if (placed.outcome.ok && !placed.replayed) events.orderPlaced?.();
        return placed;
      },

      /**
       * Completes an order once (shipDate given or now); completing again changes nothing.
       * The pet's last open order completed with stock 0 makes it `sold`. Null when there is none.
       */
      fulfil(id: number, shipDate?: string) {
        // The validator's date-time format already refuses what a Date cannot hold (a leap second).
        const shipped = (shipDate === undefined ? new Date() : new Date(shipDate)).toISOString();
        return storage.transaction(async (tx) => {
          const found = await tx.findOrder(admin, id);
          if (!found) return null;
          const stock = await tx.lockStock(found.petId);
          // Read again under the pet's lock: another request may have completed or cancelled it meanwhile.
          const order = await tx.findOrder(admin, id);
          if (!order) return null;
          if (order.complete) return order;
          const done = await tx.completeOrder(id, shipped);
          if (stock?.quantity === 0 && (await tx.openOrderOfPet(order.petId)) === null) await tx.setPetStatus(order.petId, 'sold');
          return done;
        });
      },

      /**
       * Cancels an open order the viewer may see: deletes it, returns its quantity to stock
       * and makes the pet `available`. False when there is none; 409 `order_completed`.
       */
      cancel: (viewer: Principal, id: number) =>
        storage.transaction(async (tx) => {
          const found = await tx.findOrder(viewer, id);
          if (!found) return false;
          const stock = await tx.lockStock(found.petId);
          const order = await tx.findOrder(viewer, id);
          if (!order) return false;
          if (order.complete) throw new DomainError('order_completed', `Order ${id} is complete and cannot be cancelled`);
          await tx.deleteOrder(id);
          if (stock) {
            // An admin may have set the stock to the bound meanwhile.
            await tx.setStock(order.petId, Math.min(stock.quantity + order.quantity, maxStock));
            await tx.setPetStatus(order.petId, 'available');
          }
          return true;
        }),
    },

    messages: {
      /**
       * Stores the message as `queued`: the row is the queue, so it outlives a restart.
       * `message_queue_full` when the account already has its bound of undelivered
       * messages (counted under the account's lock, like the keys).
       */
      async enqueue(accountId: number, message: string) {
        const stored = await storage.transaction(async (tx) => {
          await tx.lockAccount(accountId);
          const queued = await tx.countQueuedMessages(accountId);
          if (queued >= bounds.queuedMessagesPerAccount) {
            const most = bounds.queuedMessagesPerAccount;
            throw new DomainError(
              'message_queue_full',
              `The account already has ${queued} messages not delivered yet (at most ${most}); retry once some are sent`,
            );
          }
          return tx.insertMessage({ id: newMessageId(), accountId, message, createdAt: new Date().toISOString() });
        });
        events.messageQueued?.();
        return stored;
      },
      findForAccount: (accountId: number, id: string) => storage.findMessage(accountId, id),
    },

    /** Whether the database answers and takes writes (throws StorageUnavailable when not): readiness. */
    ready: () => storage.ping(),
  };
}

export type Store = ReturnType<typeof createStore>;

const admin: Principal = { accountId: 0, role: 'admin' };
