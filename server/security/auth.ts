// Credentials: API keys looked up by their hash (domain/api-keys.ts), passwords checked
// through server/security/passwords.ts, and the security handlers that express-openapi-validator
// calls for the spec's bearerAuth and basicAuth schemes.
import type { Request } from 'express';
import type { Store } from '../../domain/store';
import type { Principal } from '../../domain/types';
import { hashKey } from '../../domain/api-keys';
import { maxEmailLength, storableUtf8 } from '../../domain/text';
import { ApiError, forbidden, StorageUnavailable, unauthorized, unavailable } from '../../domain/errors';
import type { PasswordHashing } from './passwords';

// lastUsedAt is written at most this often per key, so a busy key is not a write per request.
const touchIntervalMs = 60_000;

/** The principal the security handler put on the request; operations with security have one. */
export function principalOf(req: Request): Principal {
  const principal = req.principal;
  if (!principal) throw new ApiError('internal_error', 'No principal on an authenticated request', 500);
  return principal;
}

/**
 * The Authorization header, parsed once per request (rate limits and security both read it).
 * `refused`: HTTP Basic whose user name or password no account can have (domain/text.ts),
 * answered 401 with `reason` before anything is looked up or counted.
 */
export type Credentials =
  | { scheme: 'bearer'; key: string }
  | { scheme: 'basic'; email: string; password: string }
  | { scheme: 'refused'; reason: string }
  | { scheme: 'none' };

// Exactly `Bearer <key>` or `Basic <base64>`: the scheme in any case, one token, nothing after it.
const authorizationHeader = /^(?:(bearer)|basic) +(\S+)$/i;
const base64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function credentialsOf(req: Request): Credentials {
  if (req.credentials) return req.credentials;
  req.credentials = parseCredentials(req.headers.authorization ?? '');
  return req.credentials;
}

// A Bearer key is only ever hashed (domain/api-keys.ts) before it is looked up, so any text
// the header holds is safe with it; Basic credentials are looked up and counted as sent.
function parseCredentials(header: string): Credentials {
  const match = authorizationHeader.exec(header);
  if (match?.[2] && match[1]) return { scheme: 'bearer', key: match[2] };
  if (!match?.[2] || !base64.test(match[2])) return { scheme: 'none' };
  const decoded = storableUtf8(Buffer.from(match[2], 'base64'));
  if (decoded === undefined) return { scheme: 'refused', reason: 'The HTTP Basic credentials must be UTF-8 text without U+0000' };
  const colon = decoded.indexOf(':');
  if (colon < 0) return { scheme: 'none' };
  const email = decoded.slice(0, colon);
  if (email.length > maxEmailLength)
    return { scheme: 'refused', reason: `The email is longer than any account's (${maxEmailLength} characters)` };
  return { scheme: 'basic', email, password: decoded.slice(colon + 1) };
}

/**
 * Keeps the handler's own error for the error mapper: express-openapi-validator re-wraps
 * whatever a security handler throws as a bare HTTP error with only its status.
 */
function refuse(req: Request, error: ApiError): never {
  req.authError = error;
  throw error;
}

/**
 * A failure while checking credentials is a 500 (or the 503 it asks for: storage, too many
 * hashes at once), never a 401 with its message.
 */
async function failClosed<T>(req: Request, work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (cause) {
    if (cause instanceof StorageUnavailable) return refuse(req, unavailable(cause));
    if (cause instanceof ApiError) return refuse(req, cause);
    return refuse(req, new ApiError('internal_error', 'Something went wrong on our side', 500, {}, { cause }));
  }
}

export function createSecurityHandlers(repos: Store, passwords: PasswordHashing) {
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
      if (credentials.scheme === 'refused') refuse(req, unauthorized(credentials.reason));
      if (credentials.scheme !== 'basic') refuse(req, unauthorized('The Authorization header must be `Basic base64(email:password)`'));
      const account = await failClosed(req, () => repos.accounts.findByEmail(credentials.email));
      // An unknown email is checked against a decoy: it costs what a wrong password costs.
      const check = await failClosed(req, () => passwords.verify(credentials.password, account?.passwordHash ?? null));
      if (!account || !check.ok) refuse(req, unauthorized('The email or password is wrong'));
      if (check.upgraded) {
        // Made the way an earlier release made it: replaced now, before the request goes on.
        // A disk that refuses the write does not refuse the login; the next one tries again.
        const upgraded = check.upgraded;
        await failClosed(req, async () => {
          try {
            await repos.accounts.upgradePasswordHash(account.id, account.passwordHash, upgraded);
          } catch (error) {
            if (!(error instanceof StorageUnavailable)) throw error;
          }
        });
      }
      req.principal = { accountId: account.id, role: account.role };
      return true;
    },
  };
}
