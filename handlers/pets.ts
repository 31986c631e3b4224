import { notImplemented, type HandlerModule } from '../server/operations';

export const petsHandlers: HandlerModule<'pets'> = {
  listPets: notImplemented('listPets'),
  createPet: notImplemented('createPet'),
  getPetById: notImplemented('getPetById'),
  updatePet: notImplemented('updatePet'),
  deletePet: notImplemented('deletePet'),
};
