import { notImplemented, type HandlerModule } from '../server/operations';

export const categoriesHandlers: HandlerModule<'categories'> = {
  listCategories: notImplemented('listCategories'),
  createCategory: notImplemented('createCategory'),
  getCategory: notImplemented('getCategory'),
  updateCategory: notImplemented('updateCategory'),
  deleteCategory: notImplemented('deleteCategory'),
};
