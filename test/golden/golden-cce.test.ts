import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyzeDuplicates, analyzeFuzzyDuplicates, dedupe, type CceMessage, type DedupAnnotation } from '../../src/compat/cce.js';
import { SHARED } from '../support/shared.js';

interface GoldenCase {
  name: string;
  params: { recencyWindow: number; recencyStart: number; preserve: string[]; threshold: number };
  messages: CceMessage[];
  expected: {
    exact: [number, DedupAnnotation][];
    fuzzy: [number, DedupAnnotation][];
    replaced: { index: number; content: string; _cce_original: Record<string, unknown> }[];
    decisions: Record<string, unknown>[];
    stats: { messages_deduped: number; messages_fuzzy_deduped: number };
  };
}

const dir = join(SHARED, 'golden', 'cce');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json') && f !== '_manifest.json')
  .sort();
const load = (file: string): GoldenCase => JSON.parse(readFileSync(join(dir, file), 'utf8')) as GoldenCase;
const sorted = (map: Map<number, DedupAnnotation>) => [...map.entries()].sort((a, b) => a[0] - b[0]);

describe('ctxdedup/cce golden cases', () => {
  it('finds the golden folder', () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it.each(files)('%s', (file) => {
    const c = load(file);
    const frozen = structuredClone(c.messages);
    const preserve = new Set(c.params.preserve);

    const exact = analyzeDuplicates(c.messages, c.params.recencyStart, preserve);
    expect(sorted(exact)).toEqual(c.expected.exact);
    for (const [, value] of exact) expect(Object.keys(value).sort()).toEqual(['contentLength', 'duplicateOfIndex']);

    const fuzzy = analyzeFuzzyDuplicates(c.messages, c.params.recencyStart, preserve, new Map(c.expected.exact), c.params.threshold);
    const got = sorted(fuzzy);
    expect(got.map(([k, v]) => [k, v.duplicateOfIndex, v.contentLength])).toEqual(c.expected.fuzzy.map(([k, v]) => [k, v.duplicateOfIndex, v.contentLength]));
    got.forEach(([, v], i) => expect(Object.is(v.similarity, c.expected.fuzzy[i]?.[1].similarity)).toBe(true));

    const result = dedupe(c.messages, {
      dedup: true,
      fuzzyDedup: true,
      fuzzyThreshold: c.params.threshold,
      recencyWindow: c.params.recencyWindow,
      preserve: c.params.preserve,
      trace: true,
    });
    const replaced = new Map(c.expected.replaced.map((r) => [r.index, r]));
    c.messages.forEach((input, i) => {
      const r = replaced.get(i);
      if (r === undefined) {
        expect(result.messages[i]).toBe(input);
      } else {
        expect(result.messages[i]).toEqual({
          ...input,
          content: r.content,
          metadata: { ...(input.metadata ?? {}), _cce_original: r._cce_original },
        });
        expect(Object.keys((result.messages[i]?.metadata?.['_cce_original'] ?? {}) as object)).toEqual(Object.keys(r._cce_original));
      }
    });
    expect(result.decisions).toEqual(c.expected.decisions);
    expect(result.stats).toMatchObject(c.expected.stats);
    // The input is never mutated.
    expect(c.messages).toEqual(frozen);
  });
});
