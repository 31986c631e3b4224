import { eq, sql } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { prepared, type Db } from './client';
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
  const p = sql.placeholder;
  const insert = prepared(() =>
    db
      .insert(accounts)
      .values({ email: p('email'), passwordHash: p('passwordHash'), role: p('role'), createdAt: p('createdAt') })
      .onConflictDoNothing({ target: accounts.email })
      .returning()
      .prepare(),
  );
  const byEmail = prepared(() => db.select().from(accounts).where(eq(accounts.email, p('email'))).prepare());

  return {
    /** Null when the email is taken (ignoring case). */
    create(input: { email: string; passwordHash: string; role: Role }): Account | null {
      const row = insert().get({ ...input, email: input.email.toLowerCase(), createdAt: new Date().toISOString() });
      return row ? toAccount(row) : null;
    },

    findByEmail(email: string): AccountWithSecret | null {
      const row = byEmail().get({ email: email.toLowerCase() });
      return row ? { ...toAccount(row), passwordHash: row.passwordHash } : null;
    },
  };
}
