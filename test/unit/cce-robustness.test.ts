/**
 * ctxdedup/cce: CCE's tolerance of odd input, and robustness beyond CCE (large and adversarial
 * batches). No timing assertions; sizes are chosen to stay quick in CI.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { analyzeDuplicates, analyzeFuzzyDuplicates, dedupe, type CceMessage, type DedupAnnotation } from '../../src/compat/cce.js';
import { dedupeMessages, type Message } from '../../src/index.js';
import { analyze, CCE_SKIP_PREFIXES, jaccard, normalizedLines } from '../support/message-oracle.js';
import { anyValue, unsafe } from '../support/assertions.js';
import { mulberry32 } from '../../bench/prng.js';
import { SHARED } from '../support/shared.js';

/** A golden CCE case, as far as the order checks read it. */
interface OrderCase {
  params: { recencyStart: number; preserve: string[]; threshold: number };
  messages: CceMessage[];
  expected: { order?: { exact: number[]; fuzzy: number[] } };
}

/** The same messages with string ids, for the native message API (roles here are strings). */
const asMessages = (messages: readonly CceMessage[]): Message[] => messages.map((m) => unsafe<Message>({ ...m, id: String(m.id) }));

const sorted = (map: Map<number, DedupAnnotation>): [number, DedupAnnotation][] => [...map.entries()].sort((a, b) => a[0] - b[0]);

function text(tag: string, n = 10): string {
  return Array.from({ length: n }, (_, i) => `${tag} ${i}: some realistic tool output line, value=${i * 3}`).join('\n');
}

/** CCE's exact-bucket hash: djb2 over the UTF-16 units of `${length}:${content}`. */
function djb2(s: string): number {
  let h = 5381;
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 33) + s.charCodeAt(i)) >>> 0;
  return h;
}
const bucketHash = (content: string): number => djb2(`${content.length}:${content}`);

/** A seeded PRNG in [0, 1) (mulberry32, shared with the benchmarks' corpora). */
const prng = (seed: number): (() => number) => mulberry32(seed).next;

