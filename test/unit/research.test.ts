import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FINDINGS_NORMALIZATION_VERSION,
  canonicalizeUrl,
  countTokens,
  dedupeFindings,
  dedupeResearch,
  dedupeSources,
  findingKey,
  researchStageReport,
  tokenCounter,
  type Source,
} from '../../src/index.js';
import { unsafe } from '../support/assertions.js';

const P1 = 'Rust guarantees memory safety without a garbage collector.';
const P2 = 'The borrow checker enforces aliasing rules at compile time.';
const P3 = 'Async runtimes such as Tokio schedule futures cooperatively.';

describe('dedupeSources', () => {
  it('keeps the most credible source per URL, sorted by credibility, and prunes the rest', () => {
    const sources = [
      { url: 'https://a.example/x', credibility_score: 0.4, title: 'a1' },
      { url: 'https://b.example/', credibility_score: 0.7, title: 'b1' },
      { url: 'https://a.example/x', credibility_score: 0.9, title: 'a2' },
      { title: 'no url', credibility_score: 1 },
      { url: 'https://c.example', credibility_score: 0.1, title: 'c1' },
      { url: 'https://b.example/', credibility_score: 0.2, title: 'b2' },
    ];
    const { kept: unique, decisions: pruned, stats } = dedupeSources(sources);
    expect(unique.map((s) => s['title'])).toEqual(['a2', 'b1', 'c1']);
    expect(unique[0]).toBe(sources[2]);
    expect(pruned).toEqual([
      { index: 0, source: sources[0], reason: 'duplicate', duplicateOf: 2, key: 'https://a.example/x' },
      { index: 3, source: sources[3], reason: 'no-url' },
      { index: 5, source: sources[5], reason: 'duplicate', duplicateOf: 1, key: 'https://b.example/' },
    ]);
    expect(stats).toEqual({ input: 6, kept: 3, removed: 3, withoutUrl: 1, duplicates: 2 });
  });

  it('breaks credibility ties in favour of the first source, and sorts stably', () => {
    const sources = [
      { url: 'u', credibility_score: 0.5, id: 1 },
      { url: 'v', credibility_score: 0.5, id: 2 },
      { url: 'u', credibility_score: 0.5, id: 3 },
      { url: 'w', credibility_score: 0.5, id: 4 },
      { url: 'z', credibility_score: -0, id: 5 },
      { url: 'z', credibility_score: 0, id: 6 },
    ];
    expect(dedupeSources(sources).kept.map((s) => s['id'])).toEqual([1, 2, 4, 5]);
  });

  it('drops sources whose URL is missing, null, empty or blank', () => {
    const sources: Source[] = [{ credibility_score: 1 }, { url: null }, { url: '' }, { url: '  \t' }, { url: 'ok' }];
    const r = dedupeSources(sources);
    expect(r.kept).toEqual([{ url: 'ok' }]);
    expect(r.decisions.map((p) => [p.index, p.reason])).toEqual([
      [0, 'no-url'],
      [1, 'no-url'],
      [2, 'no-url'],
      [3, 'no-url'],
    ]);
  });

  it('treats a missing credibility as 0 and reads configurable fields', () => {
    const sources = [{ link: 'u' }, { link: 'u', score: 0.1 }, { link: 'v', score: -2 }];
    const r = dedupeSources(sources, { credibilityField: 'score', urlField: 'link' });
    expect(r.kept).toEqual([
      { link: 'u', score: 0.1 },
      { link: 'v', score: -2 },
    ]);
    expect(dedupeSources([{ url: 'u' }, { url: 'u', credibility_score: 0 }]).kept).toEqual([{ url: 'u' }]);
  });

  it('compares URLs exactly unless canonicalizeUrls is on', () => {
    const sources = [
      { url: 'https://Example.com/a/', credibility_score: 0.3 },
      { url: 'https://example.com/a?utm_source=news#intro', credibility_score: 0.8 },
      { url: 'HTTPS://EXAMPLE.COM:443/a', credibility_score: 0.5 },
      { url: 'https://example.com/b', credibility_score: 0.1 },
    ];
    expect(dedupeSources(sources).kept).toHaveLength(4);
    const r = dedupeSources(sources, { canonicalizeUrls: true });
    expect(r.kept).toEqual([sources[1], sources[3]]);
    expect(r.decisions.map((p) => p.key)).toEqual(['https://example.com/a', 'https://example.com/a']);
  });

  it.each([
    [[{ url: 'u', credibility_score: Number.NaN }], RangeError, /sources\[0\]\.credibility_score must be finite, got NaN/],
    [[{ url: 'u' }, { url: 'u', credibility_score: Infinity }], RangeError, /sources\[1\]\.credibility_score must be finite, got Infinity/],
    [[{ url: 'u', credibility_score: -Infinity }], RangeError, /must be finite/],
    [[{ url: 'u', credibility_score: '0.5' }], TypeError, /sources\[0\]\.credibility_score must be a number, got a string/],
    [[{ url: 'u', credibility_score: null }], TypeError, /must be a number, got null/],
    [[{ url: 42 }], TypeError, /sources\[0\]\.url must be a string, got a number/],
    [[null], TypeError, /sources\[0\] must be an object, got null/],
    ['nope', TypeError, /sources must be an array/],
  ])('rejects bad input %#', (sources, type, message) => {
    expect(() => dedupeSources(sources as Source[])).toThrow(type);
    expect(() => dedupeSources(sources as Source[])).toThrow(message);
  });

  it('validates options', () => {
    expect(() => dedupeSources([], { credibilityField: 3 as unknown as string })).toThrow(/options\.credibilityField must be a string/);
    expect(() => dedupeSources([], { canonicalizeUrls: 'yes' as unknown as boolean })).toThrow(/options\.canonicalizeUrls must be a boolean/);
    expect(dedupeSources([])).toEqual({ kept: [], decisions: [], stats: { input: 0, kept: 0, removed: 0, withoutUrl: 0, duplicates: 0 } });
  });
});

