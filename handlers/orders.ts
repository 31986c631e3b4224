import { notFound } from '../server/errors';
import type { HandlerModule } from '../server/operations';
import { pageOf, pageRequest } from '../server/pagination';

export const ordersHandlers: HandlerModule<'orders'> = {
  listOrders({ query, principal, url }, { repos }) {
    const page = pageRequest(query);
    const rows = repos.orders.list(principal, { complete: query.complete }, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  placeOrder({ body, headers, principal }, { repos }) {
    const { order, replayed } = repos.orders.place({
      accountId: principal.accountId,
      petId: body.petId,
      quantity: body.quantity ?? 1,
      idempotencyKey: headers['Idempotency-Key'],
    });
    const location = { Location: `/store/orders/${order.id}` };
    return { status: 201, body: order, headers: replayed ? { ...location, 'Idempotent-Replayed': 'true' } : location };
  },

  getOrder({ params, principal }, { repos }) {
    const order = repos.orders.findById(principal, params.orderId);
    if (!order) throw notFound('Order', params.orderId);
    return { status: 200, body: order };
  },

  cancelOrder({ params, principal }, { repos }) {
    if (!repos.orders.cancel(principal, params.orderId)) throw notFound('Order', params.orderId);
    return { status: 204 };
  },

  fulfilOrder({ params, body }, { repos }) {
    const order = repos.orders.fulfil(params.orderId, body.shipDate);
    if (!order) throw notFound('Order', params.orderId);
    return { status: 200, body: order };
  },
};
