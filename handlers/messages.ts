import { notImplemented, type HandlerModule } from '../server/operations';

export const messagesHandlers: HandlerModule<'messages'> = {
  sendMessage: notImplemented('sendMessage'),
  getMessage: notImplemented('getMessage'),
};
