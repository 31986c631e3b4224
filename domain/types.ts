// The data the domain works with: the contract's schemas, so storage hands handlers what
// the spec describes and nothing is mapped twice.
import type { components } from '../generated/openapi';

type Schemas = components['schemas'];
export type Account = Schemas['Account'];
export type Role = Account['role'];
export type ApiKey = Schemas['ApiKey'];
export type Category = Schemas['Category'];
export type NewCategory = Schemas['NewCategory'];
/**
 * A Pet as stored: the contract leaves `status` optional (the interface's required list),
 * but every stored pet has one, and so every pet the service returns carries it.
 */
export type Pet = Schemas['Pet'] & Required<Pick<Schemas['Pet'], 'status'>>;
export type PetStatus = Schemas['PetStatus'];
export type InventoryItem = Schemas['InventoryItem'];
/**
 * An Order as stored: the contract marks no field of Order required (the interface's
 * rule), but every stored order knows these, so every order the service returns has them.
 */
export type Order = Required<Pick<Schemas['Order'], 'id' | 'petId' | 'quantity' | 'complete'>> & Pick<Schemas['Order'], 'shipDate'>;
export type Message = Schemas['Message'];

/**
 * NewPet of the contract as the validator delivers it: status present, the spec's default
 * (`available`) applied. That default lives only in openapi.yaml; other callers say a status.
 */
export type NewPet = Schemas['NewPet'];

/** Who is asking (the authenticated caller): a customer sees only its own orders, an admin every order. */
export interface Principal {
  accountId: number;
  role: Role;
}

export interface AccountWithSecret extends Account {
  passwordHash: string;
}

export interface KeyOwner {
  keyId: number;
  accountId: number;
  role: Role;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  keyHash: string;
}

export interface Page {
  after: number;
  limit: number;
}

export interface PetFilter {
  status?: PetStatus | undefined;
  categoryId?: number | undefined;
  ids?: number[] | undefined;
}
