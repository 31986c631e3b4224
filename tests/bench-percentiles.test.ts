// The data-scale bench's p99 over several wrk runs (scripts/bench/wrk.ts, pooled()):
// each run weighed by its answers, so that neither one run's stall is dropped nor a
// small share of slow answers in each run is read as the whole tail.
import { parseWrk, pooled } from '../scripts/bench/wrk';

/** A run whose answers take `fast` ms but for its slowest `slowShare` percent, which take `slow`. */
function run(requests: number, fast: number, slow: number, slowShare: number) {
  const tail: Array<[number, number]> = [];
  for (let k = 9000; k <= 10000; k++) tail.push([k / 100, k / 100 > 100 - slowShare ? slow : fast]);
  return { requests, tail };
}

test('a stall in one of three runs counts by its share of all the answers', () => {
  // 3% of one run's answers at 40 ms: 1% of the three runs' together, at the edge of p99.
  expect(pooled([run(1000, 5, 40, 0.5), run(1000, 5, 40, 0.5), run(1000, 5, 40, 0.5)], 99)).toBe(5);
  expect(pooled([run(1000, 5, 40, 3.5), run(1000, 5, 40, 0), run(1000, 5, 40, 0)], 99)).toBe(40);
  expect(pooled([run(1000, 5, 40, 2.5), run(1000, 5, 40, 0), run(1000, 5, 40, 0)], 99)).toBe(5);
});

test('runs are weighed by their answers', () => {
  // 2% slow in a run of 100 answers beside one of 10,000 without: 0.02% of the whole.
  expect(pooled([run(100, 5, 40, 2), run(10_000, 6, 6, 0)], 99)).toBe(6);
  expect(pooled([run(10_000, 5, 40, 2), run(100, 6, 6, 0)], 99)).toBe(40);
});

test("wrk's output gives the tail in ms, its slowest answer last", () => {
  const out = [
    '  100 requests in 1.00s, 1.00KB read',
    ...Array.from({ length: 1000 }, (_, k) => `tail ${((9000 + k) / 100).toFixed(2)} ${1000 + k}`),
    'tail 100 9000',
  ].join('\n');
  const { tail, requests } = parseWrk(out, 1);
  expect(requests).toBe(100);
  expect(tail).toHaveLength(1001);
  expect(tail[0]).toEqual([90, 1]);
  expect(tail[1000]).toEqual([100, 9]);
});
