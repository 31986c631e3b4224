import { generateApiKey } from '../domain/api-keys';
import type { Account, Role } from '../domain/types';
import { ApiError, notFound } from '../domain/errors';
import type { AppContext, HandlerModule } from './types';
import { pageOf, pageRequest } from './pagination';

/**
 * Creates an account with its password hashed as every new password is (server/security/passwords.ts);
 * null when the email is taken. Sign-up uses it, and so does `npm run account:create`, the
 * only way to make an admin.
 */
export async function registerAccount(
  { repos, passwords }: Pick<AppContext, 'repos' | 'passwords'>,
  input: { email: string; password: string; role: Role },
): Promise<Account | null> {
  return repos.accounts.create({ email: input.email, passwordHash: await passwords.hash(input.password), role: input.role });
}

export const accountsHandlers: HandlerModule<'accounts'> = {
  async createAccount({ body }, ctx) {
    const account = await registerAccount(ctx, { email: body.email, password: body.password, role: 'customer' });
    if (!account) throw new ApiError('conflict', 'An account with this email already exists', 409);
    return { status: 201, body: account };
  },

  async createApiKey({ body, principal }, { repos }) {
    if (body?.expiresAt !== undefined && Date.parse(body.expiresAt) <= Date.now()) {
      throw new ApiError('validation_failed', 'request/body/expiresAt must be in the future', 400);
    }
    const { key, ...stored } = generateApiKey();
    const created = await repos.apiKeys.create({
      accountId: principal.accountId,
      ...stored,
      ...(body?.name !== undefined && { name: body.name }),
      ...(body?.expiresAt !== undefined && { expiresAt: new Date(body.expiresAt).toISOString() }),
    });
    return { status: 201, body: { ...created, key } };
  },

  async listApiKeys({ query, principal, url }, { repos }) {
    const page = pageRequest(query);
    const rows = await repos.apiKeys.listForAccount(principal.accountId, { after: page.after, limit: page.fetch });
    return { status: 200, ...pageOf(rows, page, url) };
  },

  async revokeApiKey({ params, principal }, { repos }) {
    if (!(await repos.apiKeys.revoke(principal.accountId, params.keyId))) throw notFound('API key', params.keyId);
    return { status: 204 };
  },
};
