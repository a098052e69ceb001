/**
 * Block dedup through dedupeMessages({ keep: 'earliest', blocks }): the rules one by one, bad
 * options, and the five guarantees as properties (lossless via restore and via expand, visible
 * targets, prefix-monotonic, no false positives, net positive in characters and tokens).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  countTokens,
  dedupeMessages,
  dedupeMessagesAsync,
  expandMessages,
  DEFAULT_EXPAND_MAX_CHARS,
  restoreMessages,
  type BlockDecision,
  type BlocksMarker,
  type DedupeMessagesOptions,
  type DedupeMessagesResult,
  type Message,
} from '../../src/index.js';
import { blockTexts, thrown } from '../support/assertions.js';

const BLOCKS: DedupeMessagesOptions = { keep: 'earliest', blocks: true };

function file(n: number, tag = 'src/app.ts'): string[] {
  return Array.from({ length: n }, (_, i) => `  const value${i} = compute(${i}, "${tag}"); // step ${i} of the pipeline`);
}

function catN(lines: readonly string[], first: number): string {
  return lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');
}

function msg(id: string, content: unknown, extra: Partial<Message> = {}): Message {
  return { id, role: 'tool', content, ...extra };
}

function blockDecisions(r: { decisions: readonly { kind: string }[] }): BlockDecision[] {
  return r.decisions.filter((d): d is BlockDecision => d.kind === 'block');
}

/** Every guarantee that can be checked on one result. */
function checkGuarantees(input: Message[], options: DedupeMessagesOptions = BLOCKS): DedupeMessagesResult<Message> {
  const r = dedupeMessages(input, options);
  // Lossless, twice: with the verbatim map, and from the output alone.
  expect(restoreMessages(r.messages, r.verbatim)).toEqual(input);
  expect(expandMessages(r.messages)).toEqual(input);
  const ids = new Map(r.messages.map((m, i) => [m.id, i]));
  for (let i = 0; i < r.messages.length; i++) {
    const marker = r.messages[i]?.metadata?.['ctxdedup'] as BlocksMarker | undefined;
    if (marker?.kind !== 'blocks') continue;
    const outLines = (r.messages[i]?.content as string).split('\n');
    for (const ref of marker.references) {
      // The reference line is where the marker says, and it is the only thing on that line.
      expect(outLines[ref.line]).toMatch(/^\[ctxdedup: |^<ref /);
      const t = ids.get(ref.target) as number;
      expect(t).toBeLessThanOrEqual(i);
      // Visible: the target lines are in the output, verbatim (no reference of the target sits in them).
      const target = r.messages[t] as Message;
      const targetLines = (target.content as string).split('\n');
      expect(ref.from - 1 + ref.lines).toBeLessThanOrEqual(targetLines.length);
      const targetMarker = target.metadata?.['ctxdedup'] as BlocksMarker | undefined;
      expect(targetMarker === undefined || targetMarker.kind === 'blocks').toBe(true);
      for (const other of targetMarker?.references ?? []) {
        if (t === i && other.line >= ref.line) continue;
        expect(other.line < ref.from - 1 || other.line >= ref.from - 1 + ref.lines).toBe(true);
      }
      if (t === i) expect(ref.from - 1 + ref.lines).toBeLessThanOrEqual(ref.line);
    }
  }
  for (const d of r.decisions) {
    if (d.kind !== 'exact') continue;
    // A whole-message tag names a message the model sees in full, and is shorter than the message.
    expect(r.messages[d.duplicateOfIndex]?.metadata?.['ctxdedup']).toBeUndefined();
    expect(r.messages[d.duplicateOfIndex]?.content).toBe(input[d.index]?.content);
    const tag = r.messages[d.index]?.content as string;
    const content = input[d.index]?.content as string;
    expect(tag.length).toBeLessThan(content.length);
    expect(countTokens(tag)).toBeLessThan(countTokens(content));
  }
  const seen = new Map<number, number>();
  for (const d of blockDecisions(r)) {
    // Net positive in characters and in o200k tokens (counted here independently).
    const k = seen.get(d.index) ?? 0;
    seen.set(d.index, k + 1);
    const { run: original, ref, reference } = blockTexts(input, r.messages, d, k);
    expect(ref?.from).toBe(d.targetLines.from);
    expect(d.charsBefore).toBe(original.length);
    expect(d.charsAfter).toBe((reference as string).length);
    expect(d.charsAfter).toBeLessThan(d.charsBefore);
    expect(d.tokensBefore).toBe(countTokens(original));
    expect(d.tokensAfter).toBe(countTokens(reference as string));
    expect(d.tokensAfter).toBeLessThan(d.tokensBefore);
  }
  return r;
}

describe('block dedup: rules', () => {
  it('a file re-read after a one-line edit: unchanged runs become references, the edited line stays', () => {
    const v1 = file(20);
    const v2 = [...v1];
    v2[9] = '  const value9 = computeDifferently(9); // edited';
    const input = [msg('m0', v1.join('\n')), msg('m1', 'user asks for an edit', { role: 'user' }), msg('m2', v2.join('\n'))];
    const r = checkGuarantees(input);
    expect(r.messages[2]?.content).toBe(
      ['[ctxdedup: 9 lines unchanged, = m0 lines 1–9]', v2[9], '[ctxdedup: 10 lines unchanged, = m0 lines 11–20]'].join('\n'),
    );
    expect(r.messages[0]).toBe(input[0]);
    const blocks = blockDecisions(r);
    expect(blocks.map((d) => [d.id, d.lines, d.duplicateOfId, d.targetLines])).toEqual([
      ['m2', { from: 1, to: 9 }, 'm0', { from: 1, to: 9 }],
      ['m2', { from: 11, to: 20 }, 'm0', { from: 11, to: 20 }],
    ]);
    expect(r.stats.blockReferences).toBe(2);
    expect(r.stats.blockLines).toBe(19);
    expect(r.stats.blockCharsSaved).toBe(blocks.reduce((s, d) => s + d.charsSaved, 0));
    expect(r.stats.charsSaved).toBe(r.stats.blockCharsSaved);
    expect(r.stats.charsAfter).toBe(r.stats.charsBefore - r.stats.charsSaved);
  });

  it('a line-numbered read of a shifted file: matched after the numbers, numbers regenerated exactly', () => {
    const body = file(15);
    const input = [msg('r1', catN(body, 1)), msg('r2', catN(['// two new lines', '// at the top', ...body], 1))];
    const r = checkGuarantees(input);
    expect(r.messages[1]?.content).toBe(
      `${catN(['// two new lines', '// at the top'], 1)}\n[ctxdedup: 15 lines unchanged, = r1 lines 1–15, numbered 3–17 here]`,
    );
    const [d] = blockDecisions(r);
    expect(d?.numbered).toEqual({ from: 3, to: 17 });
    const marker = r.messages[1]?.metadata?.['ctxdedup'] as BlocksMarker;
    expect(marker.references[0]?.numbered).toEqual({ first: 3, targetFirst: 1, width: 6, separator: '\t' });
    // A numbered read of lines first shown without numbers (cat, then cat -n).
    const plain = checkGuarantees([msg('p', body.join('\n')), msg('n', `header\n${catN(body, 1)}`)]);
    expect(plain.messages[1]?.content).toBe('header\n[ctxdedup: 15 lines unchanged, = p lines 1–15, numbered 1–15 here]');
    expect((plain.messages[1]?.metadata?.['ctxdedup'] as BlocksMarker).references[0]?.numbered).toEqual({ first: 1, width: 6, separator: '\t' });
    // Off: a shifted read is new text.
    expect(blockDecisions(dedupeMessages(input, { keep: 'earliest', blocks: { lineNumbers: 'off' } }))).toEqual([]);
  });

  it('editor reads (12→, 12|) and grep -n (12:) are numbered formats too; formats never mix', () => {
    const body = file(12);
    const fmt = (sep: string, first: number): string => body.map((l, i) => `${first + i}${sep}${l}`).join('\n');
    for (const sep of ['→', '|', ':']) {
      const r = checkGuarantees([msg('a', fmt(sep, 5)), msg('b', fmt(sep, 40))]);
      expect(blockDecisions(r)).toHaveLength(1);
    }
    expect(blockDecisions(checkGuarantees([msg('a', fmt('→', 5)), msg('b', fmt('|', 40))]))).toEqual([]);
  });

  it('a block repeated inside one message points above, in the same message', () => {
    const log = Array.from({ length: 8 }, (_, i) => `FAIL test/case_${i}.test.ts > handles input ${i} (expected 1, got 0)`).join('\n');
    const r = checkGuarantees([msg('t', `run 1\n${log}\nrun 2\n${log}`)]);
    expect(r.messages[0]?.content).toBe(`run 1\n${log}\nrun 2\n[ctxdedup: 8 lines unchanged, = t lines 2–9]`);
  });

  it('sources: a system prompt and a short message can be targets; they are never rewritten', () => {
    const prompt = file(6, 'system').join('\n');
    const input = [
      { id: 's', role: 'system', content: prompt },
      msg('short', 'ok'),
      msg('t', `here it is again:\n${prompt}\nand more`),
      { id: 's2', role: 'system', content: prompt },
    ];
    const r = checkGuarantees(input);
    expect(r.messages[0]).toBe(input[0]);
    expect(r.messages[3]).toBe(input[3]);
    expect(blockDecisions(r).map((d) => [d.id, d.duplicateOfId])).toEqual([['t', 's']]);
  });

  it('whole-message exact duplicates go first; their text is not a source; blocks see the rest', () => {
    const a = file(10).join('\n');
    const input = [msg('m0', a), msg('m1', a), msg('m2', `${a}\nplus one line at the end of the file`)];
    const r = checkGuarantees(input);
    expect(r.decisions.map((d) => [d.id, d.kind, d.duplicateOfId])).toEqual([
      ['m1', 'exact', 'm0'],
      ['m2', 'block', 'm0'],
    ]);
  });

  it('a duplicate of a message the pass rewrote stays a message (its tag would name text no longer there in full)', () => {
    const a = file(10).join('\n');
    const edited = `${a}\nplus one line at the end of the file`;
    const input = [msg('m0', a), msg('m1', edited), msg('m2', edited), msg('m3', a)];
    const r = checkGuarantees(input);
    expect(r.decisions.map((d) => [d.id, d.kind, d.duplicateOfId])).toEqual([
      ['m1', 'block', 'm0'],
      ['m2', 'block', 'm0'],
      ['m3', 'exact', 'm0'],
    ]);
    expect(r.messages[2]?.content).toBe(r.messages[1]?.content);
    expect(r.stats.exactDuplicates).toBe(1);
    expect(Object.keys(r.verbatim)).toEqual(['m3', 'm1', 'm2']);
  });

  it('keep earliest: a duplicate whose tag would not be shorter (characters or tokens) stays in full', () => {
    const dashes = '-'.repeat(200);
    for (const options of [BLOCKS, { keep: 'earliest' as const }]) {
      expect(dedupeMessages([msg('m0', dashes), msg('m1', dashes)], options).decisions).toEqual([]);
      expect(dedupeMessages([msg('m0', 'ok'), msg('m1', 'ok')], { ...options, minChars: 0 }).decisions).toEqual([]);
      const long = file(8).join('\n');
      expect(dedupeMessages([msg('m0', long), msg('m1', long)], options).decisions.map((d) => d.kind)).toEqual(['exact']);
    }
    // keep 'latest' keeps context-compression-engine's analysis.
    expect(dedupeMessages([msg('m0', dashes), msg('m1', dashes)]).decisions).toHaveLength(1);
  });

  it('messages without string content are neither sources nor rewritten; tool-call messages are sources only', () => {
    const a = file(8).join('\n');
    const input = [msg('parts', [{ type: 'text', text: a }]), msg('calls', a, { tool_calls: [{ id: 'c' }] }), msg('m', `${a}\nend`)];
    const r = checkGuarantees(input);
    expect(blockDecisions(r).map((d) => [d.id, d.duplicateOfId])).toEqual([['m', 'calls']]);
  });

  it('short runs and runs whose reference would not be shorter stay verbatim', () => {
    const tiny = ['a', 'b', 'c', 'd', 'e'].join('\n');
    expect(blockDecisions(dedupeMessages([msg('x', tiny), msg('y', `${tiny}\nz`)], { keep: 'earliest', blocks: { minRunChars: 0 } }))).toEqual([]);
    const three = file(3).join('\n');
    expect(blockDecisions(dedupeMessages([msg('x', three), msg('y', `${three}\nz`)], BLOCKS))).toEqual([]);
    expect(
      blockDecisions(dedupeMessages([msg('x', three), msg('y', `${three}\nz`)], { keep: 'earliest', blocks: { minLines: 3, minRunChars: 0 } })),
    ).toHaveLength(1);
  });

  it('lookback bounds how far back a reference points', () => {
    const a = file(10).join('\n');
    const input = [msg('m0', a), msg('m1', 'x'), msg('m2', 'y'), msg('m3', `${a}\nz`)];
    expect(blockDecisions(dedupeMessages(input, { keep: 'earliest', blocks: { lookback: 2 } }))).toEqual([]);
    expect(blockDecisions(checkGuarantees(input, { keep: 'earliest', blocks: { lookback: 3 } }))).toHaveLength(1);
  });

  it('identity is UTF-16 code units: a lone surrogate never matches U+FFFD', () => {
    const lines = file(8);
    const a = lines.map((l) => `${l}\uD800`).join('\n');
    const b = lines.map((l) => `${l}\uFFFD`).join('\n');
    expect(blockDecisions(dedupeMessages([msg('a', a), msg('b', `${b}\nx`)], BLOCKS))).toEqual([]);
    expect(blockDecisions(checkGuarantees([msg('a', a), msg('b', `${a}\nx`)]))).toHaveLength(1);
    // \r stays part of its line.
    const crlf = lines.join('\r\n');
    expect(blockDecisions(dedupeMessages([msg('a', crlf), msg('b', `${lines.join('\n')}\nx`)], BLOCKS))).toEqual([]);
  });

  it('custom templates; a template the reader cannot follow is refused', () => {
    const a = file(10).join('\n');
    const r = checkGuarantees([msg('m0', a), msg('m1', `${a}\nend`)], {
      keep: 'earliest',
      blocks: { reference: '[ctxdedup: see {target} {from}-{to}]' },
    });
    expect(r.messages[1]?.content).toBe('[ctxdedup: see m0 1-10]\nend');
    for (const [reference, problem] of [
      ['see {target}', /must contain \{from\}/],
      ['{target} {from} {to}\nsecond line', /one line/],
      ['{target} {from} {to} {bogus}', /unknown field \{bogus\}/],
      ['{target} {from}-{to}, numbered {numberedFrom}-{numberedTo}', /only the numbered reference template/],
      [5, /must be a string/],
    ] as const) {
      const e = thrown(() => dedupeMessages([], { keep: 'earliest', blocks: { reference: reference as string } }));
      expect(e).toBeInstanceOf(TypeError);
      expect(e.message).toMatch(/options\.blocks\.reference/);
      expect(e.message).toMatch(problem);
    }
  });

  it('expandMessages gives back metadata of any shape, a key named ctxdedup included', () => {
    const a = file(10).join('\n');
    const shapes: unknown[] = [{ ctxdedup: 'mine', other: 1 }, null, ['a'], undefined, Object.assign(Object.create(null), { k: 1 }), new Map([[1, 2]])];
    for (const metadata of shapes) {
      for (const second of [`${a}\nplus`, a]) {
        const input = [msg('m0', a), msg('m1', second, { metadata: metadata as Message['metadata'] })];
        const r = dedupeMessages(input, BLOCKS);
        expect(r.decisions).toHaveLength(1);
        const expanded = expandMessages(r.messages);
        expect(expanded).toEqual(input);
        expect(Object.hasOwn(expanded[1] as Message, 'metadata')).toBe(true);
        expect((expanded[1] as Message).metadata).toBe(metadata);
        expect(restoreMessages(r.messages, r.verbatim)).toEqual(input);
      }
    }
    // A message the pass leaves alone keeps a `ctxdedup` key of the caller's that is no marker.
    for (const mine of ['mine', { note: 1 }, null]) {
      const input = [msg('m0', a, { metadata: { ctxdedup: mine } }), msg('m1', `${a}\nplus`)];
      expect(expandMessages(dedupeMessages(input, BLOCKS).messages)).toEqual(input);
    }
  });

  it("a message id '__proto__' keys the verbatim map as an own property", () => {
    const a = file(10).join('\n');
    const input = [msg('m0', a), msg('__proto__', `${a}\nend`)];
    const r = checkGuarantees(input);
    expect(Object.hasOwn(r.verbatim, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(r.verbatim)).toBe(Object.prototype);
    expect(restoreMessages(r.messages, r.verbatim)).toEqual(input);
  });

  it('async gives the same result as sync, on the worker path too', async () => {
    const big = file(4000).join('\n');
    const input = [msg('m0', big), msg('m1', `${big}\nmore`), msg('m2', file(30, 'other').join('\n'))];
    const sync = dedupeMessages(input, BLOCKS);
    expect(await dedupeMessagesAsync(input, BLOCKS)).toEqual(sync);
    expect(blockDecisions(sync)).toHaveLength(1);
  });

  it('async: changing ids and contents after the call changes nothing, inline and on the worker path', async () => {
    for (const lines of [10, 4000]) {
      const a = file(lines).join('\n');
      const input = () => [msg('m0', a), msg('m1', `HEAD\n${a}\nTAIL`)];
      const expected = dedupeMessages(input(), BLOCKS);
      const live = input();
      const pending = dedupeMessagesAsync(live, BLOCKS);
      (live[1] as Message).content = `replaced by the caller after the call ${'#'.repeat(300)}`;
      (live[0] as Message).id = 'renamed';
      (live[1] as Message).id = 'renamed too';
      const r = await pending;
      expect(r.messages.map((m) => m.content)).toEqual(expected.messages.map((m) => m.content));
      // The rewritten message carries the id the pass read (its decision and verbatim key agree).
      expect(r.messages[1]?.id).toBe('m1');
      expect(r.decisions).toEqual(expected.decisions);
      expect(Object.keys(r.verbatim)).toEqual(['m1']);
    }
  });
});

describe('block dedup: bad options', () => {
  it('requires keep: earliest, no near, no recency window, and says why', () => {
    let e = thrown(() => dedupeMessages([], { blocks: true }));
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/options\.blocks requires options\.keep: 'earliest'/);
    e = thrown(() => dedupeMessages([], { keep: 'earliest', blocks: true, near: true }));
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/options\.blocks cannot be combined with options\.near/);
    e = thrown(() => dedupeMessages([], { keep: 'earliest', blocks: true, recencyWindow: 2 }));
    expect(e).toBeInstanceOf(RangeError);
  });

  it('names the offending block option', () => {
    const bad: [unknown, RegExp][] = [
      [{ minLines: 0 }, /options\.blocks\.minLines/],
      [{ minLines: 1.5 }, /options\.blocks\.minLines/],
      [{ minRunChars: -1 }, /options\.blocks\.minRunChars/],
      [{ lookback: Number.NaN }, /options\.blocks\.lookback/],
      [{ lineNumbers: 'on' }, /options\.blocks\.lineNumbers/],
      ['yes', /options\.blocks/],
    ];
    for (const [blocks, path] of bad) {
      const e = thrown(() => dedupeMessages([], { keep: 'earliest', blocks: blocks as boolean }));
      expect(e.message).toMatch(path);
      expect(e instanceof TypeError || e instanceof RangeError).toBe(true);
    }
  });

  it('expandMessages names what it cannot follow', () => {
    const a = file(10).join('\n');
    const r = dedupeMessages([msg('m0', a), msg('m1', `${a}\nend`)], BLOCKS);
    const e = thrown(() => expandMessages([r.messages[1] as Message]));
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toMatch(/messages\[0\]\.metadata\.ctxdedup\.references .* names "m0", which is not in messages/);
    const long = file(30).join('\n');
    const fuzzy = dedupeMessages([msg('a', long), msg('b', long.replace('value3 ', 'valueX '))], { near: true, keep: 'earliest' });
    expect(fuzzy.stats.nearDuplicates).toBe(1);
    expect(thrown(() => expandMessages(fuzzy.messages)).message).toMatch(/lossy/);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const LINES = [
  '  return compute(value, options); // the shared line',
  '  if (!ok) throw new Error("failed to read the configuration file");',
  '',
  '}',
  'export function handler(request, response) {',
  '\t- item with a tab and some more text for length',
  'x\r',
  'é \uD83D\uDE00 emoji and accents, ñ, ü, 😀',
];

const message = fc
  .array(
    fc.oneof(
      fc.constantFrom(...LINES),
      fc.nat(40).map((n) => `${String(n + 1).padStart(6)}\t${LINES[n % LINES.length]}`),
      fc.nat(40).map((n) => `${n + 1}→${LINES[(n + 3) % LINES.length]}`),
      fc.string({ maxLength: 12 }),
    ),
    { maxLength: 24 },
  )
  .map((lines) => lines.join('\n'));

const conversation = fc.array(
  fc.record({
    role: fc.constantFrom('user', 'assistant', 'tool', 'system'),
    content: fc.oneof({ weight: 9, arbitrary: message }, { weight: 1, arbitrary: fc.constant([{ type: 'text', text: 'x' }]) }),
  }),
  { maxLength: 8 },
);

const blockOptions = fc.record({
  minLines: fc.integer({ min: 1, max: 5 }),
  minRunChars: fc.integer({ min: 0, max: 120 }),
  lineNumbers: fc.constantFrom('auto', 'off') as fc.Arbitrary<'auto' | 'off'>,
});

function withIds(c: { role: string; content: unknown }[], prefix = 'm'): Message[] {
  return c.map((m, i) => ({ id: `${prefix}${i}`, ...m }));
}

describe('block dedup: guarantees (properties)', () => {
  it('lossless (restore and expand), visible targets, net positive, no false positives', () => {
    fc.assert(
      fc.property(conversation, blockOptions, fc.integer({ min: 0, max: 200 }), (c, blocks, minChars) => {
        checkGuarantees(withIds(c), { keep: 'earliest', blocks, minChars });
      }),
      { numRuns: 300 },
    );
  });

  it('prefix-monotonic: the output for x ++ y begins with exactly the output for x', () => {
    fc.assert(
      fc.property(conversation, conversation, blockOptions, (x, y, blocks) => {
        const xs = withIds(x);
        const all = [...xs, ...withIds(y, 'n')];
        const options: DedupeMessagesOptions = { keep: 'earliest', blocks, minChars: 0 };
        const short = dedupeMessages(xs, options);
        const long = dedupeMessages(all, options);
        expect(long.messages.slice(0, xs.length)).toEqual(short.messages);
        expect(JSON.stringify(long.messages.slice(0, xs.length))).toBe(JSON.stringify(short.messages));
      }),
      { numRuns: 200 },
    );
  });
});

describe('block dedup: adversarial input stays bounded', () => {
  it('200k copies of one line', () => {
    const line = 'the very same line, again and again';
    const input = [msg('a', Array.from({ length: 200_000 }, () => line).join('\n'))];
    const r = dedupeMessages(input, BLOCKS);
    expect((r.messages[0]?.content as string).length).toBeLessThan((input[0]?.content as string).length / 4);
    expect(expandMessages(r.messages)).toEqual(input);
  });

  it('20k messages sharing their lines', () => {
    const body = file(12).join('\n');
    const input = Array.from({ length: 20_000 }, (_, i) => msg(`m${i}`, `${body}\nrequest ${i}`));
    const r = dedupeMessages(input, BLOCKS);
    expect(r.stats.blockReferences).toBe(19_999);
    expect(expandMessages(r.messages)).toEqual(input);
  });

  /**
   * An output from an untrusted source can name one long span many times: 8,000 references to
   * all 8,000 lines of one message (a 0.5 MB output) claim 375M characters. expandMessages
   * refuses past `maxChars` (2^28 by default) before building them; it used to build them all.
   */
  it('expandMessages stops at maxChars on a crafted output', () => {
    const crafted = (n: number): Message[] => {
      const target = msg('t', Array.from({ length: n }, (_, i) => `l${i}`).join('\n'));
      const references = Array.from({ length: n }, (_, r) => ({ line: r, lines: n, target: 't', from: 1 }));
      const content = Array.from({ length: n }, () => '[ref]').join('\n');
      return [target, msg('x', content, { metadata: { ctxdedup: { kind: 'blocks', references } } })];
    };
    const small = crafted(100);
    const span = (small[0]?.content as string).length;
    // 100 references of `span` characters, and the 99 line breaks between them.
    const expanded = expandMessages(small, { maxChars: 100 * span });
    expect((expanded[1]?.content as string).length).toBe(100 * span + 99);
    const e = thrown(() => expandMessages(small, { maxChars: 100 * span - 1 }));
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toMatch(/messages\[1\]\.metadata\.ctxdedup\.references \(line 99\) expands past maxChars \(\d+ characters/);
    expect(DEFAULT_EXPAND_MAX_CHARS).toBe(2 ** 28);
    expect(thrown(() => expandMessages(crafted(8000)))).toBeInstanceOf(RangeError);
  });

  /**
   * A numbered reference is charged what it really builds: its marker's own `width`, `separator`
   * and `first` size every prefix, so a crafted marker cannot slip past maxChars (a width of 2^22
   * on 64 lines used to exhaust the heap under the default), and a genuine output expands with
   * maxChars set to exactly what its references build (each numbered line used to be charged 26).
   */
  it('expandMessages charges numbered references exactly', () => {
    const file = (from: number): string =>
      Array.from({ length: 40 }, (_, i) => `${String(i + from).padStart(6, ' ')}\tconst value${i} = compute(${i});`).join('\n');
    const input = [msg('read1', file(1)), msg('read2', `header\n${file(101)}\nfooter`)];
    const out = dedupeMessages(input, BLOCKS);
    const refs = blockDecisions(out);
    expect(refs.map((d) => d.numbered !== undefined)).toEqual([true]);
    const built = refs.reduce((n, d) => n + d.charsBefore, 0);
    expect(expandMessages(out.messages, { maxChars: built })).toEqual(input);
    expect(thrown(() => expandMessages(out.messages, { maxChars: built - 1 }))).toBeInstanceOf(RangeError);

    const target = msg('t', 'a\nb\nc\nd');
    const crafted = (numbered: unknown): Message[] => [
      target,
      msg('x', '[ref]', { metadata: { ctxdedup: { kind: 'blocks', references: [{ line: 0, lines: 4, target: 't', from: 1, numbered }] } } }),
    ];
    for (const numbered of [
      { first: 1, width: 2 ** 22, separator: ':' },
      { first: 1, width: 1, separator: 'S'.repeat(100_000) },
    ]) {
      expect(thrown(() => expandMessages(crafted(numbered), { maxChars: 1000 })).message).toMatch(/expands past maxChars/);
    }
    for (const numbered of [
      { first: 'F'.repeat(1000), width: 1, separator: ':' },
      { first: 1, width: -1, separator: ':' },
      { first: 1, width: 1, separator: 7 },
      null,
    ]) {
      const e = thrown(() => expandMessages(crafted(numbered)));
      expect(e.message).toMatch(/numbered/);
      expect(e instanceof TypeError || e instanceof RangeError).toBe(true);
    }
  });

  it('expandMessages checks its options', () => {
    const input = [msg('a', 'x')];
    expect(thrown(() => expandMessages(input, { maxChar: 5 } as never)).message).toMatch(/options\.maxChar is not an option here/);
    expect(thrown(() => expandMessages(input, { maxChars: -1 }))).toBeInstanceOf(RangeError);
    expect(thrown(() => expandMessages(input, { maxChars: '9' } as never))).toBeInstanceOf(TypeError);
    expect(expandMessages(input, { maxChars: 0 })).toEqual(input);
  });
});
