import type { Db } from './client';
import { createAccountsRepository } from './accounts';
import { createApiKeysRepository } from './api-keys';
import { createMessagesRepository } from './messages';

/** Every repository over one database: what handlers reach the data through. */
export function createRepositories(db: Db) {
  return {
    accounts: createAccountsRepository(db),
    apiKeys: createApiKeysRepository(db),
    messages: createMessagesRepository(db),
  };
}

export type Repositories = ReturnType<typeof createRepositories>;
