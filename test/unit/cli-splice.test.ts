/**
 * The byte-level JSON string splicer behind `ctxdedup dedupe`'s output (src/cli/splice.ts) and
 * the report's helpers (preview, cached content keys): checked against `JSON.parse` on arbitrary
 * JSON in arbitrary layouts, and against the plain definitions.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PathStep } from '../../src/cli/formats.js';
import { contentKey, KeyCache, preview, ReplacementMeter } from '../../src/cli/report.js';
import { countTokens } from '../../src/tokens.js';
import { locateStrings, PatchBuilder, spliceStrings, type Patches } from '../../src/cli/splice.js';

/** Applies patches to the input bytes (what the pipeline writes). */
function apply(input: Buffer, p: Patches): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  let from = 0;
  for (let k = 0; k < p.lengths.length; k++) {
    out.push(input.subarray(at, p.ranges[2 * k]), Buffer.from(p.bytes.subarray(from, from + (p.lengths[k] as number))));
    from += p.lengths[k] as number;
    at = p.ranges[2 * k + 1] as number;
  }
  out.push(input.subarray(at));
  return Buffer.concat(out);
}

/** Every path to a string inside a parsed value. */
function stringPaths(value: unknown, at: PathStep[] = []): PathStep[][] {
  if (typeof value === 'string') return [at];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringPaths(v, [...at, i]));
  if (typeof value === 'object' && value !== null) return Object.entries(value).flatMap(([k, v]) => stringPaths(v, [...at, k]));
  return [];
}

function setAt(root: unknown, path: readonly PathStep[], value: unknown): unknown {
  if (path.length === 0) return value;
  let node = root as Record<PathStep, unknown>;
  for (const step of path.slice(0, -1)) node = node[step] as Record<PathStep, unknown>;
  // defineProperty: a "__proto__" key is an own property after JSON.parse, not the prototype.
  Object.defineProperty(node, path[path.length - 1] as PathStep, { value, writable: true, enumerable: true, configurable: true });
  return root;
}

/** JSON text of a value with random spacing, and random \u escapes inside strings. */
function layout(value: unknown, rand: () => number): string {
  const ws = (): string => [' ', '\n', '\t', '\r\n', '', '', ''][Math.floor(rand() * 7)] as string;
  const str = (s: string): string =>
    `"${s
      .split('')
      .map((c) => (/[a-z]/.test(c) && rand() < 0.1 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : JSON.stringify(c).slice(1, -1)))
      .join('')}"`;
  const go = (v: unknown): string => {
    if (typeof v === 'string') return str(v);
    if (Array.isArray(v)) return `[${ws()}${v.map((x) => go(x) + ws()).join(`,${ws()}`)}]`;
    if (typeof v === 'object' && v !== null) {
      return `{${ws()}${Object.entries(v)
        .map(([k, x]) => `${str(k)}${ws()}:${ws()}${go(x)}${ws()}`)
        .join(`,${ws()}`)}}`;
    }
    return JSON.stringify(v);
  };
  return ws() + go(value) + ws();
}

const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.string({ unit: 'binary' }),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 5 }),
  ),
})).value;

