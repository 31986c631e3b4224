import type { Db } from './client';
import { createAccountsRepository } from './accounts';
import { createApiKeysRepository } from './api-keys';

/** Every repository over one database: what handlers reach the data through. */
export function createRepositories(db: Db) {
  return {
    accounts: createAccountsRepository(db),
    apiKeys: createApiKeysRepository(db),
  };
}

export type Repositories = ReturnType<typeof createRepositories>;
