/**
 * The packed native analysis (one Float64Array of options in, one of annotations out) that
 * small calls use: it must agree with the column-returning call on every input, and reject
 * malformed parameters instead of guessing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native.js';
import { analysisInput, analyzePacked, annotations, FUZZY_EXCLUDED, mayMatch, SUMMARY_PREFIXES, unpack, utf16 } from '../../src/stages/message-analysis.js';
import { mulberry32 } from '../../bench/prng.js';

/** A seeded PRNG in [0, 1) (mulberry32, shared with the benchmarks' corpora). */
const prng = (seed: number): (() => number) => mulberry32(seed).next;

const LINES = ['  Alpha line one', 'beta LINE two', '\tgamma three ', 'ΣΑΣ delta', 'epsilon\r', '', 'zeta 6', 'eta seven', 'theta 8', 'iota nine'];

function conversation(random: () => number, n: number): Array<{ id: string; role: string; content: unknown; tool_calls?: unknown }> {
  const out: Array<{ id: string; role: string; content: unknown; tool_calls?: unknown }> = [];
  for (let i = 0; i < n; i++) {
    const r = random();
    if (r < 0.3 && out.length > 0) {
      // an exact copy, as a fresh string
      const source = out[Math.floor(random() * out.length)]!;
      out.push({ id: `m${i}`, role: 'user', content: typeof source.content === 'string' ? source.content.split('').join('') : source.content });
      continue;
    }
    if (r < 0.45 && out.length > 0) {
      // a near copy: one line changed
      const source = out[Math.floor(random() * out.length)]!;
      if (typeof source.content === 'string') {
        const lines = source.content.split('\n');
        lines[Math.floor(random() * lines.length)] = `edited ${i}`;
        out.push({ id: `m${i}`, role: 'user', content: lines.join('\n') });
        continue;
      }
    }
    const lines: string[] = [];
    const count = 2 + Math.floor(random() * 30);
    for (let k = 0; k < count; k++) lines.push(`${LINES[Math.floor(random() * LINES.length)]} ${Math.floor(random() * 3)}`);
    const content = r < 0.35 ? 42 : r < 0.4 ? `[summary: ${lines.join('\n')}` : lines.join('\n');
    out.push({ id: `m${i}`, role: random() < 0.1 ? 'system' : 'user', content, ...(random() < 0.05 ? { tool_calls: [{}] } : {}) });
  }
  return out;
}

describe('analyzeMessagesPacked', () => {
  it('gives the same annotations as analyzeMessages, whatever the options', () => {
    const random = prng(7);
    let found = { exact: 0, fuzzy: 0 };
    for (let round = 0; round < 300; round++) {
      const messages = conversation(random, Math.floor(random() * 40));
      const minChars = [0, 20, 200][round % 3] as number;
      const input = analysisInput(messages, new Set(['system']), minChars);
      const excluded = new Uint8Array(messages.length).map(() => (random() < 0.2 ? 1 : 0));
      const options = {
        minChars,
        skipPrefixes: utf16(round % 2 === 0 ? SUMMARY_PREFIXES : ['\uD800x', '']),
        keep: random() < 0.5 ? ('earliest' as const) : ('latest' as const),
        recencyStart: Math.floor(random() * (messages.length + 1)),
        exact: random() < 0.8,
        fuzzyThreshold: random() < 0.7 ? [0, 0.5, 0.85, 1, 1.5, NaN][round % 6] : undefined,
        visibleTargets: random() < 0.5,
      };
      const columns = annotations(native.analyzeMessages(input.contents, input.lengths, input.blocked, excluded, options));
      const flags = input.blocked.map((b, i) => b | (excluded[i] ? FUZZY_EXCLUDED : 0));
      expect(unpack(analyzePacked(input.contents, input.lengths, flags, options))).toEqual(columns);
      found = { exact: found.exact + columns.exact.length, fuzzy: found.fuzzy + columns.fuzzy.length };
    }
    // The rounds exercise both passes, not only empty results.
    expect(found.exact).toBeGreaterThan(100);
    expect(found.fuzzy).toBeGreaterThan(100);
  });

  it('rejects malformed parameters and mismatched lengths', () => {
    const contents = ['x'.repeat(300), 'x'.repeat(300)];
    const lengths = new Uint32Array([300, 300]);
    const ok = [200, 0, 2, 1, 0, 0, 1, 0];
    expect(Array.from(native.analyzeMessagesPacked(contents, lengths, new Uint8Array(2), new Float64Array(ok)))).toEqual([1, 0, 0, 1, 300]);
    for (const params of [
      [],
      ok.slice(0, 7),
      [...ok, 5],
      [-1, 0, 2, 1, 0, 0, 1, 0],
      [200.5, 0, 2, 1, 0, 0, 1, 0],
      [200, 0, 2, 1, 0, 0, 1, 1, 3, 97],
      [200, 0, 2, 1, 0, 0, 1, 1, 1, 70000],
    ]) {
      expect(() => native.analyzeMessagesPacked(contents, lengths, new Uint8Array(2), new Float64Array(params)), JSON.stringify(params)).toThrow(
        /malformed analysis parameters/,
      );
    }
    expect(() => native.analyzeMessagesPacked(contents, lengths, new Uint8Array(1), new Float64Array(ok))).toThrow(/one flag byte per content/);
  });
});

