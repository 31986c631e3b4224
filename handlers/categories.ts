import { notFound } from '../domain/errors';
import type { HandlerModule } from './types';
import { pageOf, pageRequest } from './pagination';

export const categoriesHandlers: HandlerModule<'categories'> = {
  async listCategories({ query, url }, { repos }) {
    const page = pageRequest(query);
    const rows = await repos.categories.list({ after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  async createCategory({ body }, { repos }) {
    const category = await repos.categories.create(body);
    return { status: 201, body: category, headers: { Location: `/categories/${category.id}` } };
  },

  async getCategory({ params }, { repos }) {
    const category = await repos.categories.findById(params.categoryId);
    if (!category) throw notFound('Category', params.categoryId);
    return { status: 200, body: category };
  },

  async updateCategory({ params, body }, { repos }) {
    const category = await repos.categories.replace(params.categoryId, body);
    if (!category) throw notFound('Category', params.categoryId);
    return { status: 200, body: category };
  },

  async deleteCategory({ params }, { repos }) {
    if (!(await repos.categories.remove(params.categoryId))) throw notFound('Category', params.categoryId);
    return { status: 204 };
  },
};
