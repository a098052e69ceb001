/**
 * The token-count table the CLI's threads share (src/cli/shared-counts.ts): what one view stores,
 * another view of the same memory reads back; keys that differ anywhere in their 128 bits never
 * read each other's count; a full table stores nothing more and answers "unknown", never a wrong count.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contentKey } from '../../src/cli/report.js';
import { SharedCounts, sharedCountsBuffer } from '../../src/cli/shared-counts.js';

const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
const key = fc.oneof(
  hex,
  hex.map((h) => `u16:${h}`),
);

describe('SharedCounts', () => {
  it('gives back what any view stored, and nothing for keys never stored, whatever the table size', () => {
    fc.assert(
      fc.property(fc.uniqueArray(key, { maxLength: 80 }), fc.integer({ min: 0, max: 7 }), (keys, log2) => {
        const buffer = sharedCountsBuffer(1 << log2);
        const writer = new SharedCounts(buffer);
        const reader = new SharedCounts(buffer);
        const stored = new Map<string, number>();
        keys.forEach((k, i) => {
          if (i % 3 === 2) return; // never stored
          writer.set(k, i);
          if (reader.get(k) !== undefined) stored.set(k, i);
        });
        keys.forEach((k, i) => {
          const got = reader.get(k);
          if (i % 3 === 2) expect(got).toBeUndefined();
          else expect(got === undefined || got === i).toBe(true);
        });
        // A table large enough for every key keeps them all.
        if (1 << log2 >= 128) expect(stored.size).toBe(keys.filter((_, i) => i % 3 !== 2).length);
      }),
      { numRuns: 200 },
    );
  });

  it('tells apart keys that share their first words, and the two kinds of key', () => {
    const counts = new SharedCounts(sharedCountsBuffer(8));
    const base = contentKey('some text').key;
    const twin = `${base.slice(0, 24)}${base[24] === '0' ? '1' : '0'}${base.slice(25)}`;
    counts.set(base, 1);
    counts.set(twin, 2);
    counts.set(`u16:${base}`, 3);
    expect([counts.get(base), counts.get(twin), counts.get(`u16:${base}`)]).toEqual([1, 2, 3]);
  });
});