describe('spliceStrings', () => {
  it('replaces exactly the strings at the paths, whatever the layout', () => {
    fc.assert(
      fc.property(json, fc.integer(), fc.string({ unit: 'binary' }), (value, seed, replacement) => {
        let s = seed >>> 0;
        const rand = (): number => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
        const text = layout(value, rand);
        const parsed = JSON.parse(text) as unknown;
        const paths = stringPaths(parsed);
        const edits = paths.filter(() => rand() < 0.5).map((path, i) => ({ path, value: `${replacement}#${i}` }));
        const locate = paths.filter((p) => !edits.some((e) => e.path === p));
        const input = Buffer.from(`\uFEFF${text}`);
        const out = new PatchBuilder();
        const spans = spliceStrings(input, 0, input.length, edits, locate, out);
        const result = apply(input, out.finish());
        let expected = structuredClone(parsed);
        for (const e of edits) expected = setAt(expected, e.path, e.value);
        expect(JSON.parse(result.toString('utf8').slice(1))).toEqual(expected);
        // Located tokens are the unedited strings, as written.
        locate.forEach((path, k) => {
          const token = input.toString('utf8', spans[2 * k], spans[2 * k + 1]);
          let node: unknown = parsed;
          for (const step of path) node = (node as Record<PathStep, unknown>)[step];
          expect(JSON.parse(token)).toBe(node);
        });
      }),
      { numRuns: 1000 },
    );
  });

  it('follows JSON.parse on duplicate keys (the last one wins)', () => {
    const input = Buffer.from('{"a": {"b": "first"}, "x": 1, "a": {"c": 2, "b": "second"}}');
    const [span] = locateStrings(input, 0, input.length, [['a', 'b']]);
    expect(input.toString('utf8', span?.start, span?.end)).toBe('"second"');
    const [gone] = locateStrings(Buffer.from('{"a": {"b": "x"}, "a": {}}'), 0, 26, [['a', 'b']]);
    expect(gone).toBeUndefined();
  });

  it('finds keys written with escapes and skips strings full of escaped quotes', () => {
    const input = Buffer.from(String.raw`{"x": "a\"b\\", "c\u006fntent": "he said \"hi\"\\\\", "y": ["\\\"", {"z": 1}]}`);
    const [span] = locateStrings(input, 0, input.length, [['content']]);
    expect(JSON.parse(input.toString('utf8', span?.start, span?.end))).toBe('he said "hi"\\\\');
  });

  it('rejects a path that does not lead to a string', () => {
    const input = Buffer.from('{"a": 1}');
    expect(() => spliceStrings(input, 0, input.length, [{ path: ['a'], value: 'x' }], [], new PatchBuilder())).toThrow(/no string at a/);
  });
});

describe('preview', () => {
  const naive = (text: string, max = 100): string => {
    const flat = text.replace(/\s+/g, ' ').trim();
    return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
  };

  it('equals collapsing the whole text, on long and whitespace-heavy texts', () => {
    const piece = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom(' ', '\n\n', '\t \u00a0', ' '.repeat(500), '\u2028'));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 80 }), fc.integer({ min: 1, max: 120 }), (parts, max) => {
        const text = parts.join('');
        expect(preview(text, max)).toBe(naive(text, max));
      }),
      { numRuns: 500 },
    );
    const long = `${' '.repeat(5000)}x${' \n'.repeat(3000)}y`;
    expect(preview(long)).toBe(naive(long));
  });
});

describe('KeyCache', () => {
  it('always gives the content key, even for texts that look alike', () => {
    // Long texts sharing length, head and tail land in one bucket; a tiny budget forces eviction.
    const head = 'h'.repeat(40);
    const tail = 't'.repeat(40);
    const text = fc.oneof(
      fc.string({ maxLength: 70 }),
      fc.string({ minLength: 3, maxLength: 3 }).map((mid) => head + mid + tail),
      fc.constantFrom('a\uD800'.repeat(40), 'x'.repeat(5000)),
    );
    fc.assert(
      fc.property(fc.array(text, { maxLength: 60 }), fc.integer({ min: 64, max: 20_000 }), (texts, budget) => {
        const cache = new KeyCache(budget, 2);
        for (const t of [...texts, ...texts]) expect(cache.key(t)).toBe(contentKey(t).key);
      }),
      { numRuns: 200 },
    );
  });
});

describe('ReplacementMeter', () => {
  it('measures a replacement where it happens: tokens, tokens saved and preview, cached or not', () => {
    const meter = new ReplacementMeter('o200k_base');
    const text = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('a\uD800'.repeat(40), 'word '.repeat(3000), 'é😀\n'.repeat(700)));
    fc.assert(
      fc.property(fc.array(fc.tuple(text, text), { maxLength: 12 }), (pairs) => {
        // Twice over: the second round comes from the caches.
        for (const [original, replacement] of [...pairs, ...pairs]) {
          const tokens = countTokens(original);
          expect(meter.measure(original, replacement)).toEqual({
            key: contentKey(original).key,
            chars: original.length,
            tokens,
            saved: Math.max(0, tokens - countTokens(replacement)),
            preview: preview(original),
          });
        }
      }),
      { numRuns: 100 },
    );
  });
});
