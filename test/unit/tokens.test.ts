import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ResourceLedger, countTokens, countTokensBatch, dedupeFindings, loadTokenizer, tokenCounter, type TokenEncoding } from '../../src/index.js';
// @ts-expect-error: a plain .mjs script without type declarations.
import { generate } from '../../crates/ctxdedup-core/tools/gen-token-classes.mjs';

// The oracle: gpt-tokenizer, the JavaScript counter ctxdedup used before (a devDependency now).
interface BpeModule {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}
const require = createRequire(import.meta.url);
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };
const oracles: Record<TokenEncoding, BpeModule> = {
  o200k_base: require('gpt-tokenizer/encoding/o200k_base') as BpeModule,
  cl100k_base: require('gpt-tokenizer/encoding/cl100k_base') as BpeModule,
};
const ENCODINGS: TokenEncoding[] = ['o200k_base', 'cl100k_base'];
const oracle = (text: string, encoding: TokenEncoding): number => oracles[encoding].countTokens(text, PLAIN_TEXT);

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Pieces that exercise every branch of the pre-tokenization patterns and every character class. */
const PIECES = [
  // Letters: Lu, Ll, Lt, Lm, Lo (several scripts), and a letter new in Unicode 17 (Sidetic).
  'a',
  'b',
  'z',
  'A',
  'Z',
  'É',
  'é',
  'Σ',
  'σ',
  'ς',
  'ǅ',
  'ʰ',
  'ー',
  '中',
  '文',
  'あ',
  'א',
  'ß',
  'İ',
  'ı',
  '\u{10940}',
  '\u{10400}',
  'hello',
  'World',
  'HTTP',
  'camelCase',
  'JSONParser',
  'naïve',
  // Marks (Mn, Mc, Me) and numbers (Nd, Nl, No).
  '\u0301',
  '\u0903',
  '\u20DD',
  '0',
  '7',
  '42',
  '12345',
  '٣',
  'Ⅻ',
  '½',
  // Whitespace (JavaScript \s includes U+FEFF, not U+0085), line breaks, CRLF.
  ' ',
  ' ',
  '  ',
  '\t',
  '\u00A0',
  '\u3000',
  '\u2028',
  '\u2029',
  '\u000B',
  '\u000C',
  '\uFEFF',
  '\u0085',
  '\u180E',
  '\u200B',
  '\n',
  '\n',
  '\n\n',
  '\r\n',
  '\r',
  ' \n',
  '\n ',
  // Punctuation, slashes, contractions (ASCII only), special-token text.
  '.',
  ',',
  '!',
  '?',
  '-',
  '--',
  '/',
  '//',
  '(',
  ')',
  '"',
  "'",
  '`',
  '#',
  '*',
  '_',
  '{',
  '}',
  '<',
  '>',
  "'s",
  "'S",
  "'t",
  "'re",
  "'RE",
  "'Ve",
  "'m",
  "'ll",
  "'lL",
  "'d",
  "'ſ",
  "'x",
  '<|endoftext|>',
  '<|im_start|>',
  '<|fim_prefix|>',
  // Others: symbols, emoji, replacement character and lone surrogates.
  '€',
  '©',
  '→',
  '😀',
  '👍🏽',
  '\uFFFD',
  '\uD800',
  '\uDC00',
  '\uDBFF',
  '\u0000',
];

const pieceText = fc.array(fc.constantFrom(...PIECES), { maxLength: 40 }).map((p) => p.join(''));
/** Any UTF-16 code units, lone surrogates included. */
const unitText = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u)), maxLength: 40 });
/** Any code points (astral included). */
const codePointText = fc.string({ unit: 'binary', maxLength: 40 });
/** Runs of one piece, some long enough to make BPE merge deeply. */
const runText = fc
  .array(fc.tuple(fc.constantFrom(...PIECES), fc.integer({ min: 1, max: 150 })), { minLength: 1, maxLength: 4 })
  .map((runs) => runs.map(([p, n]) => p.repeat(n)).join(''));

function corpusTexts(): { name: string; text: string }[] {
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((f) => {
      const path = join(dir, f);
      return statSync(path).isDirectory() ? files(path) : [path];
    });
  const out: { name: string; text: string }[] = [];
  for (const dir of [join(root, 'examples/corpus'), join(root, '../shared/corpus')]) {
    for (const file of files(dir)) {
      let data = readFileSync(file);
      if (file.endsWith('.gz')) data = gunzipSync(data);
      // Up to 200 KB of each file: every sample file is compared, and the oracle stays quick.
      out.push({ name: file, text: data.subarray(0, 200_000).toString('utf8') });
    }
  }
  return out;
}

