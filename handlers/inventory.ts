import { notImplemented, type HandlerModule } from '../server/operations';

export const inventoryHandlers: HandlerModule<'inventory'> = {
  listInventory: notImplemented('listInventory'),
  getInventoryItem: notImplemented('getInventoryItem'),
  updateInventory: notImplemented('updateInventory'),
};