describe('the length precheck of small calls (mayMatch)', () => {
  /** Five shared lines, then a tail line that sets the length: every pair overlaps by 5 lines. */
  const message = (length: number, variant: number): string => {
    const head = ['alpha one', 'beta two', 'gamma three', 'delta four', 'epsilon five', `tail ${variant} `].join('\n');
    return head + 'x'.repeat(Math.max(0, length - head.length));
  };
  // Lengths on both sides of the core's 0.7 length ratio (700 / 1000 is exactly 0.7), equal
  // lengths for the exact pass, and short ones under minChars.
  const LENGTHS = [150, 699, 700, 701, 1000, 1001, 1428, 1429];

  it('skips the native call only where the core finds nothing (oracle: the unfiltered native call)', () => {
    let skipped = 0;
    let found = 0;
    fc.assert(
      fc.property(
        fc.array(fc.record({ length: fc.constantFrom(...LENGTHS), variant: fc.nat(2), flag: fc.constantFrom(0, 0, 0, 1, FUZZY_EXCLUDED) }), { maxLength: 12 }),
        fc.boolean(),
        fc.option(fc.constantFrom(0, 0.5, 0.85, 1), { nil: undefined }),
        fc.constantFrom(0, 200),
        (picks, exact, fuzzyThreshold, minChars) => {
          const contents = picks.map((p) => message(p.length, p.variant));
          const lengths = Uint32Array.from(contents, (c) => c.length);
          const flags = Uint8Array.from(picks, (p) => p.flag);
          const options = {
            minChars,
            skipPrefixes: utf16(SUMMARY_PREFIXES),
            keep: 'latest' as const,
            recencyStart: 0,
            exact,
            fuzzyThreshold,
            visibleTargets: false,
          };
          const blocked = flags.map((f) => f & 1);
          const excluded = flags.map((f) => (f & FUZZY_EXCLUDED ? 1 : 0));
          const oracle = annotations(native.analyzeMessages(contents, lengths, blocked, excluded, options));
          expect(unpack(analyzePacked(contents, lengths, flags, options))).toEqual(oracle);
          if (!mayMatch(lengths, flags, options)) skipped++;
          found += oracle.exact.length + oracle.fuzzy.length;
        },
      ),
      { numRuns: 500, seed: 16 },
    );
    // Both outcomes of the precheck are exercised.
    expect(skipped).toBeGreaterThan(50);
    expect(found).toBeGreaterThan(50);
  });

  it('needs no sort from 72 fuzzy candidates on: no longer chain of lengths below 2^32 avoids the ratio', () => {
    // The longest chain: each next length the smallest whose ratio to the one before is below 0.7.
    const chain = [0, 1];
    for (;;) {
      const last = chain[chain.length - 1] as number;
      let next = Math.floor(last / 0.7);
      while (last / next >= 0.7) next++;
      if (next > 2 ** 32 - 1) break;
      chain.push(next);
    }
    expect(chain.length).toBeLessThan(72);
    // The longest chain itself (no pair within the ratio) is skipped, one more candidate is not.
    const options = { minChars: 0, skipPrefixes: [], keep: 'latest' as const, recencyStart: 0, exact: false, fuzzyThreshold: 0.85 };
    const lengths = Uint32Array.from(chain);
    expect(mayMatch(lengths, new Uint8Array(lengths.length), options)).toBe(false);
    const more = Uint32Array.from([...chain, 5]);
    expect(mayMatch(more, new Uint8Array(more.length), options)).toBe(true);
  });

  it('lets a pair at exactly the 0.7 length ratio through, and skips one just below it', () => {
    const options = { minChars: 0, skipPrefixes: [], keep: 'latest' as const, recencyStart: 0, exact: false, fuzzyThreshold: 0, visibleTargets: false };
    for (const [a, linked] of [
      [700, true],
      [699, false],
    ] as const) {
      const contents = [message(a, 0), message(1000, 1)];
      const lengths = Uint32Array.from(contents, (c) => c.length);
      const flags = new Uint8Array(2);
      expect(mayMatch(lengths, flags, options)).toBe(linked);
      expect(unpack(analyzePacked(contents, lengths, flags, options)).fuzzy.length).toBe(linked ? 1 : 0);
      expect(annotations(native.analyzeMessages(contents, lengths, flags, flags, options)).fuzzy.length).toBe(linked ? 1 : 0);
    }
  });
});
