// The store over one SQLite database, for callers that open the file themselves
// (scripts/bench.ts). The service builds its store from db/open.ts.
import { createStore } from '../domain/store';
import type { Db } from './client';
import { createSqliteStorage } from './sqlite-storage';

export const createRepositories = (db: Db) => createStore(createSqliteStorage(db));
