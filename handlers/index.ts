// The handler table: one module per tag of openapi.yaml. `satisfies HandlerTable` makes
// a missing operation a compile error; operationsHandler refuses a stray one at start-up.
import type { HandlerTable } from './types';
import { accountsHandlers } from './accounts';
import { categoriesHandlers } from './categories';
import { inventoryHandlers } from './inventory';
import { messagesHandlers } from './messages';
import { ordersHandlers } from './orders';
import { petsHandlers } from './pets';
import { serviceHandlers } from './service';

export const handlers = {
  ...petsHandlers,
  ...categoriesHandlers,
  ...inventoryHandlers,
  ...ordersHandlers,
  ...accountsHandlers,
  ...messagesHandlers,
  ...serviceHandlers,
} satisfies HandlerTable;
