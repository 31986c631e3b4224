// API keys: 256 random bits behind a recognisable prefix, stored only as their SHA-256.
import { hash, randomBytes } from 'node:crypto';

const keyPrefix = 'ps_live_';

/** What is stored of a key, and what a presented key is looked up by. */
export const hashKey = (key: string) => hash('sha256', key, 'hex');

/** A new key: the secret, shown once, and what is stored of it. */
export function generateApiKey(): { key: string; keyHash: string; prefix: string; lastFour: string } {
  const key = keyPrefix + randomBytes(32).toString('base64url');
  return { key, keyHash: hashKey(key), prefix: keyPrefix, lastFour: key.slice(-4) };
}
