/**
 * `deduplicate` / `deduplicateWithReport`: unit tests for the rules and bad input, and
 * fast-check properties that hold on both paths (the native core, and the small-batch fast path
 * `'auto'` takes up to SMALL_BATCH entries).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deduplicate, deduplicateWithReport, SMALL_BATCH, type ContextItem, type DeduplicateOptions, type ScoredItem } from '../../src/index.js';
import { deduplicateVia, deduplicateWithReportVia, type ScoredPath } from '../../src/stages/deduplicate.js';
import { thrown, unsafe } from '../support/assertions.js';

type Engine = ScoredPath;
const ENGINES: Engine[] = ['native', 'auto'];

const s = (content: string, score: number, extra: Record<string, unknown> = {}): ScoredItem => ({
  item: { content, ...extra },
  score,
});

/** Oracle straight from the README rules: highest score, ties to the lowest index. */
function oracle(scored: readonly ScoredItem[]): number[] {
  const best = new Map<string, number>();
  scored.forEach((entry, i) => {
    const current = best.get(entry.item.content);
    if (current === undefined || entry.score > (scored[current] as ScoredItem).score) best.set(entry.item.content, i);
  });
  return scored.map((_, i) => i).filter((i) => best.get((scored[i] as ScoredItem).item.content) === i);
}