describe('canonicalizeUrl', () => {
  it.each([
    ['HTTPS://Example.COM/Path/', 'https://example.com/Path'],
    ['https://example.com/', 'https://example.com'],
    ['https://example.com', 'https://example.com'],
    ['http://example.com:80/a', 'http://example.com/a'],
    ['https://example.com:443/a', 'https://example.com/a'],
    ['https://example.com:8443/a/', 'https://example.com:8443/a'],
    ['https://example.com/a#section', 'https://example.com/a'],
    ['https://example.com/a?utm_source=x&utm_Medium=y&UTM_campaign=z', 'https://example.com/a'],
    ['https://example.com/a?b=%20&utm_term=t&a=1&b=2', 'https://example.com/a?b=%20&a=1&b=2'],
    ['https://example.com/a/?q=1#x', 'https://example.com/a?q=1'],
    ['https://user:Pass@Example.com/a', 'https://user:Pass@example.com/a'],
    ['https://example.com/a//', 'https://example.com/a/'],
    // An empty query keeps its `?` in href though `search` is '': it used to cut the path short.
    ['http://a.com/b?', 'http://a.com/b'],
    ['https://x.com/docs?#frag', 'https://x.com/docs'],
    ['http://a.com/?', 'http://a.com'],
    ['https://x.com//docs', 'https://x.com//docs'],
    ['mailto:Someone@Example.com', 'mailto:Someone@Example.com'],
    ['foo://HOST.example/x/', 'foo://host.example/x'],
    ['not a url', 'not a url'],
    ['', ''],
    ['http:Example.COM/x/', 'http://example.com/x'],
    ['https://user@B\u00dcCHER.de:8080/a/', 'https://user@xn--bcher-kva.de:8080/a'],
  ])('%s -> %s', (input, expected) => {
    expect(canonicalizeUrl(input)).toBe(expected);
  });

  it('returns a URL whose host is longer than 1,024 characters unchanged (no DNS name is; converting it was quadratic)', () => {
    // 64,000 distinct code points in one label: the parser's conversion to ASCII took 4.2 s.
    const label = Array.from({ length: 64_000 }, (_, i) => String.fromCodePoint(0x4e00 + (i % 20_000) + 0x10000 * Math.floor(i / 20_000))).join('');
    for (const url of [`https://${label}.com/a/?utm_source=x`, ` \thttps://u@${label}:8080/a/`, `https:\\\\${'A'.repeat(1025)}.com/x/`]) {
      expect(canonicalizeUrl(url)).toBe(url);
    }
    const atLimit = `${'a'.repeat(1016)}.com:443`;
    expect(atLimit.length).toBe(1024);
    expect(canonicalizeUrl(`HTTPS://${atLimit}/x/`)).toBe(`https://${'a'.repeat(1016)}.com/x`);
    // Tabs and line breaks anywhere are dropped by the parser, so they do not hide the host.
    for (const url of [`ht\ttps://${label}/a/`, `h\nttp:${label}/a/`, `https\r://${label}/a/`]) expect(canonicalizeUrl(url)).toBe(url);
    // A scheme without a host to convert (URN, mailto) is canonicalized whatever its length.
    const isbn = `urn:isbn:${'y'.repeat(1100)}`;
    expect(canonicalizeUrl(`URN:isbn:${'y'.repeat(1100)}?utm_source=feed&q=1#top`)).toBe(`${isbn}?q=1`);
    // Only the host counts: a file URL's path after three slashes, trailing spaces the parser trims.
    expect(canonicalizeUrl(`file:///${'p'.repeat(1100)}/x/?utm_source=y#frag`)).toBe(`file:///${'p'.repeat(1100)}/x`);
    expect(canonicalizeUrl(`HTTPS://Example.com:443${' '.repeat(1100)}`)).toBe('https://example.com');
    expect(canonicalizeUrl(`file://${label}/x/`)).toBe(`file://${label}/x/`);
    // Userinfo and path do not count.
    expect(canonicalizeUrl(`https://${'u'.repeat(2000)}@Example.com/${'p'.repeat(5000)}/`)).toBe(`https://${'u'.repeat(2000)}@example.com/${'p'.repeat(5000)}`);
  });

  it('rejects a non-string', () => {
    expect(() => canonicalizeUrl(5 as unknown as string)).toThrow(/url must be a string/);
  });
});

