// JSON answers compressed when the client accepts br or gzip and the body is large enough
// for it to pay: below `minBytes` the CPU a compression costs is more than the time its
// saved bytes take on a 100 Mbit/s link (docs/performance.md, "Bytes on the wire"). Done
// where the answer is written (res.end), in one synchronous call: the bodies are a few KB
// at most (a page of 100 pets is some 9 KB).
import { brotliCompressSync, constants, gzipSync, type BrotliOptions, type ZlibOptions } from 'node:zlib';
import type { RequestHandler, Response } from 'express';
import { negotiate } from '../content-coding';

/** The smallest JSON body compressed, in bytes (openapi.yaml and the README say it to clients). */
export const minBytes = 2048;

// The cheapest settings: an answer is compressed on every request, not once.
const brotliOptions: BrotliOptions = {
  params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT },
};
const gzipOptions: ZlibOptions = { level: 1 };

const compressible = (res: Response) => {
  const type = res.getHeader('Content-Type');
  return typeof type === 'string' && type.startsWith('application/') && type.includes('json') && !res.hasHeader('Content-Encoding');
};

/** What a response whose request asks for a coding keeps until it ends. */
interface Asked {
  accepted: string;
  end: Response['end'];
}
const asked = Symbol('compress');
type Compressing = Response & { [asked]: Asked };

/**
 * The `end` of every response whose request asks for a coding: one function, the request's
 * state kept on the response. A function made for each response and stored on it kept the
 * requests alive through young collections while V8 ran the code unoptimised
 * (docs/performance.md, "Warm before ready").
 */
function endCompressed(this: Compressing, ...args: unknown[]): Response {
  const { accepted } = this[asked];
  const end = this[asked].end as (this: Response, ...a: unknown[]) => Response;
  const [chunk, encoding] = args;
  const size =
    typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding as BufferEncoding) : chunk instanceof Uint8Array ? chunk.length : 0;
  // Headers already sent (a body written in parts) cannot say Content-Encoding any more.
  if (size < minBytes || this.headersSent || this.statusCode === 204 || this.statusCode === 304 || !compressible(this)) {
    return end.apply(this, args);
  }
  const coding = negotiate(accepted);
  if (coding === 'identity') return end.apply(this, args);
  const body = typeof chunk === 'string' ? Buffer.from(chunk, encoding as BufferEncoding) : (chunk as Uint8Array);
  const packed = coding === 'br' ? brotliCompressSync(body, brotliOptions) : gzipSync(body, gzipOptions);
  this.setHeader('Content-Encoding', coding);
  this.setHeader('Content-Length', packed.length);
  return end.call(this, packed);
}

/** The step: every answer says it varies by Accept-Encoding; one whose request asks for a coding is compressed as it ends. */
export function compressAnswers(): RequestHandler {
  return (req, res, next) => {
    res.vary('Accept-Encoding');
    const accepted = req.headers['accept-encoding'];
    if (accepted === undefined) return next();
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with apply(this) by endCompressed
    (res as Compressing)[asked] = { accepted, end: res.end };
    res.end = endCompressed as Response['end'];
    next();
  };
}
