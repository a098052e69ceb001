/**
 * The in-process vector index of the embedded memory stores: one native search per query when no
 * tie crosses the k-th place (a search for k is widened only when the one after the k-th ties it).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { VectorIndex } from '../../src/memory/vector-index.js';
import { native } from '../../src/native.js';

const row = (...v: number[]): Float32Array => Float32Array.from(v);

describe('VectorIndex.nearest', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('searches once when no tie crosses the k-th place, and widens only for ties', () => {
    const index = new VectorIndex();
    index.set('a', row(1, 0, 0));
    index.set('b', row(0.9, 0.1, 0));
    index.set('c', row(0, 1, 0));
    index.set('d', row(0, 0, 1));
    const search = vi.spyOn(native, 'cosineNearest');
    expect(index.nearest(row(1, 0, 0), 1).map((h) => h.id)).toEqual(['a']);
    expect(search).toHaveBeenCalledTimes(1);
    // Three equal vectors under ids that sort against their slots: ties go by id, at any k.
    const tied = new VectorIndex();
    for (const id of ['t-c', 't-a', 't-d', 't-b']) tied.set(id, row(0.3, 0.1, 0.2));
    tied.set('other', row(0, 0, 1));
    search.mockClear();
    expect(tied.nearest(row(0.3, 0.1, 0.2), 1).map((h) => h.id)).toEqual(['t-a']);
    expect(search.mock.calls.length).toBeGreaterThan(1);
    expect(tied.nearest(row(0.3, 0.1, 0.2), 2).map((h) => h.id)).toEqual(['t-a', 't-b']);
    expect(tied.nearest(row(0.3, 0.1, 0.2), 5).map((h) => h.id)).toEqual(['t-a', 't-b', 't-c', 't-d', 'other']);
  });
});
