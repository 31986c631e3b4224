import { apiErrorOf, notFound } from '../domain/errors';
import type { HandlerModule } from './types';
import { pageOf, pageRequest } from './pagination';

export const ordersHandlers: HandlerModule<'orders'> = {
  async listOrders({ query, principal, url }, { repos }) {
    const page = pageRequest(query);
    const rows = await repos.orders.list(principal, { complete: query.complete }, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  async placeOrder({ body, headers, principal }, { repos }) {
    const { outcome, replayed } = await repos.orders.place(
      // The validator applies the spec's default (NewOrder.quantity: 1); generated/ types
      // such a field as present (defaultNonNullable), the client's view as optional.
      { accountId: principal.accountId, petId: body.petId, quantity: body.quantity },
      headers['Idempotency-Key'],
    );
    // Only here does a replay become a header, and a refusal an Error body.
    const replay: Record<string, string> = replayed ? { 'Idempotent-Replayed': 'true' } : {};
    if (!outcome.ok) throw apiErrorOf(outcome.error, replay);
    return { status: 201, body: outcome.value, headers: { Location: `/store/orders/${outcome.value.id}`, ...replay } };
  },

  async getOrder({ params, principal }, { repos }) {
    const order = await repos.orders.findById(principal, params.orderId);
    if (!order) throw notFound('Order', params.orderId);
    return { status: 200, body: order };
  },

  async cancelOrder({ params, principal }, { repos }) {
    if (!(await repos.orders.cancel(principal, params.orderId))) throw notFound('Order', params.orderId);
    return { status: 204 };
  },

  async fulfilOrder({ params, body }, { repos }) {
    const order = await repos.orders.fulfil(params.orderId, body.shipDate);
    if (!order) throw notFound('Order', params.orderId);
    return { status: 200, body: order };
  },
};
