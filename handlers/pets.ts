import { notFound } from '../domain/errors';
import type { HandlerModule } from './types';
import { pageOf, pageRequest } from './pagination';

export const petsHandlers: HandlerModule<'pets'> = {
  async listPets({ query, url }, { repos }) {
    const page = pageRequest(query);
    const { status, categoryId, ids } = query;
    const rows = await repos.pets.list({ status, categoryId, ids }, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  async createPet({ body }, { repos }) {
    const pet = await repos.pets.create(body);
    return { status: 201, body: pet, headers: { Location: `/pets/${pet.id}` } };
  },

  async getPetById({ params }, { repos }) {
    const pet = await repos.pets.findById(params.petId);
    if (!pet) throw notFound('Pet', params.petId);
    return { status: 200, body: pet };
  },

  async updatePet({ params, body }, { repos }) {
    const pet = await repos.pets.replace(params.petId, body);
    if (!pet) throw notFound('Pet', params.petId);
    return { status: 200, body: pet };
  },

  async deletePet({ params }, { repos }) {
    if (!(await repos.pets.remove(params.petId))) throw notFound('Pet', params.petId);
    return { status: 204 };
  },
};