describe.each(ENGINES)('deduplicate [engine %s]', (engine) => {
  const run = (scored: readonly ScoredItem[], options: DeduplicateOptions = {}): ScoredItem[] => deduplicateVia(engine, scored, options);
  const report = (scored: readonly ScoredItem[], options: DeduplicateOptions = {}) => deduplicateWithReportVia(engine, scored, options);

  describe('bad input', () => {
    const both: [string, (x: readonly ScoredItem[]) => unknown][] = [
      ['deduplicate', (x) => run(x)],
      ['deduplicateWithReport', (x) => report(x)],
    ];

    it.each(both)('%s: not an array -> TypeError naming scored', (_, f) => {
      for (const bad of [undefined, null, 'abc', 42, { length: 1, 0: s('a', 1) }, new Set([s('a', 1)])]) {
        const error = thrown(() => f(unsafe(bad)));
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toContain('scored');
      }
    });

    it.each(both)('%s: entry / item not an object -> TypeError naming the path', (_, f) => {
      let error = thrown(() => f(unsafe([s('a', 1), null])));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('scored[1]');
      error = thrown(() => f(unsafe([s('a', 1), s('b', 1), { item: 'text', score: 1 }])));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('scored[2].item');
      error = thrown(() => f(unsafe([{ score: 1 }])));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('scored[0].item');
    });

    it.each(both)('%s: content not a string -> TypeError naming scored[i].item.content', (_, f) => {
      for (const content of [undefined, null, 42, ['a'], { text: 'a' }, new String('a')]) {
        const error = thrown(() => f(unsafe([s('a', 1), s('b', 2), { item: { content }, score: 3 }])));
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toContain('scored[2].item.content');
      }
    });

    it.each(both)('%s: non-number score -> TypeError naming scored[i].score', (_, f) => {
      for (const score of [undefined, null, '1', 1n, { valueOf: () => 1 }, new Number(1)]) {
        const error = thrown(() => f(unsafe([s('a', 1), { item: { content: 'b' }, score }])));
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toContain('scored[1].score');
      }
    });

    it.each(both)('%s: NaN -> RangeError naming the index, even with no duplicate', (_, f) => {
      let error = thrown(() => f([s('a', 1), s('b', 2), s('c', Number.NaN)]));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('scored[2].score');
      // A NaN on a unique content in a batch large enough for the native path under auto.
      const big = Array.from({ length: SMALL_BATCH + 10 }, (_, i) => s(`c${i % 7}`, i));
      big[40] = s('unique', Number.NaN);
      error = thrown(() => f(big));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('scored[40].score');
    });

    it('a bad entry after a good prefix leaves the input untouched', () => {
      const input = [s('a', 1), s('a', 2), s('b', Number.NaN)];
      const copy = input.slice();
      expect(() => run(input)).toThrow(RangeError);
      expect(input).toEqual(copy);
      input.forEach((entry, i) => expect(entry).toBe(copy[i]));
    });

    it('rejects a non-boolean enabled', () => {
      expect(() => deduplicate([s('a', 1)], unsafe({ enabled: 'yes' }))).toThrow(TypeError);
      expect(() => deduplicate([s('a', 1)], unsafe('fast'))).toThrow(TypeError);
    });
  });

  describe('rules', () => {
    it('empty in, empty out (enabled or not)', () => {
      expect(run([])).toEqual([]);
      expect(run([], { enabled: false })).toEqual([]);
      expect(report([])).toEqual({ kept: [], decisions: [], stats: { input: 0, kept: 0, removed: 0, charsSaved: 0 } });
    });

    it('returns a new array of the very same objects', () => {
      const input = [s('a', 1), s('b', 1)];
      const out = run(input);
      expect(out).not.toBe(input);
      expect(out[0]).toBe(input[0]);
      expect(out[1]).toBe(input[1]);
    });

    it('±Infinity are valid scores and order as expected', () => {
      const input = [s('x', -Infinity), s('x', -Number.MAX_VALUE), s('y', Number.MAX_VALUE), s('y', Infinity), s('z', Infinity), s('z', Infinity)];
      const out = run(input);
      expect(out).toEqual([input[1], input[3], input[4]]);
      expect(out[0]).toBe(input[1]);
      expect(out[1]).toBe(input[3]);
      expect(out[2]).toBe(input[4]);
      // -Infinity alone survives.
      expect(run([s('only', -Infinity)])[0]?.score).toBe(-Infinity);
    });

    it('-0 and +0 tie: the first survives with its own sign', () => {
      const a = [s('z', -0), s('z', 0)];
      const outA = run(a);
      expect(outA).toHaveLength(1);
      expect(outA[0]).toBe(a[0]);
      expect(Object.is(outA[0]?.score, -0)).toBe(true);
      const b = [s('z', 0), s('z', -0)];
      const outB = run(b);
      expect(outB[0]).toBe(b[0]);
      expect(Object.is(outB[0]?.score, 0)).toBe(true);
    });

    it('ties go to the lowest index; later strictly higher wins', () => {
      const input = [s('a', 1), s('a', 3), s('a', 3), s('a', 2), s('b', 5), s('b', 5)];
      expect(run(input)).toEqual([input[1], input[4]]);
      const r = report(input);
      expect(r.decisions.map((x) => [x.index, x.duplicateOf])).toEqual([
        [0, 1],
        [2, 1],
        [3, 1],
        [5, 4],
      ]);
    });

    it('disabled is identity, even with duplicates and NaN', () => {
      const input = [s('a', 1), s('a', 2), s('a', 2), s('b', Number.NaN)];
      const out = run(input, { enabled: false });
      expect(out).not.toBe(input);
      expect(out).toHaveLength(4);
      out.forEach((entry, i) => expect(entry).toBe(input[i]));
      const r = report(input, { enabled: false });
      r.kept.forEach((entry, i) => expect(entry).toBe(input[i]));
      expect(r.decisions).toEqual([]);
      expect(r.stats).toEqual({ input: 4, kept: 4, removed: 0, charsSaved: 0 });
      // As many items as a spread of arguments cannot take (it overflowed the stack).
      const many = Array.from({ length: 200_000 }, (_, i) => s(`item ${i}`, 1));
      expect(report(many, { enabled: false }).kept).toHaveLength(200_000);
    });

    it('metadata plays no part; survivors keep their own fields', () => {
      const input = [s('same', 1, { id: 'a', kind: 'Doc' }), s('same', 2, { id: 'b', tags: ['x'] }), s('other', 1, { id: 'a' })];
      const out = run(input);
      expect(out).toEqual([input[1], input[2]]);
      expect(out[0]?.item).toEqual({ content: 'same', id: 'b', tags: ['x'] });
    });

    it('lone surrogates, U+FFFD and surrogate pairs are all distinct contents', () => {
      const contents = ['a\uD800', 'a\uDC00', 'a\uFFFD', '\uD83D\uDE00', '\uDE00\uD83D', '\uD83D', 'a\uD800'];
      const input = contents.map((c, i) => s(c, i));
      const out = run(input);
      expect(out.map((e) => e.item.content)).toEqual(['a\uDC00', 'a\uFFFD', '\uD83D\uDE00', '\uDE00\uD83D', '\uD83D', 'a\uD800']);
    });

    it('report: stats add up and charsSaved counts UTF-16 units', () => {
      const emoji = '\u{1F600}x'; // 3 UTF-16 units
      const input = [s(emoji, 1), s('ab', 1), s(emoji, 2), s('ab', 0), s('', 5), s('', 6), s('solo', 1)];
      const r = report(input);
      expect(r.kept).toEqual([input[1], input[2], input[5], input[6]]);
      expect(r.decisions).toEqual([
        { index: 0, duplicateOf: 2, item: input[0] },
        { index: 3, duplicateOf: 1, item: input[3] },
        { index: 4, duplicateOf: 5, item: input[4] },
      ]);
      expect(r.decisions[0]?.item).toBe(input[0]);
      expect(r.stats).toEqual({ input: 7, kept: 4, removed: 3, charsSaved: 3 + 2 + 0 });
      expect(r.stats.kept + r.stats.removed).toBe(r.stats.input);
    });

    it('large batch (native path under auto) equals the oracle', () => {
      const input = Array.from({ length: 500 }, (_, i) => s(`c${(i * 7) % 31}`, (i * 13) % 17));
      expect(run(input)).toEqual(oracle(input).map((i) => input[i]));
      const out = run(input);
      oracle(input).forEach((i, k) => expect(out[k]).toBe(input[i]));
    });
  });
});

