import { ApiError } from '../server/errors';
import type { HandlerModule } from '../server/operations';

export const serviceHandlers: HandlerModule<'service'> = {
  getHealth() {
    return { status: 200, body: { status: 'ok' } };
  },

  async getReadiness(_input, { storage }) {
    try {
      await storage.ping();
    } catch {
      throw new ApiError('unavailable', 'The database is not reachable', 503);
    }
    return { status: 200, body: { status: 'ok' } };
  },
};
