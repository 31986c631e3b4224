import { notFound } from '../server/errors';
import type { HandlerModule } from '../server/operations';

export const messagesHandlers: HandlerModule<'messages'> = {
  async sendMessage({ body, principal }, { repos }) {
    const message = await repos.messages.enqueue(principal.accountId, body.message);
    return { status: 202, body: message, headers: { Location: `/messages/${message.id}` } };
  },

  async getMessage({ params, principal }, { repos }) {
    const message = await repos.messages.findForAccount(principal.accountId, params.messageId);
    if (!message) throw notFound('Message', params.messageId);
    return { status: 200, body: message };
  },
};