describe('native token counting is identical to gpt-tokenizer', () => {
  for (const encoding of ENCODINGS) {
    it(`${encoding}: random text of every character class, lone surrogates, runs`, () => {
      for (const arb of [pieceText, unitText, codePointText, runText]) {
        fc.assert(
          fc.property(arb, (text) => {
            expect(countTokens(text, encoding)).toBe(oracle(text, encoding));
          }),
          { numRuns: 600 },
        );
      }
    });

    it(`${encoding}: the sample corpus (examples/corpus and ../shared/corpus)`, () => {
      const texts = corpusTexts();
      expect(texts.length).toBeGreaterThan(10);
      const mismatches = texts.filter(({ text }) => countTokens(text, encoding) !== oracle(text, encoding)).map((t) => t.name);
      expect(mismatches).toEqual([]);
      // Line by line too, as the stages count contents.
      const lines = texts.flatMap(({ text }) => text.split('\n'));
      const counts = countTokensBatch(lines, encoding);
      const bad = lines.filter((line, i) => counts[i] !== oracle(line, encoding));
      expect(bad).toEqual([]);
    });

    it(`${encoding}: every code point, amid letters, digits and spaces`, () => {
      // Batches of code points in contexts where each character class splits differently: every
      // BMP code point (surrogates as lone units), astral planes sampled every 31 code points.
      const mismatches: string[] = [];
      for (let start = 0; start < 0x110000; start += 0x1000) {
        const step = start < 0x10000 ? 1 : 31;
        const chars: string[] = [];
        for (let cp = start; cp < start + 0x1000; cp += step) chars.push(String.fromCodePoint(cp));
        const text = chars.map((c) => `A${c}b${c}1 ${c}`).join('');
        if (countTokens(text, encoding) !== oracle(text, encoding)) mismatches.push(`batch at U+${start.toString(16)}`);
      }
      expect(mismatches).toEqual([]);
    });
  }

  it('uses the character classes of this JavaScript engine (the committed table is up to date)', () => {
    // The native counter pins the character classes of one Unicode version; gpt-tokenizer uses
    // the running engine's. On another version, regenerate the table (see the script) and rebuild.
    const committed = readFileSync(join(root, 'crates/ctxdedup-core/src/token_classes.rs'), 'utf8');
    const pinned = /as of Unicode (\S+) /.exec(committed)?.[1];
    expect(`Unicode ${process.versions.unicode}`, 'node crates/ctxdedup-core/tools/gen-token-classes.mjs').toBe(`Unicode ${pinned}`);
    expect(committed === (generate() as string), 'the committed table differs from the generated one').toBe(true);
  });

  it('counts gpt-tokenizer quirks alike: trailing whitespace, U+FEFF pairs, non-ASCII contractions', () => {
    for (const encoding of ENCODINGS) {
      for (const text of ['abc \n ', 'x  \n\n  ', '\uFEFF', '\uFEFFhello', 'a\uFEFF\uFEFF\uFEFFb', ' \uFEFF', "it'ſ", "IT'S", '\u0085\u0085x']) {
        expect(countTokens(text, encoding), JSON.stringify(text)).toBe(oracle(text, encoding));
      }
    }
  });
});

