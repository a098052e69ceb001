/**
 * The packed native analysis (one Float64Array of options in, one of annotations out) that
 * small calls use: it must agree with the column-returning call on every input, and reject
 * malformed parameters instead of guessing.
 */
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native.js';
import { analysisInput, analyzePacked, annotations, FUZZY_EXCLUDED, SUMMARY_PREFIXES, unpack, utf16 } from '../../src/stages/message-analysis.js';
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
