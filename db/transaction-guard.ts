// Inside `storage.transaction(work)`, every statement must go through `work`'s own `tx`.
// A call on the outer storage there is a bug that neither engine reports: on SQLite it
// waits forever for the write lock its own transaction holds, on PostgreSQL it runs on
// another connection, outside the transaction. Both engines' storages are wrapped here,
// so that such a call fails at once and names the operation. AsyncLocalStorage (Node's
// own) tells a call made from within a transaction's work from one of another request.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Storage } from '../domain/storage';

const inTransaction = new AsyncLocalStorage<boolean>();

const misuse = (name: string) =>
  new Error(`storage.${name}() was called inside a transaction: use the transaction's own tx.${name}() (or finish the transaction first)`);

export function guardTransactions(storage: Storage): Storage {
  const guarded: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(storage)) {
    if (typeof value !== 'function') {
      guarded[name] = value;
      continue;
    }
    const op = value as (...args: unknown[]) => unknown;
    guarded[name] =
      name === 'transaction'
        ? (work: unknown) => {
            if (inTransaction.getStore()) return Promise.reject(misuse(name));
            return inTransaction.run(true, () => op(work));
          }
        : (...args: unknown[]) => {
            if (inTransaction.getStore()) throw misuse(name);
            return op(...args);
          };
  }
  return guarded as unknown as Storage;
}
