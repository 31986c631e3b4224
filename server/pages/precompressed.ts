// What this process serves as it is (the contract, the reference's files), in each coding
// a client may take, compressed once: on the first request for it, in libuv's threads, so
// neither start-up nor the event loop pays for it (brotli's best quality is slow:
// docs/performance.md, "Bytes on the wire"). Each coding its own
// strong ETag, `Vary: Accept-Encoding`, and the conditional requests of RFC 9110 (13.2.2),
// every refusal in the Error shape through the error mapper.
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ApiError } from '../../domain/errors';
import { negotiate, type Coding } from '../content-coding';

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/** Above this, brotli's best quality takes seconds (22 s for Swagger UI's 1.7 MB); quality 9 is 0.4 s and 9% larger. */
const bestQualityUpTo = 256 * 1024;

interface Variant {
  body: Buffer;
  etag: string;
}

/** A coding that would not make the content smaller (an image) is not offered. */
type Variants = Record<'identity', Variant> & Partial<Record<Coding, Variant>>;

async function compressAll(body: Buffer): Promise<Variants> {
  const quality = body.length <= bestQualityUpTo ? constants.BROTLI_MAX_QUALITY : 9;
  const [br, gz] = await Promise.all([
    brotli(body, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: quality,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
      },
    }),
    gzipped(body, { level: constants.Z_BEST_COMPRESSION }),
  ]);
  // One tag for the content, told apart per coding: each coding is other bytes (a strong
  // ETag names the bytes), and a change of content changes all three.
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 27);
  return {
    identity: { body, etag: `"${tag}"` },
    ...(br.length < body.length && { br: { body: br, etag: `"${tag}-br"` } }),
    ...(gz.length < body.length && { gzip: { body: gz, etag: `"${tag}-gz"` } }),
  };
}

/** Whether an If-Match or If-None-Match list names `etag` (or is `*`); weak tags match only for If-None-Match. */
function listed(header: string, etag: string, weak: boolean): boolean {
  if (header.trim() === '*') return true;
  for (let tag of header.split(',')) {
    tag = tag.trim();
    if (tag.startsWith('W/')) {
      if (!weak) continue;
      tag = tag.slice(2);
    }
    if (tag === etag) return true;
  }
  return false;
}

const seconds = (ms: number) => Math.floor(ms / 1000) * 1000;

const preconditionFailed = () =>
  new ApiError('precondition_failed', 'A precondition of the request (If-Match, If-Unmodified-Since) does not hold', 412);

export interface Document {
  type: string;
  /** The content, read when first asked for. */
  read: () => Buffer | string;
  /** When the content last changed (a file's mtime), for Last-Modified; none for a document made in memory. */
  modified?: () => Date;
  /**
   * Serves a Range request, which is answered from the uncompressed bytes (the other
   * engine, `send`, does ranges well); without one, a Range header is ignored (RFC 9110 14.2).
   */
  ranges?: RequestHandler;
}

/** A GET (or HEAD) handler serving `doc` in the coding the request accepts best. */
export function precompressed(doc: Document): RequestHandler {
  let variants: Promise<Variants> | undefined;
  let lastModified: { header: string; ms: number } | undefined;
  return async (req: Request, res: Response, next: NextFunction) => {
    const all = await (variants ??= compressAll(Buffer.from(doc.read())));
    if (doc.modified && !lastModified) {
      const ms = seconds(doc.modified().getTime());
      lastModified = { header: new Date(ms).toUTCString(), ms };
    }
    res.setHeader('Vary', 'Accept-Encoding');
    // Kept, but asked again each time: the ETag makes that a 304 without the body.
    res.setHeader('Cache-Control', 'no-cache');
    if (lastModified) res.setHeader('Last-Modified', lastModified.header);
    if (doc.ranges && req.headers.range !== undefined) {
      // The uncompressed bytes' tag, which `send` keeps and checks If-Match and If-Range against.
      res.setHeader('ETag', all.identity.etag);
      return doc.ranges(req, res, next);
    }
    const asked = negotiate(req.headers['accept-encoding']);
    const coding = all[asked] ? asked : 'identity';
    const { body, etag } = all[coding] ?? all.identity;
    res.setHeader('ETag', etag);
    const { 'if-match': ifMatch, 'if-none-match': ifNoneMatch } = req.headers;
    const ifUnmodifiedSince = req.headers['if-unmodified-since'];
    const ifModifiedSince = req.headers['if-modified-since'];
    if (ifMatch !== undefined) {
      if (!listed(ifMatch, etag, false)) return next(preconditionFailed());
    } else if (ifUnmodifiedSince !== undefined && lastModified) {
      const since = Date.parse(ifUnmodifiedSince);
      if (!Number.isNaN(since) && lastModified.ms > since) return next(preconditionFailed());
    }
    let notModified = false;
    if (ifNoneMatch !== undefined) notModified = listed(ifNoneMatch, etag, true);
    else if (ifModifiedSince !== undefined && lastModified) {
      const since = Date.parse(ifModifiedSince);
      notModified = !Number.isNaN(since) && lastModified.ms <= since;
    }
    if (notModified) {
      res.statusCode = 304;
      res.end();
      return;
    }
    res.setHeader('Content-Type', doc.type);
    if (coding !== 'identity') res.setHeader('Content-Encoding', coding);
    res.setHeader('Content-Length', body.length);
    res.end(body);
  };
}
