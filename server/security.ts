// Credentials: scrypt passwords, SHA-256-hashed API keys, and the security handlers that
// express-openapi-validator calls for the spec's bearerAuth and basicAuth schemes.
import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import type { Store } from '../domain/store';
import type { Account, Principal, Role } from '../domain/types';
import { ApiError, forbidden, unauthorized } from './errors';

export type { Principal };

export const keyPrefix = 'ps_live_';
const scryptParams = { N: 16384, r: 8, p: 1, keylen: 64 } as const;
// lastUsedAt is written at most this often per key, so a busy key is not a write per request.
const touchIntervalMs = 60_000;

function scryptAsync(password: string, salt: Buffer): Promise<Buffer> {
  const { N, r, p, keylen } = scryptParams;
  return new Promise((resolve, reject) =>
    scrypt(password, salt, keylen, { N, r, p }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt);
  const { N, r, p } = scryptParams;
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

// Verifying against this when the email is unknown keeps both answers equally slow.
const decoyHash = `scrypt$16384$8$1$${randomBytes(16).toString('base64')}$${randomBytes(64).toString('base64')}`;

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [, , , , salt, hash] = stored.split('$');
  if (!salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scryptAsync(password, Buffer.from(salt, 'base64'));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export const hashKey = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');

const bearers = new WeakMap<Request, string | null>();

/**
 * The SHA-256 of the request's `Bearer <key>` (exactly that: the scheme in any case, one
 * key, nothing after it), or null. Parsed and hashed once per request: the rate limiter
 * and the security handler both ask.
 */
export function bearerKeyHash(req: Request): string | null {
  let keyHash = bearers.get(req);
  if (keyHash === undefined) {
    const key = /^bearer +(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    keyHash = key ? hashKey(key) : null;
    bearers.set(req, keyHash);
  }
  return keyHash;
}

/** 256 random bits behind a recognisable prefix. */
export function generateApiKey(): { key: string; keyHash: string; prefix: string; lastFour: string } {
  const key = keyPrefix + randomBytes(32).toString('base64url');
  return { key, keyHash: hashKey(key), prefix: keyPrefix, lastFour: key.slice(-4) };
}

/** The principal the security handler put on the request; operations with security have one. */
export function principalOf(req: Request): Principal {
  const principal = req.principal;
  if (!principal) throw new ApiError('internal_error', 'No principal on an authenticated request', 500);
  return principal;
}

function requireRole(req: Request, principal: Principal): void {
  const required = req.openapi?.schema['x-required-role'];
  if (required === 'admin' && principal.role !== 'admin') throw forbidden();
}

export function createSecurityHandlers(repos: Store) {
  return {
    async bearerAuth(req: Request): Promise<boolean> {
      const keyHash = bearerKeyHash(req);
      if (!keyHash) throw unauthorized('The Authorization header must be `Bearer <key>`');
      const owner = await repos.apiKeys.findOwnerByHash(keyHash);
      const now = new Date();
      const valid =
        owner !== null &&
        timingSafeEqual(Buffer.from(owner.keyHash, 'hex'), Buffer.from(keyHash, 'hex')) &&
        owner.revokedAt === null &&
        (owner.expiresAt === null || Date.parse(owner.expiresAt) > now.getTime());
      if (!owner || !valid) throw unauthorized('The API key is not valid');
      if (!owner.lastUsedAt || now.getTime() - Date.parse(owner.lastUsedAt) >= touchIntervalMs) {
        await repos.apiKeys.touch(owner.keyId, now.toISOString());
      }
      const principal: Principal = { accountId: owner.accountId, role: owner.role };
      requireRole(req, principal);
      req.principal = principal;
      return true;
    },

    async basicAuth(req: Request): Promise<boolean> {
      const match = /^basic +([A-Za-z0-9+/]+={0,2})$/i.exec(req.headers.authorization ?? '');
      const decoded = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
      const colon = decoded.indexOf(':');
      if (colon < 0) throw unauthorized('The Authorization header must be `Basic base64(email:password)`');
      const account = await repos.accounts.findByEmail(decoded.slice(0, colon));
      const ok = await verifyPassword(decoded.slice(colon + 1), account?.passwordHash ?? decoyHash);
      if (!account || !ok) throw unauthorized('The email or password is wrong');
      req.principal = { accountId: account.id, role: account.role };
      return true;
    },
  };
}

/** Creates an account with an scrypt-hashed password; null when the email is taken. */
export async function registerAccount(
  repos: Store,
  input: { email: string; password: string; role: Role },
): Promise<Account | null> {
  return repos.accounts.create({ email: input.email, passwordHash: await hashPassword(input.password), role: input.role });
}
