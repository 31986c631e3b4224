// Credentials: scrypt passwords, SHA-256-hashed API keys, and the security handlers that
// express-openapi-validator calls for the spec's bearerAuth and basicAuth schemes.
import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { StorageUnavailable } from '../domain/errors';
import type { Store } from '../domain/store';
import type { Principal } from '../domain/types';
import { ApiError, forbidden, unauthorized, unavailable } from './errors';

const keyPrefix = 'ps_live_';
const scryptParams = { N: 16384, r: 8, p: 1, keylen: 64 } as const;
// lastUsedAt is written at most this often per key, so a busy key is not a write per request.
const touchIntervalMs = 60_000;

function scryptAsync(password: string, salt: Buffer): Promise<Buffer> {
  const { N, r, p, keylen } = scryptParams;
  return new Promise((resolve, reject) => scrypt(password, salt, keylen, { N, r, p }, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt);
  const { N, r, p } = scryptParams;
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

// Verifying against this when the email is unknown keeps both answers equally slow.
const decoyHash = `scrypt$16384$8$1$${randomBytes(16).toString('base64')}$${randomBytes(64).toString('base64')}`;

async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [, , , , salt, hash] = stored.split('$');
  if (!salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scryptAsync(password, Buffer.from(salt, 'base64'));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

const hashKey = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');

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

/** The Authorization header, parsed once per request (rate limits and security both read it). */
export type Credentials = { scheme: 'bearer'; key: string } | { scheme: 'basic'; email: string; password: string } | { scheme: 'none' };

const parsedCredentials = new WeakMap<Request, Credentials>();
// Exactly `Bearer <key>` or `Basic <base64>`: the scheme in any case, one token, nothing after it.
const authorizationHeader = /^(?:(bearer)|basic) +(\S+)$/i;
const base64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function credentialsOf(req: Request): Credentials {
  const known = parsedCredentials.get(req);
  if (known) return known;
  let credentials: Credentials = { scheme: 'none' };
  const match = authorizationHeader.exec(req.headers.authorization ?? '');
  if (match?.[2] && match[1]) credentials = { scheme: 'bearer', key: match[2] };
  else if (match?.[2] && base64.test(match[2])) {
    const decoded = Buffer.from(match[2], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon >= 0) credentials = { scheme: 'basic', email: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  parsedCredentials.set(req, credentials);
  return credentials;
}

/**
 * Keeps the handler's own error for the error mapper: express-openapi-validator re-wraps
 * whatever a security handler throws as a bare HTTP error with only its status.
 */
function refuse(req: Request, error: ApiError): never {
  req.authError = error;
  throw error;
}

/** A storage failure while checking credentials is a 500, never a 401 with its message. */
async function failClosed<T>(req: Request, work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (cause) {
    if (cause instanceof StorageUnavailable) return refuse(req, unavailable(cause));
    return refuse(req, new ApiError('internal_error', 'Something went wrong on our side', 500, {}, { cause }));
  }
}

export function createSecurityHandlers(repos: Store) {
  return {
    async bearerAuth(req: Request): Promise<boolean> {
      const credentials = credentialsOf(req);
      if (credentials.scheme !== 'bearer') refuse(req, unauthorized('The Authorization header must be `Bearer <key>`'));
      const keyHash = hashKey(credentials.key);
      const owner = await failClosed(req, () => repos.apiKeys.findOwnerByHash(keyHash));
      const now = Date.now();
      const valid = owner !== null && owner.revokedAt === null && (owner.expiresAt === null || Date.parse(owner.expiresAt) > now);
      if (!owner || !valid) refuse(req, unauthorized('The API key is not valid'));
      if (!owner.lastUsedAt || now - Date.parse(owner.lastUsedAt) >= touchIntervalMs) {
        // Last-used is a hint: a disk that refuses writes must not refuse the reads of a valid key.
        await failClosed(req, async () => {
          try {
            await repos.apiKeys.touch(owner.keyId, new Date(now).toISOString());
          } catch (error) {
            if (!(error instanceof StorageUnavailable)) throw error;
          }
        });
      }
      const principal: Principal = { accountId: owner.accountId, role: owner.role };
      req.principal = principal;
      if (req.operation?.requiredRole === 'admin' && principal.role !== 'admin') refuse(req, forbidden());
      return true;
    },

    async basicAuth(req: Request): Promise<boolean> {
      const credentials = credentialsOf(req);
      if (credentials.scheme !== 'basic') refuse(req, unauthorized('The Authorization header must be `Basic base64(email:password)`'));
      const account = await failClosed(req, () => repos.accounts.findByEmail(credentials.email));
      const ok = await verifyPassword(credentials.password, account?.passwordHash ?? decoyHash);
      if (!account || !ok) refuse(req, unauthorized('The email or password is wrong'));
      req.principal = { accountId: account.id, role: account.role };
      return true;
    },
  };
}
