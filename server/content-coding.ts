// Content codings (RFC 9110, 8.4.1 and 12.5.3): which of br, gzip or none a request accepts
// best, from Accept-Encoding and its q-values. Shared by the pages served precompressed
// (pages/precompressed.ts) and the JSON answers compressed on the way out
// (pipeline/compress.ts), so both negotiate alike.

export type Coding = 'br' | 'gzip' | 'identity';

/** The q-value of one `name;q=x` element: 1 without one, 0 for one that is not a number in 0..1. */
function qOf(params: string[]): number {
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'q') continue;
    const q = Number(param.slice(eq + 1).trim());
    return q >= 0 && q <= 1 ? q : 0;
  }
  return 1;
}

/**
 * The coding to answer with: the acceptable one with the highest q-value, br before gzip
 * before none at equal q (smallest first). `*` stands for every coding the header does not
 * name. No coding is acceptable unless excluded (`identity;q=0`, or `*;q=0` without
 * `identity`), and it is the answer when nothing else is acceptable: RFC 9110 lets a server
 * send no coding rather than refuse.
 */
export function negotiate(header: string | undefined): Coding {
  if (!header) return 'identity';
  let br = -1;
  let gzip = -1;
  let identity = -1;
  let star = -1;
  for (const element of header.split(',')) {
    const [name = '', ...params] = element.split(';');
    const coding = name.trim().toLowerCase();
    if (coding === 'br') br = qOf(params);
    else if (coding === 'gzip' || coding === 'x-gzip') gzip = qOf(params);
    else if (coding === 'identity') identity = qOf(params);
    else if (coding === '*') star = qOf(params);
  }
  if (br < 0) br = Math.max(star, 0);
  if (gzip < 0) gzip = Math.max(star, 0);
  // Acceptable by default, below any coding asked for by name or by `*`.
  if (identity < 0) identity = star === 0 ? 0 : 0.0001;
  const best: Coding = gzip > br ? 'gzip' : 'br';
  const q = Math.max(br, gzip);
  return q > 0 && q >= identity ? best : 'identity';
}
