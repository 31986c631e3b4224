import { ApiError, StorageUnavailable } from '../domain/errors';
import type { HandlerModule } from './types';

export const serviceHandlers: HandlerModule<'service'> = {
  getHealth() {
    return { status: 200, body: { status: 'ok' } };
  },

  async getReadiness(_input, { repos }) {
    try {
      await repos.ready();
    } catch (error) {
      // Reads answer but writes cannot be made durable (a full disk): not ready either.
      if (error instanceof StorageUnavailable) throw error;
      throw new ApiError('unavailable', 'The database is not reachable', 503, {}, { cause: error });
    }
    return { status: 200, body: { status: 'ok' } };
  },
};
