import { apiErrorOf, DomainError, notFound } from '../domain/errors';
import type { HandlerModule } from './types';

export const messagesHandlers: HandlerModule<'messages'> = {
  async sendMessage({ body, principal }, { repos, config }) {
    const message = await repos.messages.enqueue(principal.accountId, body.message).catch((error: unknown) => {
      // A full queue drains as the worker delivers: its oldest message is due within the delay.
      if (error instanceof DomainError && error.code === 'message_queue_full') {
        throw apiErrorOf(error, { 'Retry-After': String(Math.max(1, Math.ceil(config.messageDeliveryDelayMs / 1000))) });
      }
      throw error;
    });
    return { status: 202, body: message, headers: { Location: `/messages/${message.id}` } };
  },

  async getMessage({ params, principal }, { repos }) {
    const message = await repos.messages.findForAccount(principal.accountId, params.messageId);
    if (!message) throw notFound('Message', params.messageId);
    return { status: 200, body: message };
  },
};