describe('adversarial text is counted in linear time', () => {
  /**
   * A run of one character is tokenized periodically (`period` characters per token, e.g. 8 for
   * `x`): the count of a long run is the oracle's count of a short run with the same remainder
   * plus one token per further period. The oracle itself is quadratic, so it only sees the
   * short run.
   */
  function expectedRun(prefix: string, c: string, length: number, suffix: string, period: number, encoding: TokenEncoding): number {
    const short = 3 * period + (length % period);
    const shortCount = oracle(prefix + c.repeat(short) + suffix, encoding);
    const perPeriod = oracle(prefix + c.repeat(short + period) + suffix, encoding) - shortCount;
    expect(perPeriod).toBe(1);
    return shortCount + (length - short) / period;
  }

  const cases: [string, number, number][] = [
    ['x', 5_000_000, 8],
    ['-', 200_000, 64],
    [' ', 300_000, 128],
  ];
  for (const [c, length, period] of cases) {
    it(`${JSON.stringify(c)} × ${length} returns the right count`, () => {
      for (const encoding of ENCODINGS) {
        for (const [prefix, suffix] of [
          ['', ''],
          ['a', 'b'],
          ['Session: ', '\nDone.'],
        ] as [string, string][]) {
          const text = prefix + c.repeat(length) + suffix;
          expect(countTokens(text, encoding)).toBe(expectedRun(prefix, c, length, suffix, period, encoding));
        }
      }
    });
  }

  it('keeps the stages that count tokens usable on such text', () => {
    const spaces = ' '.repeat(300_000);
    const findings = dedupeFindings([`Findings:${spaces}end of findings text`, 'another finding, long enough']);
    expect(findings.tokens).toBeGreaterThan(2000);
    const dashes = '-'.repeat(200_000);
    const ledger = new ResourceLedger();
    const block = { type: 'resource' as const, uri: 'file:///big.txt', content: dashes };
    ledger.process({ turn: 1, tool: 'read_file', callId: 'a', blocks: [block] });
    const again = ledger.process({ turn: 2, tool: 'read_file', callId: 'b', blocks: [block] });
    expect(again.report.tokensSaved).toBe(countTokens(dashes) - countTokens((again.blocks[0] as { text: string }).text));
    expect(again.report.tokensSaved).toBeGreaterThan(3000);
  });

  it('counts other long runs (every printable ASCII character, U+FEFF, CJK) with sane values', () => {
    const chars = [...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)), '\uFEFF', '中', '\u0301', '\uD800'];
    for (const encoding of ENCODINGS) {
      const counts = countTokensBatch(
        chars.map((c) => c.repeat(100_000)),
        encoding,
      );
      chars.forEach((c, i) => {
        const n = counts[i] as number;
        // At least one token per 128 bytes (the longest token), at most one per byte.
        const bytes = Buffer.byteLength(c.repeat(100_000));
        expect(n, JSON.stringify(c)).toBeGreaterThanOrEqual(Math.ceil(bytes / 128));
        expect(n, JSON.stringify(c)).toBeLessThanOrEqual(bytes);
      });
    }
  });
});

describe('token counting API', () => {
  it('counts offline, o200k by default, and keeps one counter per encoding', () => {
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('')).toBe(0);
    expect(countTokens('Hello, world!')).toBe(4);
    expect(countTokens('hello world', 'cl100k_base')).toBe(2);
    expect(tokenCounter('o200k_base')).toBe(tokenCounter());
    expect(tokenCounter('cl100k_base')('<|endoftext|>')).toBe(7);
  });

  it('counts a batch in one call', () => {
    expect(countTokensBatch([])).toEqual([]);
    expect(countTokensBatch(['hello world', '', 'a\uD800b'], 'cl100k_base')).toEqual([
      countTokens('hello world', 'cl100k_base'),
      0,
      countTokens('a\uFFFDb', 'cl100k_base'),
    ]);
  });

  it('rejects bad input with errors naming it', () => {
    expect(() => tokenCounter('gpt2' as never)).toThrow(new TypeError('encoding must be one of o200k_base, cl100k_base, got "gpt2"'));
    expect(() => countTokens(5 as unknown as string)).toThrow(new TypeError('text must be a string, got a number'));
    expect(() => countTokensBatch('abc' as unknown as string[])).toThrow(new TypeError('texts must be an array, got a string'));
    expect(() => countTokensBatch(['a', 1 as unknown as string])).toThrow(new TypeError('texts[1] must be a string, got a number'));
    // eslint-disable-next-line no-sparse-arrays
    expect(() => countTokensBatch(['a', , 'b'] as string[])).toThrow(/^texts\[1\] must be a string/);
    expect(() => countTokensBatch(['a'], 'p50k_base' as never)).toThrow(/encoding must be one of/);
  });
});

describe('loadTokenizer', () => {
  it('resolves for both encodings, counts the same afterwards, and rejects an unknown name with a TypeError', async () => {
    await expect(loadTokenizer()).resolves.toBeUndefined();
    await expect(loadTokenizer('cl100k_base')).resolves.toBeUndefined();
    expect(countTokens('hello world', 'cl100k_base')).toBe(2);
    expect(() => loadTokenizer('p50k_base' as TokenEncoding)).toThrow(TypeError);
  });
});
