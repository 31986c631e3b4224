import type { Db } from './client';
import { createAccountsRepository } from './accounts';
import { createApiKeysRepository } from './api-keys';
import { createCategoriesRepository } from './categories';
import { createInventoryRepository } from './inventory';
import { createOrdersRepository } from './orders';
import { createPetsRepository } from './pets';
import { createMessagesRepository } from './messages';

/** Every repository over one database: what handlers reach the data through. */
export function createRepositories(db: Db) {
  return {
    accounts: createAccountsRepository(db),
    apiKeys: createApiKeysRepository(db),
    categories: createCategoriesRepository(db),
    pets: createPetsRepository(db),
    inventory: createInventoryRepository(db),
    orders: createOrdersRepository(db),
    messages: createMessagesRepository(db),
  };
}

export type Repositories = ReturnType<typeof createRepositories>;
