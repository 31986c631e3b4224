import { notFound } from '../server/errors';
import type { HandlerModule } from '../server/operations';
import { pageOf, pageRequest } from '../server/pagination';

export const inventoryHandlers: HandlerModule<'inventory'> = {
  listInventory({ query, url }, { repos }) {
    const page = pageRequest(query);
    const rows = repos.inventory.list({ status: query.status }, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  getInventoryItem({ params }, { repos }) {
    const item = repos.inventory.findByPetId(params.petId);
    if (!item) throw notFound('Pet', params.petId);
    return { status: 200, body: item };
  },

  updateInventory({ params, body }, { repos }) {
    const item = repos.inventory.setQuantity(params.petId, body.quantity);
    if (!item) throw notFound('Pet', params.petId);
    return { status: 200, body: item };
  },
};
