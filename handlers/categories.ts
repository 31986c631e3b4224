import { notFound } from '../server/errors';
import type { HandlerModule } from '../server/operations';
import { pageOf, pageRequest } from '../server/pagination';

export const categoriesHandlers: HandlerModule<'categories'> = {
  listCategories({ query, url }, { repos }) {
    const page = pageRequest(query);
    const rows = repos.categories.list({ after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  createCategory({ body }, { repos }) {
    const category = repos.categories.create(body);
    return { status: 201, body: category, headers: { Location: `/categories/${category.id}` } };
  },

  getCategory({ params }, { repos }) {
    const category = repos.categories.findById(params.categoryId);
    if (!category) throw notFound('Category', params.categoryId);
    return { status: 200, body: category };
  },

  updateCategory({ params, body }, { repos }) {
    const category = repos.categories.replace(params.categoryId, body);
    if (!category) throw notFound('Category', params.categoryId);
    return { status: 200, body: category };
  },

  deleteCategory({ params }, { repos }) {
    if (!repos.categories.remove(params.categoryId)) throw notFound('Category', params.categoryId);
    return { status: 204 };
  },
};
