import { sql } from 'drizzle-orm';
import { ApiError } from '../server/errors';
import type { HandlerModule } from '../server/operations';

export const serviceHandlers: HandlerModule<'service'> = {
  getHealth() {
    return { status: 200, body: { status: 'ok' } };
  },

  getReadiness(_input, { db }) {
    try {
      db.get(sql`select 1`);
    } catch {
      throw new ApiError('unavailable', 'The database is not reachable', 503);
    }
    return { status: 200, body: { status: 'ok' } };
  },
};
