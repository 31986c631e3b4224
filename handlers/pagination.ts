// Keyset pagination: a cursor is the last id of the previous page, wrapped so clients
// treat it as opaque. A page costs one index range scan however deep it is.
import { ApiError } from '../domain/errors';

const version = 'v1';
/** Ids are at most 2^53-1 (openapi.yaml, components.schemas.Id): no row is after this one. */
const pastEveryId = Number.MAX_SAFE_INTEGER;

export const encodeCursor = (lastId: number) => Buffer.from(`${version}:${lastId}`).toString('base64url');

/**
 * The id after which the page starts (0 for the first page). A cursor this service did not
 * issue, but that the schema allows, reads as past the last id: an empty page with no next
 * one (openapi.yaml, components.parameters.Cursor). Not a 400: only the server can tell its
 * own cursors, and a request the schema allows is not refused for its input.
 */
function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const match = new RegExp(`^${version}:(\\d{1,16})$`).exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  const id = match?.[1] ? Number(match[1]) : NaN;
  return Number.isSafeInteger(id) ? id : pastEveryId;
}

interface PageRequest {
  /** Fetch rows with id greater than this. */
  after: number;
  /** Fetch one row more than the page holds, to learn whether a next page exists. */
  fetch: number;
  limit: number;
}

export function pageRequest(query: { limit?: number; cursor?: string }): PageRequest {
  // The validator applies the spec's default (components.parameters.Limit) before any
  // handler runs, so openapi.yaml is the one place the page size is written.
  const limit = query.limit;
  if (limit === undefined)
    throw new ApiError('internal_error', 'The page size has no default: is Limit.default missing from openapi.yaml?', 500);
  return { after: decodeCursor(query.cursor), fetch: limit + 1, limit };
}

/** Cuts the extra row off and announces the next page in a Link header. */
export function pageOf<T extends { id?: number } | { petId: number }>(
  rows: T[],
  page: PageRequest,
  url: string,
): { body: T[]; headers: Record<string, string> } {
  if (rows.length <= page.limit) return { body: rows, headers: {} };
  const body = rows.slice(0, page.limit);
  const last = body[body.length - 1] as T;
  const lastId = 'id' in last && last.id !== undefined ? last.id : (last as { petId: number }).petId;
  const next = new URL(url, 'http://service.invalid');
  next.searchParams.set('cursor', encodeCursor(lastId));
  return { body, headers: { Link: `<${next.pathname}${next.search}>; rel="next"` } };
}
