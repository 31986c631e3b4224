// What the naive Express and the Fastify references share: the service's SQLite file,
// opened read-only, a pet by id, and a Bearer key checked the obvious way (SHA-256 of
// the key, one indexed lookup, revoked and expiry checked) on every request.
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';

export interface PetRow {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

export function openReferenceDb(path: string) {
  const sqlite = new Database(path, { readonly: true, fileMustExist: true });
  const pet = sqlite.prepare('select id, name, category_id as categoryId, status from pets where id = ?');
  const key = sqlite.prepare('select revoked_at as revokedAt, expires_at as expiresAt from api_keys where key_hash = ?');
  return {
    petById: (id: number) => pet.get(id) as PetRow | undefined,
    /** True when the header is `Bearer <key>` with a live key. */
    bearerOk(header: string | undefined): boolean {
      const token = /^bearer +(\S+)$/i.exec(header ?? '')?.[1];
      if (!token) return false;
      const row = key.get(createHash('sha256').update(token, 'utf8').digest('hex')) as
        { revokedAt: string | null; expiresAt: string | null } | undefined;
      return !!row && row.revokedAt === null && (row.expiresAt === null || Date.parse(row.expiresAt) > Date.now());
    },
  };
}

/** The Pet schema of openapi.yaml, as both references validate their answer against it. */
export const petSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'name', 'categoryId'],
  properties: {
    id: { type: 'integer', minimum: 1, maximum: 9007199254740991 },
    name: { type: 'string', minLength: 1, maxLength: 100 },
    categoryId: { type: 'integer', minimum: 1, maximum: 9007199254740991 },
    status: { type: 'string', enum: ['available', 'pending', 'sold'] },
  },
} as const;

export const errorSchema = {
  type: 'object',
  required: ['code', 'message', 'status'],
  properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
} as const;
