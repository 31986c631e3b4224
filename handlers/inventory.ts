import { notFound } from '../domain/errors';
import type { HandlerModule } from './types';
import { pageOf, pageRequest } from './pagination';

export const inventoryHandlers: HandlerModule<'inventory'> = {
  async listInventory({ query, url }, { repos }) {
    const page = pageRequest(query);
    const rows = await repos.inventory.list({ status: query.status }, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  async getInventoryItem({ params }, { repos }) {
    const item = await repos.inventory.findByPetId(params.petId);
    if (!item) throw notFound('Pet', params.petId);
    return { status: 200, body: item };
  },

  async updateInventory({ params, body }, { repos }) {
    const item = await repos.inventory.setQuantity(params.petId, body.quantity);
    if (!item) throw notFound('Pet', params.petId);
    return { status: 200, body: item };
  },
};