describe('deduplicate properties', () => {
  const alphabet = fc.constantFrom('a', 'b', 'A', ' ', '\n', '\uD800', '\uDC00', '\uFFFD', '\u{1F600}', 'e\u0301', '\u00E9');
  const content = fc.array(alphabet, { maxLength: 3 }).map((parts) => parts.join(''));
  const score = fc.oneof(
    fc.constantFrom(0, -0, 1, 2, -1, 0.5, Infinity, -Infinity, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE),
    fc.double({ noNaN: true }),
    fc.integer({ min: -3, max: 3 }),
  );
  const extra = fc.record({ id: fc.string({ maxLength: 3 }) }, { requiredKeys: [] });
  const entry = fc.record({ item: fc.tuple(content, extra).map(([c, e]): ContextItem => ({ content: c, ...e })), score });
  // Sizes on both sides of SMALL_BATCH so that 'auto' exercises both paths.
  const batch = fc.oneof(fc.array(entry, { maxLength: 20 }), fc.array(entry, { minLength: SMALL_BATCH - 2, maxLength: 3 * SMALL_BATCH }));
  const runs = { numRuns: 300 };

  it.each(ENGINES)('[engine %s] output is the oracle, a subsequence of the input', (engine) => {
    fc.assert(
      fc.property(batch, (scored) => {
        const frozen = scored.slice();
        const out = deduplicateVia(engine, scored);
        const expected = oracle(scored);
        expect(out.length).toBe(expected.length);
        expected.forEach((i, k) => expect(out[k]).toBe(scored[i]));
        // Subsequence: strictly increasing input positions.
        let last = -1;
        for (const e of out) {
          const at = scored.indexOf(e, last + 1);
          expect(at).toBeGreaterThan(last);
          last = at;
        }
        // Input untouched.
        scored.forEach((e, i) => expect(e).toBe(frozen[i]));
      }),
      runs,
    );
  });

  it.each(ENGINES)('[engine %s] survivors are distinct; removed ones lose to a survivor', (engine) => {
    fc.assert(
      fc.property(batch, (scored) => {
        const r = deduplicateWithReportVia(engine, scored);
        const contents = r.kept.map((e) => e.item.content);
        expect(new Set(contents).size).toBe(contents.length);
        expect(r.kept.length + r.decisions.length).toBe(scored.length);
        const keptIdx = new Set(r.kept.map((e) => scored.indexOf(e)));
        for (const x of r.decisions) {
          const survivor = scored[x.duplicateOf] as ScoredItem;
          expect(keptIdx.has(x.duplicateOf)).toBe(true);
          expect(survivor.item.content).toBe(x.item.item.content);
          expect(survivor.score >= x.item.score).toBe(true);
          // Ties go to the lower index.
          if (survivor.score === x.item.score) expect(x.duplicateOf).toBeLessThan(x.index);
        }
        expect(r.stats.charsSaved).toBe(r.decisions.reduce((sum, x) => sum + x.item.item.content.length, 0));
        expect(r.kept).toEqual(deduplicateVia(engine, scored));
      }),
      runs,
    );
  });

  it('disabled is identity (any scores, NaN included)', () => {
    const anyScore = fc.oneof(score, fc.constant(Number.NaN));
    const entryAny = fc.record({ item: content.map((c): ContextItem => ({ content: c })), score: anyScore });
    fc.assert(
      fc.property(fc.array(entryAny, { maxLength: 100 }), fc.constantFrom<Engine>(...ENGINES), (scored, engine) => {
        const out = deduplicateVia(engine, scored, { enabled: false });
        expect(out.length).toBe(scored.length);
        out.forEach((e, i) => expect(e).toBe(scored[i]));
        const r = deduplicateWithReportVia(engine, scored, { enabled: false });
        r.kept.forEach((e, i) => expect(e).toBe(scored[i]));
        expect(r.decisions).toEqual([]);
      }),
      runs,
    );
  });

  it('the native path and the small-batch fast path agree (and so do the reports)', () => {
    fc.assert(
      fc.property(batch, (scored) => {
        const a = deduplicateWithReportVia('native', scored);
        const b = deduplicateWithReport(scored);
        expect(a.kept.length).toBe(b.kept.length);
        a.kept.forEach((e, i) => expect(e).toBe(b.kept[i]));
        expect(a.decisions.map((x) => [x.index, x.duplicateOf])).toEqual(b.decisions.map((x) => [x.index, x.duplicateOf]));
        expect(a.stats).toEqual(b.stats);
      }),
      runs,
    );
  });

  it('NaN anywhere throws RangeError naming its index, on every engine', () => {
    fc.assert(
      fc.property(fc.array(entry, { minLength: 1, maxLength: 150 }), fc.nat(), fc.constantFrom<Engine>(...ENGINES), (scored, at, engine) => {
        const i = at % scored.length;
        const bad = scored.slice();
        bad[i] = { item: (scored[i] as ScoredItem).item, score: Number.NaN };
        const firstNaN = bad.findIndex((e) => Number.isNaN(e.score));
        const error = thrown(() => deduplicateVia(engine, bad));
        expect(error).toBeInstanceOf(RangeError);
        expect(error.message).toContain(`scored[${firstNaN}].score`);
      }),
      { numRuns: 100 },
    );
  });
});

describe('deduplicate: error messages never fail to build (issue 12)', () => {
  it('an enabled that is a BigInt, a null-prototype or a cyclic object is named in a TypeError', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    const scored = [{ item: { content: 'a' }, score: 1 }];
    expect(() => deduplicate(scored, { enabled: unsafe(10n) })).toThrow(new TypeError('options.enabled must be a boolean, got a bigint'));
    expect(() => deduplicate(scored, { enabled: unsafe(Object.create(null)) })).toThrow(new TypeError('options.enabled must be a boolean, got an object'));
    expect(() => deduplicateWithReport(scored, { enabled: unsafe(cyclic) })).toThrow(new TypeError('options.enabled must be a boolean, got an object'));
  });

  it('a hole in scored is undefined at its index and gets the same error', () => {
    expect(() => deduplicate(unsafe<ScoredItem<ContextItem>[]>([, { item: { content: 'a' }, score: 1 }]))).toThrow(
      new TypeError('scored[0] must be an object, got undefined'),
    );
    expect(() => deduplicateWithReport(unsafe<ScoredItem<ContextItem>[]>([{ item: { content: 'a' }, score: 1 }, ,]))).toThrow(
      new TypeError('scored[1] must be an object, got undefined'),
    );
  });
});
