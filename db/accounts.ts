import { eq } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import type { Db } from './client';
import { accounts } from './schema';

export type Account = components['schemas']['Account'];
export type Role = Account['role'];

export interface AccountWithSecret extends Account {
  passwordHash: string;
}

const toAccount = (row: typeof accounts.$inferSelect): Account => ({
  id: row.id,
  email: row.email,
  role: row.role,
  createdAt: row.createdAt,
});

export function createAccountsRepository(db: Db) {
  return {
    /** Null when the email is taken (ignoring case). */
    create(input: { email: string; passwordHash: string; role: Role }): Account | null {
      const row = db
        .insert(accounts)
        .values({ ...input, email: input.email.toLowerCase(), createdAt: new Date().toISOString() })
        .onConflictDoNothing({ target: accounts.email })
        .returning()
        .get();
      return row ? toAccount(row) : null;
    },

    findByEmail(email: string): AccountWithSecret | null {
      const row = db.select().from(accounts).where(eq(accounts.email, email.toLowerCase())).get();
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },
  };
}
