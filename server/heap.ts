// After the warm-up V8's heap still holds the garbage of its requests, and gives the pages
// back only when its memory reducer runs, seconds later and only in a quiet moment: one
// full collection before ready hands them back at once (docs/performance.md, "Memory").
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'regular' | 'last-resort' }) => void;

/**
 * A full, compacting collection now, as V8 does when memory runs short: a regular one
 * leaves the freed pages in V8's pools, resident.
 */
export function collectGarbage(): void {
  // V8 gives `gc` to contexts made while the flag is on: one such context, then it is off again.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Gc;
  setFlagsFromString('--no-expose-gc');
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