describe('CCE tolerance', () => {
  const A = text('alpha');
  const B = text('beta');

  it('non-string content counts as empty: never eligible, never a crash', () => {
    const odd: unknown[] = [[{ type: 'text', text: A }], { text: A }, null, 42, true, undefined, Symbol('s'), 10n];
    const messages: CceMessage[] = [
      { id: 'x0', role: 'user', content: A },
      ...odd.map((content, i) => ({ id: `odd${i}`, role: 'user', content })),
      { id: 'x1', role: 'user', content: A },
      { id: 'nocontent', role: 'user' },
    ];
    const n = messages.length;
    const exact = analyzeDuplicates(messages, n, new Set(['system']));
    expect(sorted(exact)).toEqual([[0, { duplicateOfIndex: n - 2, contentLength: A.length }]]);
    const fuzzy = analyzeFuzzyDuplicates(messages, n, new Set(['system']), exact, 0);
    expect(fuzzy.size).toBe(0);
    const r = dedupe(messages, { fuzzyDedup: true, recencyWindow: 0 });
    expect(r.stats.messages_deduped).toBe(1);
    expect(r.stats.original_chars).toBe(2 * A.length);
    messages.forEach((m, i) => {
      if (i !== 0) expect(r.messages[i]).toBe(m);
    });
  });

  it('null / missing entries in the array are ineligible, not fatal', () => {
    const messages = unsafe<CceMessage[]>([{ id: 'a', content: A }, null, undefined, { id: 'b', content: A }]);
    const sparse = unsafe<CceMessage[]>([{ id: 'a', content: A }, , { id: 'b', content: A }]);
    expect(sorted(analyzeDuplicates(messages, 4, new Set()))).toEqual([[0, { duplicateOfIndex: 3, contentLength: A.length }]]);
    expect(sorted(analyzeDuplicates(sparse, 3, new Set()))).toEqual([[0, { duplicateOfIndex: 2, contentLength: A.length }]]);
  });

  it('an array-like is copied up to 2^24 entries; a longer length is a RangeError, not a heap exhausted by the copy', () => {
    const A2 = unsafe<CceMessage[]>({ length: 2, 0: { id: 'a', content: A }, 1: { id: 'b', content: A } });
    expect(dedupe(A2, { recencyWindow: 0 }).stats.messages_deduped).toBe(1);
    for (const length of [2 ** 24 + 1, 2 ** 32 - 1, 2 ** 53]) {
      expect(() => dedupe(unsafe<CceMessage[]>({ length }))).toThrow(
        new RangeError(`messages.length must be at most ${2 ** 24} for an array-like (pass an array), got ${length}`),
      );
    }
  });

  it('numeric ids: tags, verbatim keys and _cce_original follow CCE', () => {
    const messages: CceMessage[] = [
      { id: 1, role: 'user', content: A },
      { id: 6.5, role: 'user', content: A },
      { id: 'm2', role: 'user', content: B },
    ];
    const r = dedupe(messages, { recencyWindow: 0, trace: true });
    expect(r.messages[0]).toEqual({
      id: 1,
      role: 'user',
      content: `[cce:dup of 6.5 — ${A.length} chars]`,
      metadata: { _cce_original: { ids: [1], summary_id: 'cce_sum_45h', version: 0 } },
    });
    expect(Object.keys(r.verbatim)).toEqual(['1']);
    expect(r.verbatim['1']).toBe(messages[0]);
    expect(r.decisions).toEqual([
      {
        messageId: 1,
        messageIndex: 0,
        action: 'deduped',
        reason: 'exact_duplicate',
        inputChars: A.length,
        outputChars: `[cce:dup of 6.5 — ${A.length} chars]`.length,
      },
    ]);
  });

  it('preserve may be a Set (functions and dedupe) or an array', () => {
    const messages: CceMessage[] = [
      { id: 'a', role: 'system', content: A },
      { id: 'b', role: 'tool', content: A },
      { id: 'c', role: 'user', content: A },
    ];
    expect(sorted(analyzeDuplicates(messages, 3, new Set(['system', 'tool'])))).toEqual([]);
    expect(sorted(analyzeDuplicates(messages, 3, new Set(['tool'])))).toEqual([[0, { duplicateOfIndex: 2, contentLength: A.length }]]);
    expect(sorted(analyzeDuplicates(messages, 3, unsafe(['system'])))).toEqual([[1, { duplicateOfIndex: 2, contentLength: A.length }]]);
    const viaSet = dedupe(messages, { recencyWindow: 0, preserve: unsafe(new Set(['system'])) });
    const viaArray = dedupe(messages, { recencyWindow: 0, preserve: ['system'] });
    expect(viaSet).toEqual(viaArray);
    expect(viaSet.stats.messages_deduped).toBe(1);
    // Preserve is exact and case-sensitive; an empty role is never preserved.
    const odd: CceMessage[] = [
      { id: 'a', role: 'System', content: A },
      { id: 'b', role: '', content: A },
      { id: 'c', content: A },
    ];
    expect(analyzeDuplicates(odd, 3, new Set(['system', ''])).size).toBe(2);
  });

  it('recencyStart 0, n and beyond n all keep the latest copy; in between keeps the first copy at or after it', () => {
    const messages: CceMessage[] = [
      { id: 'a', content: A },
      { id: 'b', content: B },
      { id: 'c', content: A },
      { id: 'd', content: A },
      { id: 'e', content: B },
    ];
    const latest = [
      [0, { duplicateOfIndex: 3, contentLength: A.length }],
      [1, { duplicateOfIndex: 4, contentLength: B.length }],
      [2, { duplicateOfIndex: 3, contentLength: A.length }],
    ];
    for (const start of [0, 5, 6, 1000, -1, Number.NaN, Infinity, -Infinity]) {
      expect(sorted(analyzeDuplicates(messages, start, new Set()))).toEqual(latest);
    }
    expect(sorted(analyzeDuplicates(messages, 2, new Set()))).toEqual([
      [0, { duplicateOfIndex: 2, contentLength: A.length }],
      [1, { duplicateOfIndex: 4, contentLength: B.length }],
      [3, { duplicateOfIndex: 2, contentLength: A.length }],
    ]);
    // A fractional start behaves like CCE's `index >= start`.
    expect(sorted(analyzeDuplicates(messages, 2.5, new Set()))).toEqual(sorted(analyzeDuplicates(messages, 3, new Set())));
    expect(sorted(analyzeDuplicates(messages, 0.5, new Set()))).toEqual(sorted(analyzeDuplicates(messages, 1, new Set())));
  });

  it('dedupe: recencyWindow 0, negative, n and beyond n', () => {
    const messages: CceMessage[] = [
      { id: 'a', content: A },
      { id: 'b', content: A },
      { id: 'c', content: A },
    ];
    expect(dedupe(messages, { recencyWindow: 0 }).stats.messages_deduped).toBe(2);
    expect(dedupe(messages, { recencyWindow: -3 }).stats.messages_deduped).toBe(2);
    expect(dedupe(messages, { recencyWindow: 3 }).stats.messages_deduped).toBe(0);
    expect(dedupe(messages, { recencyWindow: 10 }).stats.messages_deduped).toBe(0);
    expect(dedupe(messages, { recencyWindow: 1 }).stats.messages_deduped).toBe(2);
    // Default window is 4: nothing replaced here.
    expect(dedupe(messages).stats.messages_deduped).toBe(0);
  });

  it('fuzzy thresholds: above 1 and NaN match nothing; 0 matches every candidate', () => {
    const base = text('near', 20);
    const edited = base.replace('near 7:', 'NEAR seven:');
    const messages: CceMessage[] = [
      { id: 'a', content: base },
      { id: 'b', content: edited },
    ];
    expect(analyzeFuzzyDuplicates(messages, 2, new Set(), new Map(), 1.01).size).toBe(0);
    expect(analyzeFuzzyDuplicates(messages, 2, new Set(), new Map(), Number.NaN).size).toBe(0);
    expect(analyzeFuzzyDuplicates(messages, 2, new Set(), new Map(), 0).size).toBe(1);
    expect(analyzeFuzzyDuplicates(messages, 2, new Set(), new Map(), -1).size).toBe(1);
    const hit = analyzeFuzzyDuplicates(messages, 2, new Set(), new Map());
    expect(sorted(hit)).toEqual([[0, { duplicateOfIndex: 1, contentLength: base.length, similarity: 19 / 21 }]]);
    // Keys of exactAnnotations are kept out of the fuzzy pass.
    expect(analyzeFuzzyDuplicates(messages, 2, new Set(), new Map([[0, { duplicateOfIndex: 9, contentLength: 1 }]])).size).toBe(0);
  });

  it('is synchronous and never mutates its input', () => {
    const messages: CceMessage[] = [
      { id: 'a', content: A, metadata: { keep: true } },
      { id: 'b', content: A },
      { id: 'c', content: text('alpha').replace('alpha 3', 'ALPHA three') },
    ];
    const copy = structuredClone(messages);
    const result = analyzeDuplicates(messages, 3, new Set());
    expect(result).toBeInstanceOf(Map);
    expect(analyzeFuzzyDuplicates(messages, 3, new Set(), result, 0.5)).toBeInstanceOf(Map);
    const r = dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: 0.5, recencyWindow: 0 });
    expect(r).not.toBeInstanceOf(Promise);
    expect(messages).toStrictEqual(copy);
  });

  it('property: both passes equal the pure-JS oracle on random odd transcripts', () => {
    const pool = [
      text('p0', 8),
      text('p0', 9),
      text('p1', 8),
      text('p0', 8).replace('p0 2', 'P0 2'),
      text('p0', 8).replace('p0 4:', 'changed:'),
      `[summary: ${text('p0', 8)}`,
      'short',
    ];
    const content = fc.oneof(fc.constantFrom<unknown>(...pool), fc.constantFrom<unknown>(null, 42, [], undefined));
    const message = fc.record({
      id: fc.oneof(fc.string({ maxLength: 3 }), fc.integer()),
      role: fc.constantFrom<unknown>('user', 'system', 'tool', '', undefined, 'System'),
      content,
      tool_calls: fc.constantFrom<unknown>(undefined, [], [[]], {}, 'x', [1]),
    });
    fc.assert(
      fc.property(
        fc.array(message, { maxLength: 25, size: 'medium' }),
        fc.integer({ min: -2, max: 30 }),
        fc.constantFrom(['system'], [], ['tool', 'user']),
        fc.constantFrom(0, 0.5, 0.85, 0.9, 1),
        (messages, recencyStart, preserve, threshold) => {
          const o = {
            minChars: 200,
            skipPrefixes: CCE_SKIP_PREFIXES,
            preserve: new Set<unknown>(preserve),
            keep: 'latest' as const,
            recencyStart: Math.max(0, Math.min(messages.length, recencyStart)),
            exact: true,
          };
          const expectedExact = analyze(messages, o).exact;
          const exact = analyzeDuplicates(messages, recencyStart, new Set(preserve));
          expect(sorted(exact)).toEqual(expectedExact.map((a) => [a.index, { duplicateOfIndex: a.duplicateOfIndex, contentLength: a.contentLength }]));
          const fuzzy = analyzeFuzzyDuplicates(messages, recencyStart, new Set(preserve), exact, threshold);
          const expectedFuzzy = analyze(messages, { ...o, exact: false, threshold, fuzzyExcluded: new Set(exact.keys()) }).fuzzy;
          const got = sorted(fuzzy);
          expect(got.map(([k, v]) => [k, v.duplicateOfIndex, v.contentLength])).toEqual(
            expectedFuzzy.map((a) => [a.index, a.duplicateOfIndex, a.contentLength]),
          );
          got.forEach(([, v], i) => expect(Object.is(v.similarity, expectedFuzzy[i]?.similarity)).toBe(true));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('CCE option coercion (issue 12)', () => {
  const base = text('near', 20);
  const edited = base.replace('near 7:', 'NEAR seven:');
  const messages: CceMessage[] = [
    { id: 'a', content: base },
    { id: 'b', content: edited },
    { id: 'c', content: base },
  ];

  it("fuzzyThreshold '0.9' is compared like CCE compares it (as 0.9), not a native conversion error", () => {
    const asNumber = dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: 0.9, recencyWindow: 0 });
    expect(asNumber.stats.messages_fuzzy_deduped).toBe(1);
    expect(dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: unsafe('0.9'), recencyWindow: 0 })).toEqual(asNumber);
    // 0.95 is above 19/21: nothing near; 'abc' is NaN and matches nothing; null is 0.
    expect(dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: unsafe('0.95'), recencyWindow: 0 }).stats.messages_fuzzy_deduped).toBe(0);
    expect(dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: unsafe('abc'), recencyWindow: 0 }).stats.messages_fuzzy_deduped).toBe(0);
    expect(dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: unsafe(null), recencyWindow: 0 })).toEqual(
      dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: 0, recencyWindow: 0 }),
    );
    expect(dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: unsafe(1n), recencyWindow: 0 })).toEqual(
      dedupe(messages, { fuzzyDedup: true, fuzzyThreshold: 1, recencyWindow: 0 }),
    );
    expect(sorted(analyzeFuzzyDuplicates(messages, 3, new Set(), new Map(), unsafe('0.9')))).toEqual(
      sorted(analyzeFuzzyDuplicates(messages, 3, new Set(), new Map(), 0.9)),
    );
  });

  it('switches are read for their truthiness, like CCE reads them', () => {
    const on = dedupe(messages, { fuzzyDedup: true, recencyWindow: 0 });
    expect(dedupe(messages, { dedup: unsafe(1), fuzzyDedup: unsafe('yes'), recencyWindow: 0 })).toEqual(on);
    expect(dedupe(messages, { dedup: unsafe(0), fuzzyDedup: unsafe(''), recencyWindow: 0 }).stats).toMatchObject({
      messages_deduped: 0,
      messages_fuzzy_deduped: 0,
    });
    expect(dedupe(messages, { dedup: unsafe(null), fuzzyDedup: true, recencyWindow: 0 }).stats.messages_deduped).toBe(0);
    // A window given as a string is used in arithmetic and comparison as CCE does.
    expect(dedupe(messages, { recencyWindow: unsafe('1') })).toEqual(dedupe(messages, { recencyWindow: 1 }));
  });

  it('property: random option values never produce anything but a result, a TypeError or a RangeError', () => {
    const odd = fc.oneof(
      anyValue(2),
      fc.constantFrom<unknown>('0.9', '1', '', 'abc', -1, 0.5, 2, NaN, Infinity, 1n, -3n, null, undefined, true, [], {}, [0.9], Symbol('s'), () => 0.9),
    );
    const optionsArb = fc.record(
      { dedup: odd, fuzzyDedup: odd, fuzzyThreshold: odd, recencyWindow: odd, preserve: odd, sourceVersion: odd, trace: odd },
      { requiredKeys: [] },
    );
    const messagesArb = fc.oneof(
      fc.constant(messages),
      fc.array(
        fc.oneof(
          fc.constantFrom<unknown>(...messages, null, undefined, 42),
          fc.record({ id: odd, role: odd, content: fc.oneof(fc.constantFrom(base, edited), odd), tool_calls: odd, metadata: odd }, { requiredKeys: [] }),
        ),
        { maxLength: 6 },
      ),
      odd,
    );
    const allowed = (run: () => unknown): void => {
      try {
        run();
      } catch (error) {
        expect(error instanceof TypeError || error instanceof RangeError, String(error)).toBe(true);
      }
    };
    fc.assert(
      fc.property(messagesArb, optionsArb, odd, odd, odd, odd, (m, o, recencyStart, preserveRoles, exactMap, threshold) => {
        allowed(() => dedupe(unsafe<CceMessage[]>(m), unsafe(o)));
        allowed(() => dedupe(unsafe<CceMessage[]>(m), unsafe(recencyStart)));
        allowed(() => analyzeDuplicates(unsafe(m), unsafe(recencyStart), unsafe(preserveRoles)));
        allowed(() => analyzeFuzzyDuplicates(unsafe(m), unsafe(recencyStart), unsafe(preserveRoles), unsafe(exactMap), unsafe(threshold)));
        allowed(() => analyzeFuzzyDuplicates(messages, unsafe(recencyStart), unsafe(preserveRoles), new Map(), unsafe(threshold)));
        allowed(() => dedupe(messages, unsafe({ ...(typeof o === 'object' ? o : {}), fuzzyDedup: true })));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('robustness beyond CCE', () => {
  it('(a) 6,000 eligible messages sharing their first five lines: no error, no groups at 0.85', () => {
    const header = Array.from({ length: 5 }, (_, i) => `shared header line ${i}: $ npm test -- --reporter=verbose`);
    const n = 6000;
    const messages: CceMessage[] = Array.from({ length: n }, (_, i) => ({
      id: `m${i}`,
      role: 'tool',
      content: [...header, `distinct body ${i} first`, `distinct body ${i} second`, `distinct body ${i} third`].join('\n'),
    }));
    expect((messages[0]?.content as string).length).toBeGreaterThanOrEqual(200);
    const exact = analyzeDuplicates(messages, n, new Set(['system']));
    expect(exact.size).toBe(0);
    const fuzzy = analyzeFuzzyDuplicates(messages, n, new Set(['system']), exact, 0.85);
    expect(fuzzy.size).toBe(0);
    // Same through the whole-conversation calls.
    expect(dedupe(messages, { fuzzyDedup: true, recencyWindow: 0 }).stats).toMatchObject({ messages_deduped: 0, messages_fuzzy_deduped: 0 });
    expect(dedupeMessages(asMessages(messages), { near: true }).decisions).toEqual([]);
  });

  it('(b) 3,000 mutually near-identical messages form one fuzzy group', () => {
    const base = Array.from({ length: 40 }, (_, i) => `  const line${i} = transform(input[${i}], "option-${i}");`);
    const n = 3000;
    const messages: CceMessage[] = Array.from({ length: n }, (_, k) => {
      const lines = base.slice();
      lines[k % 40] = `  // edited in revision ${k}`;
      return { id: `m${k}`, role: 'tool', content: lines.join('\n') };
    });
    const fuzzy = analyzeFuzzyDuplicates(messages, n, new Set(['system']), new Map(), 0.85);
    expect(fuzzy.size).toBe(n - 1);
    const keep = n - 1;
    const keepLines = normalizedLines(messages[keep]?.content as string);
    for (const [index, a] of fuzzy) {
      expect(a.duplicateOfIndex).toBe(keep);
      expect(a.contentLength).toBe((messages[index]?.content as string).length);
      expect(a.similarity).toBe(index % 40 === keep % 40 ? 39 / 41 : 38 / 42);
      expect(a.similarity).toBe(jaccard(normalizedLines(messages[index]?.content as string), keepLines));
    }
    // keep 'earliest' through the native API: everything refers to the first message.
    const r = dedupeMessages(asMessages(messages), { near: true, keep: 'earliest' });
    expect(r.stats.nearDuplicates).toBe(n - 1);
    expect(r.decisions.every((d) => d.duplicateOfIndex === 0)).toBe(true);
  });

  it('(c) 2,000 distinct equal-length 20,000-char strings: no exact groups', () => {
    const n = 2000;
    const len = 20_000;
    const filler = 'x'.repeat(len - 6);
    // Half differ only at the end, half only at the start.
    const messages: CceMessage[] = Array.from({ length: n }, (_, i) => {
      const tag = String(i).padStart(6, '0');
      return { id: i, role: 'tool', content: i % 2 === 0 ? filler + tag : tag + filler };
    });
    expect(messages.every((m) => (m.content as string).length === len)).toBe(true);
    expect(analyzeDuplicates(messages, n, new Set()).size).toBe(0);
    // And the same strings, each twice: exactly n annotations, each pointing at the later copy.
    const doubled = [...messages, ...messages.map((m, i) => ({ ...m, id: n + i }))];
    const exact = analyzeDuplicates(doubled, 2 * n, new Set());
    expect(exact.size).toBe(n);
    for (const [index, a] of exact) {
      expect(a).toEqual({ duplicateOfIndex: index + n, contentLength: len });
    }
  });

  it("(e) strings equal in every unit's low byte stay distinct (the binding hashes one byte per unit)", () => {
    // U+0101, U+0201 and U+0001 share their low byte; so do U+4E00 and U+0000 after the prefix.
    const prefix = 'shared first line of a long tool output\n'.repeat(4);
    const variants = ['\u0101', '\u0201', '\u0001', '\u4e00', '\u0000'].map((c) => `${prefix}${c} tail`.padEnd(300, '.'));
    expect(new Set(variants.map((v) => v.length)).size).toBe(1);
    // Each variant twice, in an interleaved order, so both stages meet distinct contents first.
    const order = [0, 1, 2, 3, 4, 4, 3, 2, 1, 0];
    const messages: CceMessage[] = order.map((v, i) => ({ id: i, role: 'tool', content: variants[v] }));
    const exact = analyzeDuplicates(messages, messages.length, new Set());
    expect(sorted(exact)).toEqual([0, 1, 2, 3, 4].map((i) => [i, { duplicateOfIndex: 9 - i, contentLength: 300 }]));
  });

  it('(d) strings that collide under djb2 of `${length}:${content}` are never merged', () => {
    // djb2 multiplies by 33: the 2-unit blocks 'Aa' (65, 97) and 'B@' (66, 64) hash alike
    // (65 * 33 + 97 = 66 * 33 + 64), so any sequence of them collides with any other of equal length.
    expect(djb2('Aa')).toBe(djb2('B@'));
    const random = prng(0xc0ffee);
    const blocks = 120;
    const distinct = new Set<string>();
    while (distinct.size < 400) {
      let s = '';
      for (let b = 0; b < blocks; b++) s += random() < 0.5 ? 'Aa' : 'B@';
      distinct.add(s);
    }
    const contents = [...distinct];
    const hash = bucketHash(contents[0] as string);
    expect(contents.every((c) => bucketHash(c) === hash)).toBe(true);
    expect(contents[0]?.length).toBe(240);

    // 400 colliding, pairwise distinct contents, then true copies of every tenth one.
    const messages: CceMessage[] = contents.map((content, i) => ({ id: `c${i}`, role: 'user', content }));
    const copies = contents.filter((_, i) => i % 10 === 0);
    copies.forEach((content, k) => messages.push({ id: `copy${k}`, role: 'user', content }));
    const n = messages.length;
    const exact = analyzeDuplicates(messages, n, new Set());
    expect(sorted(exact)).toEqual(copies.map((content, k) => [k * 10, { duplicateOfIndex: contents.length + k, contentLength: content.length }]));
    expect(analyzeDuplicates(messages.slice(0, contents.length), contents.length, new Set()).size).toBe(0);

    // Multi-line colliding contents: no near-duplicate groups either (every line differs).
    const lines = (s: string): string => (s.match(/.{1,40}/g) ?? []).join('\n');
    const multi: CceMessage[] = contents.slice(0, 100).map((c, i) => ({ id: `l${i}`, content: lines(c) }));
    const sameLines = analyzeFuzzyDuplicates(multi, multi.length, new Set(), new Map(), 0.85);
    for (const [index, a] of sameLines) {
      expect(a.similarity).toBe(jaccard(normalizedLines(multi[index]?.content as string), normalizedLines(multi[a.duplicateOfIndex]?.content as string)));
      expect(a.similarity).toBeGreaterThanOrEqual(0);
    }

    // The native message API agrees.
    const r = dedupeMessages(asMessages(messages));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual(copies.map((_, k) => [k * 10, contents.length + k]));
  });
});

describe('ctxdedup/cce: Map insertion order as CCE builds it (golden README §6)', () => {
  const dir = join(SHARED, 'golden', 'cce');
  const cases = readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== '_manifest.json')
    .sort()
    .map((f) => ({ file: f, c: JSON.parse(readFileSync(join(dir, f), 'utf8')) as OrderCase }))
    .filter(({ c }) => c.expected.order !== undefined);

  it('finds the cases with an expected order, the djb2 collisions among them', () => {
    expect(cases.length).toBeGreaterThan(50);
    expect(cases.map(({ file }) => file)).toContain('djb2-collisions--interleaved-order.json');
  });

  it.each(cases.map(({ file, c }) => [file, c] as const))('%s: exact and fuzzy key order', (_, c) => {
    const p = c.params;
    const exact = analyzeDuplicates(c.messages, p.recencyStart, new Set(p.preserve));
    expect([...exact.keys()]).toEqual(c.expected.order?.exact);
    const fuzzy = analyzeFuzzyDuplicates(c.messages, p.recencyStart, new Set(p.preserve), exact, p.threshold);
    expect([...fuzzy.keys()]).toEqual(c.expected.order?.fuzzy);
  });

  it('a bucket is placed by its first eligible message, even one in no group', () => {
    // djb2 collision: raising one unit by 1 and lowering the next by 33 keeps the hash.
    const pad = 'x'.repeat(250);
    const single = `${pad}Ab`;
    const colliding = `${pad}BA`;
    const other = `${'y'.repeat(250)}zz`;
    const m = (content: string, id: number): CceMessage => ({ id: `m${id}`, role: 'tool', content });
    const messages = [m(single, 0), m(other, 1), m(other, 2), m(colliding, 3), m(colliding, 4)];
    const exact = analyzeDuplicates(messages, messages.length, new Set());
    // Bucket of `single` / `colliding` first appears at 0, before `other`'s at 1.
    expect([...exact.keys()]).toEqual([3, 1]);
    expect(sorted(exact)).toEqual([
      [1, { duplicateOfIndex: 2, contentLength: 252 }],
      [3, { duplicateOfIndex: 4, contentLength: 252 }],
    ]);
    // An ineligible first message (preserved role) does not place the bucket.
    const preserved = [{ ...m(single, 0), role: 'system' }, ...messages.slice(1)];
    expect([...analyzeDuplicates(preserved, messages.length, new Set(['system'])).keys()]).toEqual([1, 3]);
  });
});
