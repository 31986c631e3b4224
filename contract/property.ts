// Requests as fast-check properties: "for every request this arbitrary draws, the answer
// passes every check". When one fails, fast-check shrinks the drawn inputs (shorter
// strings, smaller numbers, optional parameters left out) while the failure holds, and the
// smallest failing request is the one reported. Each property takes its seed from the
// run's seeded source, so `--seed N` repeats the run, shrinking included.
import fc from 'fast-check';
import type { Exchange, Expectation } from './checks';
import type { SentRequest } from './http';
import type { Operation } from './spec';
import type { Run } from './run-state';

export interface RequestProperty<T> {
  label: string;
  expect: Expectation;
  /** How many samples to draw (shrinking a failure sends more). */
  numRuns: number;
  /** The request for one sample; undefined when there is nothing to send for it. */
  request: (sample: T) => SentRequest | undefined;
  /** After every answer, shrinking attempts included: what a 2xx made must be noted, whoever asked. */
  onAnswer?: (ex: Exchange, sample: T) => void;
  /** After each passing request before any failure (following a Link, remembering a request). */
  onPass?: (ex: Exchange, request: SentRequest) => Promise<void> | void;
}

/**
 * Sends the property's samples. Passing requests are recorded until the first failure;
 * the shrinking attempts after it are not, only the smallest failing request, labelled
 * with the number of steps and fast-check's own seed and path for the property alone.
 */
export async function requestProperty<T>(
  run: Run,
  op: Operation,
  arbitrary: fc.Arbitrary<T>,
  p: RequestProperty<T>,
): Promise<Exchange | undefined> {
  let smallest: Exchange | undefined;
  const property = fc.asyncProperty(arbitrary, async (sample) => {
    const request = p.request(sample);
    if (!request) return true;
    const ex = await run.exchange(op, p.label, p.expect, request, {}, run.o.client);
    p.onAnswer?.(ex, sample);
    if (ex.failures.length > 0) {
      smallest = ex;
      return false;
    }
    if (!smallest) {
      run.keep(ex);
      await p.onPass?.(ex, request);
    }
    return true;
  });
  const seed = run.source.int(2 ** 31);
  const details = await fc.check(property, { seed, numRuns: p.numRuns });
  // A throw that is not a failed check (the suite's own bug) must not pass silently.
  if (details.failed && !smallest)
    throw details.errorInstance instanceof Error ? details.errorInstance : new Error(`property "${p.label}" of ${op.id} failed`);
  if (!smallest) return undefined;
  const shrunk: Exchange = {
    ...smallest,
    label: `${p.label}, shrunk by fast-check to the smallest failing request (${details.numShrinks} steps; fast-check seed ${seed}, path ${details.counterexamplePath ?? '-'})`,
  };
  run.keep(shrunk);
  return shrunk;
}
