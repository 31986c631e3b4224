// One full collection after the warm-up (server/heap.ts; docs/performance.md, "Memory").
import { getHeapStatistics } from 'node:v8';
import { collectGarbage } from '../server/heap';

describe('collectGarbage', () => {
  it('gives back the heap that garbage took, and leaves no `gc` behind', () => {
    let garbage: unknown[] | null = Array.from({ length: 300_000 }, (_, i) => ({ i, text: `row ${i}` }));
    const full = getHeapStatistics().total_heap_size;
    expect(garbage).toHaveLength(300_000);
    garbage = null;
    collectGarbage();
    // Dropped, those objects are most of the heap: a full collection gives it back at once.
    expect(getHeapStatistics().total_heap_size).toBeLessThan(full - 10 * 1024 * 1024);
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});
