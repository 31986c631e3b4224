// Text a request hands to storage, whichever engine: the one rule for every string the
// service decodes from a request and may store or look up (JSON bodies, HTTP Basic
// credentials). PostgreSQL's text holds no U+0000 (it refuses the whole statement), and a
// lone surrogate (U+D800-U+DFFF) is no character in UTF-8: SQLite would keep U+FFFD instead
// and PostgreSQL refuse it. Such text is refused where it enters (openapi.yaml, "Errors"),
// never left to a query. The parameters a store reads (ids, `cursor`, `Idempotency-Key`,
// message ids) are held by their schemas' patterns to ASCII before any handler runs; a
// Bearer key is only hashed; a client address is checked as one (server/security/rate-limit.ts).

/** With the u flag a surrogate pair is one code point, so only a lone half matches. */
// eslint-disable-next-line no-control-regex -- U+0000 is one of the two it looks for
const unstorable = /[\p{Cs}\u0000]/u;

export type TextProblem = 'nul' | 'surrogate';

/** Why neither engine would keep `text` exactly as it is, or undefined when both would. */
export function textProblem(text: string): TextProblem | undefined {
  const found = unstorable.exec(text)?.[0];
  return found === undefined ? undefined : found === '\u0000' ? 'nul' : 'surrogate';
}

// fatal: invalid bytes are refused, not replaced with U+FFFD (an encoded surrogate, ED A0 80,
// is invalid too); ignoreBOM: a leading U+FEFF is kept as the character it is.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** `bytes` as text when they are UTF-8 that both engines store exactly, else undefined. */
export function storableUtf8(bytes: Uint8Array): string | undefined {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return undefined;
  }
  return textProblem(text) === undefined ? text : undefined;
}

/**
 * The longest email an account can have (openapi.yaml, NewAccount: `maxLength: 254`, the
 * most RFC 5321 delivers to): a longer HTTP Basic user name names no account, and is
 * refused before it is looked up or counted (a key of the failed-login count, whose index
 * on PostgreSQL takes at most some 2,700 bytes).
 */
export const maxEmailLength = 254;
