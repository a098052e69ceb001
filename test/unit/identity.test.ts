/**
 * Identity primitives: sha256 against node:crypto, groupExact on code units, and a Rust panic
 * surfacing as a JS Error.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupExact, sha256 } from '../../src/index.js';
import { native } from '../../src/native.js';
import { testAddon } from '../support/test-addon.js';
import { thrown, unsafe } from '../support/assertions.js';

const reference = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

describe('sha256', () => {
  it('known vectors', () => {
    expect(sha256('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256(new Uint8Array(0))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256(Buffer.from('abc'))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('is lowercase hex of 64 digits', () => {
    expect(sha256('The quick brown fox')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('hashes the UTF-8 bytes of well-formed strings (emoji, NUL, BOM, CJK, astral)', () => {
    for (const text of [
      '\u{1F600}',
      '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}',
      'a\0b',
      '\uFEFFx',
      '日本語',
      '\u{10400}\u{1D11E}',
      '\uFFFD',
      'é',
      'e\u0301',
      'x'.repeat(100_000),
    ]) {
      expect(sha256(text)).toBe(reference(text));
      expect(sha256(text)).toBe(reference(Buffer.from(text, 'utf8')));
      expect(sha256(new TextEncoder().encode(text))).toBe(sha256(text));
    }
  });

  it('property: equals node:crypto on unicode strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (text) => {
        expect(sha256(text)).toBe(reference(text));
      }),
      { numRuns: 300 },
    );
  });

  it('property: equals node:crypto on full-unicode (astral) strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) => {
        expect(text.isWellFormed()).toBe(true);
        expect(sha256(text)).toBe(reference(text));
      }),
      { numRuns: 300 },
    );
  });

  it('property: equals node:crypto on random bytes, as Uint8Array and as Buffer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2_000 }), (bytes) => {
        const expected = reference(bytes);
        expect(sha256(bytes)).toBe(expected);
        expect(sha256(Buffer.from(bytes))).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('hashes only the viewed bytes of a subarray / offset Buffer', () => {
    const backing = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);
    const view = backing.subarray(2, 5);
    expect(sha256(view)).toBe(reference(Uint8Array.from([3, 4, 5])));
    const buf = Buffer.from(backing.buffer, 3, 4);
    expect(sha256(buf)).toBe(reference(Uint8Array.from([4, 5, 6, 7])));
  });

  it('rejects a string with a lone surrogate (TypeError saying so)', () => {
    for (const text of ['\uD800', 'a\uDC00', 'x\uD83D', '\uDE00\uD83D', 'ok\uD800ok']) {
      const error = thrown(() => sha256(text));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(/surrogate/i);
    }
  });

  it('property: emoji-heavy strings (ZWJ sequences, flags, skin tones)', () => {
    const piece = fc.constantFrom('\u{1F600}', '\u{1F1FA}\u{1F1F8}', '\u{1F44D}\u{1F3FD}', '\u{1F468}\u200D\u{1F4BB}', 'a', ' ', '\n', '\u00E9', '\u{10FFFF}');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), (pieces) => {
        const text = pieces.join('');
        expect(sha256(text)).toBe(reference(text));
      }),
      { numRuns: 200 },
    );
  });

  it('property: any string with a lone surrogate is rejected, never hashed as U+FFFD', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 20 }),
        fc.constantFrom('\uD800', '\uDBFF', '\uDC00', '\uDFFF'),
        fc.string({ unit: 'binary', maxLength: 20 }),
        (a, lone, b) => {
          // Avoid a prefix/suffix that would pair the lone unit up.
          const safeA = a.replace(/[\uD800-\uDFFF]/g, 'x');
          const safeB = b.replace(/[\uD800-\uDFFF]/g, 'y');
          expect(() => sha256(safeA + lone + safeB)).toThrow(TypeError);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('rejects non-string, non-bytes input with a TypeError', () => {
    for (const bad of [undefined, null, 42, 1n, true, {}, ['a'], new ArrayBuffer(4), new Uint16Array(2), new DataView(new ArrayBuffer(2)), new String('abc')]) {
      const error = thrown(() => sha256(unsafe(bad)));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('content');
    }
  });
});

describe('groupExact', () => {
  it('distinguishes lone surrogates from each other and from U+FFFD', () => {
    expect(Array.from(groupExact(['a\uD800', 'a\uDC00', 'a\uFFFD', 'a\uD800', 'a\uDC00', 'a\uFFFD', 'a']))).toEqual([0, 1, 2, 0, 1, 2, 6]);
  });

  it('returns a Uint32Array of first-equal indices', () => {
    const out = groupExact(['x', 'y', 'x', '', '', 'X', 'y']);
    expect(out).toBeInstanceOf(Uint32Array);
    expect(Array.from(out)).toEqual([0, 1, 0, 3, 3, 5, 1]);
    expect(groupExact([])).toHaveLength(0);
  });

  it('no normalization: NFC/NFD, CRLF/LF, BOM, NBSP are all different', () => {
    const contents = ['\u00E9', 'e\u0301', 'a\r\nb', 'a\nb', '\uFEFFa', 'a', 'a\u00A0b', 'a b', '\uD83D\uDE00', '\uDE00\uD83D'];
    expect(Array.from(groupExact(contents))).toEqual(contents.map((_, i) => i));
  });

  it('property: matches a Map-based oracle (with lone surrogates in the alphabet)', () => {
    const unit = fc.constantFrom('a', 'b', '\uD800', '\uDC00', '\uFFFD', '\u{1F600}');
    fc.assert(
      fc.property(
        fc.array(
          fc.array(unit, { maxLength: 3 }).map((p) => p.join('')),
          { maxLength: 200 },
        ),
        (contents) => {
          const first = new Map<string, number>();
          const expected = contents.map((c, i) => {
            const seen = first.get(c);
            if (seen !== undefined) return seen;
            first.set(c, i);
            return i;
          });
          expect(Array.from(groupExact(contents))).toEqual(expected);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('rejects bad input with a TypeError naming the path', () => {
    let error = thrown(() => groupExact(unsafe('abc')));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('contents');
    error = thrown(() => groupExact(unsafe(['a', 'b', 3])));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('contents[2]');
  });

  it('rejects a hole in a sparse array with a TypeError (not a generic native Error)', () => {
    const error = thrown(() => groupExact(unsafe(['a', , 'a'])));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('contents[1]');
  });
});

describe('lengths measured in JavaScript', () => {
  const exact = { minChars: 1, skipPrefixes: [] as Uint16Array[], keep: 'latest' as const, recencyStart: 0, exact: true };
  const fuzzy = { ...exact, fuzzyThreshold: 0.5 };
  const prefixed = { ...exact, skipPrefixes: [Uint16Array.of(0x5b)] };
  const contents = ['x'.repeat(300), 'x'.repeat(300), 'y'.repeat(40), 'y'.repeat(40)];
  const none = new Uint8Array(0);
  const run = (lengths: number[], options = exact) => native.analyzeMessages(contents, Uint32Array.from(lengths), new Uint8Array(4), none, options);

  it('are checked whenever a string is read whole or up to its end', () => {
    expect(Array.from(run([300, 300, 40, 40]).exactIndex)).toEqual([0, 2]);
    // A prefix read reaches the end of a 40-unit string; the fuzzy pass reads strings whole.
    for (const [lengths, options] of [
      [[300, 300, 41, 41], prefixed],
      [[300, 300, 39, 39], prefixed],
      [[301, 301, 40, 40], fuzzy],
      [[299, 299, 40, 40], fuzzy],
    ] as const) {
      const error = thrown(() => run([...lengths], options));
      expect(error.message).toContain('does not have the length it was given');
    }
  });

  it('must be one per content', () => {
    const error = thrown(() => run([300, 300, 40]));
    expect(error.message).toContain('one length per content');
  });
});

describe('Rust panics', () => {
  // The first run on a fresh checkout compiles the test addon (see test/support/test-addon.ts).
  it('surface as a JS Error and the process survives', { timeout: 600_000 }, () => {
    // The test build of the addon: `panicForTest` is behind the cargo feature `test-panic`.
    const addon = testAddon();
    const error = thrown(() => addon.panicForTest());
    expect(error).toBeInstanceOf(Error);
    expect(error.message.length).toBeGreaterThan(0);
    // A second panic is caught just the same, and ordinary calls keep working.
    expect(() => addon.panicForTest()).toThrow(Error);
    expect(addon.sha256String('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(Array.from(addon.groupExact(['a', 'a']))).toEqual([0, 0]);
    expect(sha256('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(Array.from(groupExact(['a', 'a']))).toEqual([0, 0]);
  });

  it('has no seam in the product addon', () => {
    expect('panicForTest' in native).toBe(false);
  });
});