/** The JavaScript reference of the findings normalization (see research.ts / findings.rs). */
const refKey = (p: string): string => p.toLowerCase().replace(/\s+/g, ' ').trim();

function refParagraphs(text: string): string[] {
  const out: string[] = [];
  let current: string[] = [];
  const close = () => {
    if (current.length > 0) out.push(current.join('\n').trim());
    current = [];
  };
  for (const line of text.split('\n')) {
    if (line.trim() === '') close();
    else current.push(line);
  }
  close();
  return out;
}

function refDedupe(findings: string[], minChars = 20): { kept: string[]; removed: number } {
  const seen = new Set<string>();
  const kept: string[] = [];
  let removed = 0;
  for (const text of findings) {
    for (const p of refParagraphs(text)) {
      const key = refKey(p);
      if (key.length >= minChars && seen.has(key)) {
        removed++;
        continue;
      }
      if (key.length >= minChars) seen.add(key);
      kept.push(p);
    }
  }
  return { kept, removed };
}

const zero = { countTokens: () => 0 };

describe('dedupeFindings', () => {
  it('keeps the first occurrence of each paragraph, in order, joined by a blank line', () => {
    const r = dedupeFindings([`${P1}\n\n${P2}`, `${P3}\n\n\n${P1.toUpperCase()}`, `  ${P2.replace(/ /g, '  \n ')}  `]);
    expect(r.text).toBe(`${P1}\n\n${P2}\n\n${P3}`);
    expect(r.stats.removed).toBe(2);
    expect(r.stats.paragraphs).toBe(5);
    expect(r.stats.kept).toBe(3);
    expect(r.decisions).toEqual([
      { finding: 1, paragraph: P1.toUpperCase(), duplicateOfFinding: 0, duplicateOfParagraph: P1 },
      { finding: 2, paragraph: P2.replace(/ /g, '  \n '), duplicateOfFinding: 0, duplicateOfParagraph: P2 },
    ]);
  });

  it('counts tokens with o200k by default: tokensSaved = naive - kept', () => {
    const r = dedupeFindings([`${P1}\n\n${P2}`, `${P1}\n\n${P3}`]);
    expect(r.stats.tokens).toBe(countTokens(`${P1}\n\n${P2}\n\n${P3}`));
    expect(r.stats.naiveTokens).toBe(countTokens(`${P1}\n\n${P2}\n\n${P1}\n\n${P3}`));
    expect(r.stats.tokensSaved).toBe(r.stats.naiveTokens - r.stats.tokens);
    expect(r.stats.tokensSaved).toBeGreaterThan(5);
  });

  it('accepts another encoding or a counter function', () => {
    const cl = dedupeFindings([P1, P1], { countTokens: 'cl100k_base' });
    expect(cl.tokens).toBe(countTokens(P1, 'cl100k_base'));
    const words = dedupeFindings([P1, P1], { countTokens: (t) => t.split(/\s+/).filter(Boolean).length });
    expect(words).toMatchObject({ tokens: 8, naiveTokens: 16, tokensSaved: 8 });
    expect(() => dedupeFindings([P1], { countTokens: () => 1.5 })).toThrow(/options\.countTokens\(\) must return a non-negative integer/);
    expect(() => dedupeFindings([P1], { countTokens: 7 as never })).toThrow(/options\.countTokens must be an encoding name or a function/);
  });

  it('never deduplicates paragraphs shorter than 20 characters (boundary 19 / 20)', () => {
    const nineteen = 'abcdefghijklmnopqrs';
    const twenty = 'abcdefghijklmnopqrt';
    expect(nineteen).toHaveLength(19);
    const r = dedupeFindings([`${nineteen}\n\n${twenty}t`, `${nineteen}\n\n${twenty}t`], zero);
    expect(r.text).toBe(`${nineteen}\n\n${twenty}t\n\n${nineteen}`);
    expect(r.stats.removed).toBe(1);
    // The length is that of the key: whitespace runs collapse before counting.
    const spaced = 'a    b    c    d    e'; // 21 chars, key 'a b c d e' has 9
    expect(dedupeFindings([spaced, spaced], zero).stats.removed).toBe(0);
    expect(dedupeFindings([nineteen, nineteen], { ...zero, minChars: 5 }).stats.removed).toBe(1);
    expect(dedupeFindings([nineteen, nineteen], { ...zero, minChars: 0 }).stats.removed).toBe(1);
  });

  it('splits on blank lines: CRLF and whitespace-only lines count, single newlines do not', () => {
    const r = dedupeFindings([`${P1}\r\n\r\n${P2}\n \t \n${P3}\nstill P3`], zero);
    expect(r.stats.paragraphs).toBe(3);
    expect(r.text).toBe(`${P1}\n\n${P2}\n\n${P3}\nstill P3`);
  });

  it('applies JavaScript whitespace and case semantics (U+FEFF, U+0085, final sigma, dotted I)', () => {
    expect(findingKey('\uFEFF Hello\u00A0\u2028World \uFEFF')).toBe('hello world');
    expect(findingKey('\u0085X\u0085')).toBe('\u0085x\u0085');
    expect(findingKey('ΟΔΟΣ  ΣΑΣ')).toBe('οδος σας');
    expect(findingKey('İstanbul')).toBe('i\u0307stanbul');
    expect(findingKey('a\uD800B')).toBe('a\uD800b');
    // U+FEFF-separated texts are the same finding; U+0085-separated ones are not.
    const base = 'the quick brown fox jumps over';
    const feff = base.replace(/ /g, '\uFEFF');
    const nel = base.replace(/ /g, '\u0085');
    expect(dedupeFindings([base, feff, nel], zero).stats.removed).toBe(1);
    // A lone surrogate is not U+FFFD.
    expect(dedupeFindings([`${base}\uD800`, `${base}\uFFFD`, `${base}\uDC00`], zero).stats.removed).toBe(0);
  });

  it('lowers every code point as JavaScript does, alone and amid ASCII text', () => {
    const jsKey = (p: string): string => p.toLowerCase().replace(/\s+/g, ' ').trim();
    const mismatches: string[] = [];
    // Batches of code points, each between ASCII letters (the mostly-ASCII lines of real text)
    // and each alone; astral planes sampled every 7 code points. Surrogate code points as units.
    for (let start = 0; start < 0x110000; start += 4096) {
      const step = start < 0x10000 ? 1 : 7;
      const chars: string[] = [];
      for (let cp = start; cp < Math.min(start + 4096, 0x110000); cp += step) chars.push(String.fromCodePoint(cp));
      const amid = chars.map((c) => `Ab${c}Cd`).join(' ');
      if (findingKey(amid) !== jsKey(amid)) mismatches.push(`batch at U+${start.toString(16)}`);
      for (const c of chars) {
        if (findingKey(c) !== jsKey(c)) mismatches.push(`U+${(c.codePointAt(0) as number).toString(16)}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('matches the JavaScript reference on generated inputs', () => {
    const unit = fc.constantFrom(
      'a',
      'B',
      'Σ',
      'σ',
      'ς',
      'İ',
      'i',
      'ß',
      ' ',
      '\t',
      '\n',
      '\n',
      '\r',
      '\u0085',
      '\uFEFF',
      '\u00A0',
      '\u2028',
      '\u3000',
      '\uD800',
      '\uDC00',
      '😀',
      'x',
      'Y',
      '.',
    );
    const text = fc.array(unit, { maxLength: 60 }).map((u) => u.join(''));
    fc.assert(
      fc.property(text, (p) => {
        expect(findingKey(p)).toBe(refKey(p));
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.array(text, { maxLength: 6 }), fc.integer({ min: 0, max: 8 }), (findings, minChars) => {
        const ref = refDedupe(findings, minChars);
        const got = dedupeFindings(findings, { ...zero, minChars });
        expect(got.text).toBe(ref.kept.join('\n\n'));
        expect(got.stats.removed).toBe(ref.removed);
      }),
      { numRuns: 300 },
    );
  });

  it('handles empty input', () => {
    expect(dedupeFindings([], zero)).toEqual({
      text: '',
      decisions: [],
      stats: { removed: 0, tokensSaved: 0, tokens: 0, naiveTokens: 0, paragraphs: 0, kept: 0 },
    });
    expect(dedupeFindings(['', '\n\n  \n'], zero).stats.paragraphs).toBe(0);
  });

  it('rejects bad input naming the path', () => {
    expect(() => dedupeFindings('text' as unknown as string[])).toThrow(/findings must be an array/);
    expect(() => dedupeFindings([P1, 3 as unknown as string])).toThrow(/findings\[1\] must be a string, got a number/);
    expect(() => dedupeFindings([P1], { minChars: -1 })).toThrow(RangeError);
    expect(() => dedupeFindings([P1], { minChars: 2.5 })).toThrow(/options\.minChars must be an integer/);
    expect(() => findingKey(null as unknown as string)).toThrow(/paragraph must be a string/);
  });

  it('versions the normalization', () => {
    expect(FINDINGS_NORMALIZATION_VERSION).toBe(1);
  });
});

describe('stage report', () => {
  it('is shaped for a UI card', () => {
    const sources = dedupeSources([{ url: 'a', credibility_score: 1 }, { url: 'a' }, { title: 'x' }]);
    const findings = dedupeFindings([`${P1}\n\n${P2}`, P1], { countTokens: (t) => t.length });
    const report = researchStageReport({ sources, findings });
    const naive = `${P1}\n\n${P2}\n\n${P1}`.length;
    const kept = `${P1}\n\n${P2}`.length;
    expect(report).toEqual({
      stage: 'deduplication',
      tokens: kept,
      naiveTokens: naive,
      savedPercent: Math.round(((naive - kept) / naive) * 1000) / 10,
      items: [
        { label: 'Sources', value: 3 },
        { label: 'Unique sources', value: 1 },
        { label: 'Pruned sources', value: 2 },
        { label: 'Duplicate paragraphs removed', value: 1 },
        { label: 'Findings tokens saved', value: naive - kept },
      ],
    });
  });

  it('works with sources or findings alone, and reports 0% when nothing was counted', () => {
    expect(researchStageReport({ sources: dedupeSources([]) })).toMatchObject({ tokens: 0, naiveTokens: 0, savedPercent: 0 });
    expect(researchStageReport({ findings: dedupeFindings([P1], zero) }).items).toHaveLength(2);
    expect(() => researchStageReport({})).toThrow(/results must hold sources and\/or findings/);
  });

  it('dedupeResearch runs both stages and reports', () => {
    const r = dedupeResearch(
      {
        sources: [
          { url: 'https://x.org/?utm_source=a', credibility_score: 0.2 },
          { url: 'https://X.org', credibility_score: 0.5 },
        ],
        findings: [P1, P1, P2],
      },
      { canonicalizeUrls: true, countTokens: 'cl100k_base' },
    );
    expect(r.sources.kept).toEqual([{ url: 'https://X.org', credibility_score: 0.5 }]);
    expect(r.findings.stats.removed).toBe(1);
    expect(r.report.naiveTokens).toBe(countTokens(`${P1}\n\n${P1}\n\n${P2}`, 'cl100k_base'));
  });
});

describe('token counting', () => {
  it('counts real BPE tokens offline, o200k by default', () => {
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('')).toBe(0);
    expect(countTokens('hello world', 'cl100k_base')).toBe(2);
    expect(tokenCounter('o200k_base')).toBe(tokenCounter());
  });

  it('counts special-token text as plain text instead of throwing', () => {
    expect(countTokens('a <|endoftext|> b')).toBeGreaterThan(3);
    expect(countTokens('<|im_start|>', 'cl100k_base')).toBeGreaterThan(1);
  });

  it('rejects unknown encodings and non-strings', () => {
    expect(() => tokenCounter('gpt2' as never)).toThrow(/encoding must be one of o200k_base, cl100k_base/);
    expect(() => countTokens(5 as unknown as string)).toThrow(/text must be a string/);
  });
});

describe('research: validation gaps (issue 12)', () => {
  it('a hole in sources or findings is undefined at its index and gets the same error', () => {
    const sources = unsafe<Source[]>([, { url: 'a' }]);
    expect(() => dedupeSources(sources)).toThrow(new TypeError('sources[0] must be an object, got undefined'));
    expect(() => dedupeSources(unsafe<Source[]>([{ url: 'a' }, undefined]))).toThrow(new TypeError('sources[1] must be an object, got undefined'));
    const findings = unsafe<string[]>(['a', , 'b']);
    expect(() => dedupeFindings(findings)).toThrow(new TypeError('findings[1] must be a string, got undefined'));
    expect(() => dedupeResearch({ sources: [], findings })).toThrow(new TypeError('findings[1] must be a string, got undefined'));
  });

  it('field names from the caller read own properties only (__proto__, constructor, toString)', () => {
    const sources: Source[] = [
      { url: 'https://a', credibility_score: 0.1 },
      { url: 'https://a', credibility_score: 0.9 },
    ];
    // Object.prototype is not a credibility score: every source counts 0, so the first stays.
    const proto = dedupeSources(sources, { credibilityField: '__proto__' });
    expect(proto.kept).toEqual([sources[0]]);
    expect(dedupeSources(sources, { credibilityField: 'constructor' }).kept).toEqual([sources[0]]);
    // Nor is a URL field inherited: no source has an own `toString`, so none has a URL.
    const byToString = dedupeSources(sources, { urlField: 'toString' });
    expect(byToString.kept).toEqual([]);
    expect(byToString.stats.withoutUrl).toBe(2);
    // An own `__proto__` property (as JSON.parse makes it) is a field like any other.
    const own = JSON.parse('[{"url":"https://a","__proto__":0.2},{"url":"https://a","__proto__":0.7}]') as Source[];
    expect(dedupeSources(own, { credibilityField: '__proto__' }).kept).toEqual([own[1]]);
    expect(() => dedupeSources(JSON.parse('[{"url":"x","__proto__":"high"}]') as Source[], { credibilityField: '__proto__' })).toThrow(
      new TypeError('sources[0].__proto__ must be a number, got a string'),
    );
  });

  it('researchStageReport checks every count it reads, naming the path', () => {
    expect(() => researchStageReport(unsafe({ findings: {} }))).toThrow(new TypeError('results.findings.tokens must be a number, got undefined'));
    expect(() => researchStageReport(unsafe({ findings: { tokens: 3, naiveTokens: 5, removed: 1, tokensSaved: '2' } }))).toThrow(
      new TypeError('results.findings.tokensSaved must be a number, got a string'),
    );
    expect(() => researchStageReport(unsafe({ findings: { tokens: 3, naiveTokens: NaN, removed: 1, tokensSaved: 2 } }))).toThrow(RangeError);
    expect(() => researchStageReport(unsafe({ findings: { tokens: -1, naiveTokens: 5, removed: 1, tokensSaved: 2 } }))).toThrow(
      /results\.findings\.tokens must be an integer >= 0, got -1/,
    );
    expect(() => researchStageReport(unsafe({ sources: {} }))).toThrow(new TypeError('results.sources.stats must be an object, got undefined'));
    expect(() => researchStageReport(unsafe({ sources: { stats: { input: 2, kept: 1 } } }))).toThrow(
      new TypeError('results.sources.stats.removed must be a number, got undefined'),
    );
    // Real results still make a report.
    const findings = dedupeFindings([P1, P1]);
    const report = researchStageReport({ sources: dedupeSources([{ url: 'a' }]), findings });
    expect(report.tokens).toBe(findings.tokens);
    expect(report.items.map((i) => i.value)).toEqual([1, 1, 0, 1, findings.stats.tokensSaved]);
  });
});
