import { randomBytes } from 'node:crypto';
import { and, asc, eq, inArray, lte, sql } from 'drizzle-orm';
import type { components } from '../generated/openapi';
import { bound, prepared, type Db } from './client';
import { messages } from './schema';

export type Message = components['schemas']['Message'];

const toMessage = (row: typeof messages.$inferSelect): Message => ({
  id: row.id,
  message: row.message,
  status: row.status,
  createdAt: row.createdAt,
  ...(row.sentAt !== null && { sentAt: row.sentAt }),
});

/** `msg_` and 96 random bits as 24 hex digits: the spec's MessageId pattern. */
export const newMessageId = () => `msg_${randomBytes(12).toString('hex')}`;

const p = sql.placeholder;

export function createMessagesRepository(db: Db) {
  const insert = prepared(() =>
    db
      .insert(messages)
      .values({ id: p('id'), accountId: p('accountId'), message: p('message'), status: 'queued', createdAt: p('createdAt') })
      .returning()
      .prepare(),
  );
  const forAccount = prepared(() =>
    db
      .select()
      .from(messages)
      .where(and(eq(messages.id, p('id')), eq(messages.accountId, p('accountId'))))
      .prepare(),
  );
  const deliver = prepared(() => {
    const due = db
      .select({ id: messages.id })
      .from(messages)
      .where(and(eq(messages.status, 'queued'), lte(messages.createdAt, p('createdBefore'))))
      .orderBy(asc(messages.createdAt))
      .limit(p('limit'));
    return db
      .update(messages)
      .set({ status: 'sent', sentAt: bound('sentAt') })
      .where(and(eq(messages.status, 'queued'), inArray(messages.id, due)))
      .returning({ id: messages.id })
      .prepare();
  });

  return {
    /** Stores the message as `queued`: the row is the queue, so it outlives a restart. */
    enqueue(accountId: number, message: string): Message {
      const row = insert().get({ id: newMessageId(), accountId, message, createdAt: new Date().toISOString() });
      return toMessage(row);
    },

    /** Null when the account has no such message (another account's included). */
    findForAccount(accountId: number, id: string): Message | null {
      const row = forAccount().get({ id, accountId });
      return row ? toMessage(row) : null;
    },

    /**
     * Marks as sent up to `limit` queued messages created at or before `createdBefore`,
     * oldest first, and returns their ids. One UPDATE statement, so a message is
     * delivered once even if two workers share the file.
     */
    deliverDue(createdBefore: string, sentAt: string, limit: number): string[] {
      return deliver()
        .all({ createdBefore, sentAt, limit })
        .map((r) => r.id);
    },
  };
}
