/**
 * Block dedup's token figures (`tokensBefore` / `tokensSaved` of each block decision and
 * `stats.blockTokensSaved`) are counted on first read: the native pass counts a replaced run only
 * as far as its net-positive test needs, and a result's `decisions` and `stats.blockTokensSaved`
 * are built when first read (all runs counted in one batch). Every way of reading a result must
 * see exactly the figures of a full count: property access, JSON.stringify, spread,
 * structuredClone, vitest's toEqual / toStrictEqual and node's isDeepStrictEqual; assignment,
 * inheritance and freezing behave as on plain data properties.
 */
import { inspect, isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { blockTexts } from '../support/assertions.js';
import { dedupeMessagesCounted } from '../../src/stages/messages.js';
import { type BlockDecision, countTokens, type DedupeMessagesOptions, dedupeMessages, dedupeMessagesAsync, type Message } from '../../src/index.js';

const BLOCKS: DedupeMessagesOptions = { keep: 'earliest', blocks: true };

function file(n: number, tag: string): string[] {
  return Array.from({ length: n }, (_, i) => `  const value${i} = compute(${i}, "${tag}"); // step ${i} of the pipeline`);
}

/** A conversation with several block references: re-reads after edits, a numbered read, a repeat inside one message. */
function conversation(): Message[] {
  const a = file(30, 'a.ts');
  const edited = [...a];
  edited[12] = '  const value12 = changed(); // edited';
  const numbered = a.map((l, i) => `${String(i + 3).padStart(6)}\t${l}`).join('\n');
  const log = Array.from({ length: 8 }, (_, i) => `FAIL test/case_${i}.test.ts > handles input ${i} (expected 1, got 0)`).join('\n');
  return [
    { id: 's', role: 'system', content: 'You are a coding agent.' },
    { id: 'r1', role: 'tool', content: a.join('\n') },
    { id: 'r2', role: 'tool', content: edited.join('\n') },
    { id: 'r3', role: 'tool', content: `header\n${numbered}` },
    { id: 't', role: 'tool', content: `run 1\n${log}\nrun 2\n${log}` },
    { id: 'r4', role: 'tool', content: a.join('\n') },
  ];
}

const LAZY = ['tokensBefore', 'tokensSaved'] as const;

function blockDecisions(r: { decisions: readonly { kind: string }[] }): BlockDecision[] {
  return r.decisions.filter((d): d is BlockDecision => d.kind === 'block');
}

/** The expected figures, counted independently: each run's text and each reference line with countTokens. */
function expected(input: Message[]): { decisions: Record<string, unknown>[]; blockTokensSaved: number } {
  const r = dedupeMessages(input, BLOCKS);
  const seen = new Map<number, number>();
  let saved = 0;
  const decisions = r.decisions.map((d) => {
    const plain: Record<string, unknown> = { ...d };
    if (d.kind !== 'block') return plain;
    const b = d as BlockDecision;
    const k = seen.get(b.index) ?? 0;
    seen.set(b.index, k + 1);
    const { run, reference = '' } = blockTexts(input, r.messages, b, k);
    expect(plain['tokensBefore']).toBe(countTokens(run));
    expect(plain['tokensAfter']).toBe(countTokens(reference));
    expect(plain['tokensSaved']).toBe(countTokens(run) - countTokens(reference));
    saved += plain['tokensSaved'] as number;
    return plain;
  });
  return { decisions, blockTokensSaved: saved };
}

const DATA = { writable: true, enumerable: true, configurable: true };

describe('block dedup: token figures counted on first read', () => {
  const input = conversation();
  const want = expected(input);
  const fresh = (): ReturnType<typeof dedupeMessages> => dedupeMessages(input, BLOCKS);
  const wantBlocks = want.decisions.filter((d) => d['kind'] === 'block');

  it('the conversation has block decisions of every kind, and the figures are not stored up front', () => {
    const blocks = wantBlocks as unknown as BlockDecision[];
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    expect(blocks.some((d) => d.numbered !== undefined)).toBe(true);
    expect(blocks.some((d) => d.duplicateOfIndex === d.index)).toBe(true);
    expect(want.decisions.some((d) => d['kind'] === 'exact')).toBe(true);
    expect(want.blockTokensSaved).toBeGreaterThan(0);
    const r = fresh();
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')?.get).toBeTypeOf('function');
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')?.get).toBeTypeOf('function');
  });

  it('property reads give the full counts, and then the properties are plain data', () => {
    const r = fresh();
    // The totals first (the whole call is counted in one batch), then the decisions.
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toEqual({ value: want.blockTokensSaved, ...DATA });
    const decisions = r.decisions;
    expect(decisions).toStrictEqual(want.decisions);
    expect(r.decisions).toBe(decisions);
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')).toEqual({ value: decisions, ...DATA });
    expect(r.stats.blockTokensSaved).toBe(blockDecisions(r).reduce((s, d) => s + d.tokensSaved, 0));
    for (const d of blockDecisions(r)) {
      expect(d.tokensBefore - d.tokensAfter).toBe(d.tokensSaved);
      for (const key of LAZY) expect(Object.getOwnPropertyDescriptor(d, key)).toEqual({ value: d[key], ...DATA });
    }
  });

  it('the decisions read first, then the totals', () => {
    const r = fresh();
    expect(blockDecisions(r).map((d) => d.tokensSaved)).toEqual(wantBlocks.map((d) => d['tokensSaved']));
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
  });

  it('JSON.stringify sees the figures, in the key order of stored objects', () => {
    const plain = fresh();
    const json = JSON.stringify(fresh());
    expect(json).toBe(JSON.stringify({ messages: plain.messages, verbatim: plain.verbatim, decisions: want.decisions, stats: { ...plain.stats } }));
    expect(Object.keys(JSON.parse(json) as object)).toEqual(['messages', 'verbatim', 'decisions', 'stats']);
    expect(JSON.stringify(fresh().stats)).toBe(JSON.stringify({ ...fresh().stats }));
    expect((JSON.parse(JSON.stringify(fresh().stats)) as { blockTokensSaved: number }).blockTokensSaved).toBe(want.blockTokensSaved);
  });

  it('spread and Object.assign copy the figures', () => {
    const spread = { ...fresh() };
    expect(Object.getOwnPropertyDescriptor(spread, 'decisions')).toEqual({ value: spread.decisions, ...DATA });
    expect(spread.decisions).toStrictEqual(want.decisions);
    expect(Object.assign({}, fresh()).decisions).toStrictEqual(want.decisions);
    const stats = { ...fresh().stats };
    expect(Object.getOwnPropertyDescriptor(stats, 'blockTokensSaved')).toEqual({ value: want.blockTokensSaved, ...DATA });
    expect(Object.keys(stats)).toEqual(Object.keys(dedupeMessages(input, { keep: 'earliest' }).stats));
  });

  it('structuredClone copies the figures', () => {
    const clone = structuredClone(fresh());
    expect(clone.decisions).toStrictEqual(want.decisions);
    expect(clone.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    expect(Object.keys(clone)).toEqual(['messages', 'verbatim', 'decisions', 'stats']);
  });

  it("vitest's toEqual / toStrictEqual and node's isDeepStrictEqual compare the figures", () => {
    const plain = fresh();
    const stored = { messages: plain.messages, verbatim: plain.verbatim, decisions: want.decisions, stats: { ...plain.stats } };
    expect(fresh()).toEqual(stored);
    expect(fresh()).toStrictEqual(stored);
    expect(isDeepStrictEqual(fresh(), stored)).toBe(true);
    expect(isDeepStrictEqual(stored, fresh())).toBe(true);
    // A different figure is seen as different, whichever side is lazy.
    const wrong = want.decisions.map((d) => (d['kind'] === 'block' ? { ...d, tokensBefore: (d['tokensBefore'] as number) + 1 } : d));
    expect(isDeepStrictEqual(fresh(), { ...stored, decisions: wrong })).toBe(false);
    expect(fresh()).not.toEqual({ ...stored, decisions: wrong });
    expect(isDeepStrictEqual(fresh().stats, { ...stored.stats, blockTokensSaved: want.blockTokensSaved + 1 })).toBe(false);
    // Two lazy results compare equal to each other, and to a fully read one.
    expect(isDeepStrictEqual(fresh(), fresh())).toBe(true);
    expect(fresh()).toStrictEqual(fresh());
  });

  it('assignment before the first read stores the value, as on a data property', () => {
    const r = fresh();
    r.decisions = [];
    expect(r.decisions).toEqual([]);
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')).toEqual({ value: [], ...DATA });
    r.stats.blockTokensSaved = 7;
    expect(r.stats.blockTokensSaved).toBe(7);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toEqual({ value: 7, ...DATA });
    // An object inheriting from a result gets its own property on assignment; the result keeps its value.
    const base = fresh();
    const child = Object.create(base) as typeof base;
    child.decisions = [];
    expect(Object.hasOwn(child, 'decisions')).toBe(true);
    expect(base.decisions).toStrictEqual(want.decisions);
    // Reading through an inheriting object gives the value without adding an own property to it.
    const other = fresh();
    const reader = Object.create(other) as typeof other;
    expect(reader.decisions).toStrictEqual(want.decisions);
    expect(Object.hasOwn(reader, 'decisions')).toBe(false);
    expect(Object.getOwnPropertyDescriptor(other, 'decisions')).toEqual({ value: reader.decisions, ...DATA });
  });

  it('a result frozen before its first read still reads the same values, and refuses assignment', () => {
    const r = fresh();
    Object.freeze(r);
    Object.freeze(r.stats);
    const decisions = r.decisions;
    expect(decisions).toStrictEqual(want.decisions);
    expect(r.decisions).toBe(decisions);
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    expect({ ...r }.decisions).toBe(decisions);
    expect(() => {
      r.decisions = [];
    }).toThrow(TypeError);
    expect(() => {
      r.stats.blockTokensSaved = 1;
    }).toThrow(TypeError);
    expect(r.decisions).toBe(decisions);
  });

  it('the figures and ids are those of the call, whatever happens to the input later', () => {
    const mutable = conversation();
    const r = dedupeMessages(mutable, BLOCKS);
    for (const m of mutable) {
      m.id = `changed ${m.id}`;
      m.content = 'changed after the call';
    }
    mutable.length = 0;
    expect(r.decisions).toStrictEqual(want.decisions);
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
  });

  it('dedupeMessagesAsync reads the same figures, inline and on the worker path', async () => {
    expect(await dedupeMessagesAsync(input, BLOCKS)).toStrictEqual(fresh());
    const big = file(6000, 'big.ts').join('\n');
    const large = [...input, { id: 'b1', role: 'tool', content: big }, { id: 'b2', role: 'tool', content: `${big}\nmore` }];
    const async = await dedupeMessagesAsync(large, BLOCKS);
    const last = blockDecisions(async).at(-1) as BlockDecision;
    expect(last.id).toBe('b2');
    expect(last.tokensBefore).toBe(countTokens(big));
    expect(async).toStrictEqual(dedupeMessages(large, BLOCKS));
  });

  it('dedupeMessagesAsync off the JS thread counts there: reading its figures never counts on the event loop', async () => {
    const big = file(6000, 'big.ts').join('\n');
    const large = [...input, { id: 'b1', role: 'tool', content: big }, { id: 'b2', role: 'tool', content: `${big}\nmore` }];
    const r = await dedupeMessagesAsync(large, BLOCKS);
    // Plain data from the start: the counts came back with the references.
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')).toMatchObject(DATA);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toMatchObject(DATA);
    // r4 is a whole duplicate: its tokens were counted there too.
    expect(Object.getOwnPropertyDescriptor(r.stats, 'tokensSaved')).toMatchObject(DATA);
    expect(r).toStrictEqual(dedupeMessages(large, BLOCKS));
  });

  it('counted in the pass (the CLI reads every decision): the same result, stored from the start', () => {
    const r = dedupeMessagesCounted(input, BLOCKS, true);
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')).toMatchObject(DATA);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toMatchObject(DATA);
    expect(r).toStrictEqual(fresh());
  });

  it('util.inspect (console.log) shows the values, not accessors, frozen or not', () => {
    const plain = inspect(JSON.parse(JSON.stringify(fresh())), { depth: 6 });
    const r = fresh();
    expect(inspect(r.stats)).not.toContain('Getter');
    expect(inspect(r, { depth: 6 })).toBe(plain);
    // Shown once more, now settled, the same.
    expect(inspect(r, { depth: 6 })).toBe(plain);
    const frozen = fresh();
    Object.freeze(frozen);
    Object.freeze(frozen.stats);
    expect(inspect(frozen, { depth: 6 })).toBe(plain);
    // The hook is not a visible property.
    expect(Object.keys(r)).toEqual(['messages', 'verbatim', 'decisions', 'stats']);
    expect(isDeepStrictEqual(fresh(), JSON.parse(JSON.stringify(fresh())))).toBe(true);
  });

  it("stats.tokensSaved is the call's o200k saving: the messages replaced whole plus blockTokensSaved", () => {
    const r = fresh();
    expect(Object.getOwnPropertyDescriptor(r.stats, 'tokensSaved')?.get).toBeTypeOf('function');
    const whole = r.decisions.filter((d) => d.kind !== 'block');
    expect(whole.map((d) => d.id)).toEqual(['r4']);
    const text = (m: { content?: unknown } | undefined): string => m?.content as string;
    const wholeSaved = whole.reduce((sum, d) => sum + countTokens(text(input[d.index])) - countTokens(text(r.messages[d.index])), 0);
    expect(r.stats.tokensSaved).toBe(wholeSaved + r.stats.blockTokensSaved);
    // Not an estimate below one of its parts (it was charsSaved / 4).
    expect(r.stats.tokensSaved).toBeGreaterThan(r.stats.blockTokensSaved);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'tokensSaved')).toEqual({ value: r.stats.tokensSaved, ...DATA });
  });

  it('a result without block references is stored as before', () => {
    const r = dedupeMessages([{ id: 'a', content: 'x' }], BLOCKS);
    expect(Object.getOwnPropertyDescriptor(r, 'decisions')).toEqual({ value: [], ...DATA });
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toEqual({ value: 0, ...DATA });
  });
});
