import { notImplemented, type HandlerModule } from '../server/operations';

export const ordersHandlers: HandlerModule<'orders'> = {
  listOrders: notImplemented('listOrders'),
  placeOrder: notImplemented('placeOrder'),
  getOrder: notImplemented('getOrder'),
  cancelOrder: notImplemented('cancelOrder'),
  fulfilOrder: notImplemented('fulfilOrder'),
};
