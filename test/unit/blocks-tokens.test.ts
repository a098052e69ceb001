/**
 * Block dedup's token figures (`tokensBefore` / `tokensSaved` of each block decision and
 * `stats.blockTokensSaved`) are counted on first read: the native pass counts a replaced run only
 * as far as its net-positive test needs. Every way of reading a result must see exactly the
 * figures of a full count: property access, JSON.stringify, spread, structuredClone, vitest's
 * toEqual / toStrictEqual and node's isDeepStrictEqual; assignment and freezing behave as on a
 * plain data property.
 */
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
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
    // Copy the data properties only: no lazy figure is read here.
    const plain: Record<string, unknown> = {};
    for (const [key, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(d))) plain[key] = 'value' in descriptor ? descriptor.value : undefined;
    if (d.kind !== 'block') return plain;
    const b = d as BlockDecision;
    const run = (input[b.index]?.content as string)
      .split('\n')
      .slice(b.lines.from - 1, b.lines.to)
      .join('\n');
    const k = seen.get(b.index) ?? 0;
    seen.set(b.index, k + 1);
    const out = (r.messages[b.index]?.content as string).split('\n');
    const refs = (r.messages[b.index]?.metadata?.['ctxdedup'] as { references: { line: number }[] }).references;
    const reference = out[refs[k]?.line as number] as string;
    plain['tokensBefore'] = countTokens(run);
    expect(plain['tokensAfter']).toBe(countTokens(reference));
    plain['tokensSaved'] = countTokens(run) - countTokens(reference);
    saved += plain['tokensSaved'] as number;
    return plain;
  });
  return { decisions, blockTokensSaved: saved };
}

describe('block dedup: token figures counted on first read', () => {
  const input = conversation();
  const want = expected(input);
  const fresh = (): ReturnType<typeof dedupeMessages> => dedupeMessages(input, BLOCKS);

  it('the conversation has block decisions of every kind, and the figures are not stored up front', () => {
    const r = fresh();
    const blocks = blockDecisions(r);
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    expect(blocks.some((d) => d.numbered !== undefined)).toBe(true);
    expect(blocks.some((d) => d.duplicateOfIndex === d.index)).toBe(true);
    for (const d of blocks) for (const key of LAZY) expect(Object.getOwnPropertyDescriptor(d, key)?.get).toBeTypeOf('function');
    expect(want.blockTokensSaved).toBeGreaterThan(0);
  });

  it('property reads give the full counts, and then the properties are plain data', () => {
    const r = fresh();
    const blocks = blockDecisions(r);
    const wanted = want.decisions.filter((d) => d['kind'] === 'block');
    // Read one decision first (the whole call is counted in one batch), then the totals.
    expect(blocks[2]?.tokensSaved).toBe(wanted[2]?.['tokensSaved']);
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    expect(r.stats.blockTokensSaved).toBe(blocks.reduce((s, d) => s + d.tokensSaved, 0));
    blocks.forEach((d, k) => {
      expect(d.tokensBefore).toBe(wanted[k]?.['tokensBefore']);
      expect(d.tokensBefore - d.tokensAfter).toBe(d.tokensSaved);
      for (const key of LAZY) {
        expect(Object.getOwnPropertyDescriptor(d, key)).toEqual({ value: wanted[k]?.[key], writable: true, enumerable: true, configurable: true });
      }
    });
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toEqual({
      value: want.blockTokensSaved,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  });

  it('the totals read first equal the sum of the decisions read afterwards', () => {
    const r = fresh();
    const total = r.stats.blockTokensSaved;
    expect(total).toBe(blockDecisions(r).reduce((s, d) => s + d.tokensSaved, 0));
  });

  it('JSON.stringify sees the figures, in the key order of a stored object', () => {
    const r = fresh();
    const json = JSON.parse(JSON.stringify({ decisions: r.decisions, stats: r.stats })) as {
      decisions: Record<string, unknown>[];
      stats: Record<string, unknown>;
    };
    expect(json.decisions).toStrictEqual(want.decisions);
    for (const [k, d] of json.decisions.entries()) expect(Object.keys(d)).toEqual(Object.keys(want.decisions[k] as object));
    expect(json.stats['blockTokensSaved']).toBe(want.blockTokensSaved);
    expect(Object.keys(json.stats)).toEqual(Object.keys(fresh().stats));
    // Byte for byte the serialization of plain objects holding the figures.
    expect(JSON.stringify(fresh().decisions)).toBe(JSON.stringify(want.decisions));
  });

  it('spread and Object.assign copy the figures', () => {
    const spread = fresh().decisions.map((d) => ({ ...d }));
    expect(spread).toStrictEqual(want.decisions);
    const assigned = fresh().decisions.map((d) => Object.assign({}, d));
    expect(assigned).toStrictEqual(want.decisions);
    expect({ ...fresh().stats }.blockTokensSaved).toBe(want.blockTokensSaved);
  });

  it('structuredClone copies the figures', () => {
    const r = fresh();
    const clone = structuredClone({ decisions: r.decisions, stats: r.stats });
    expect(clone.decisions).toStrictEqual(want.decisions);
    expect(clone.stats.blockTokensSaved).toBe(want.blockTokensSaved);
  });

  it("vitest's toEqual / toStrictEqual and node's isDeepStrictEqual compare the figures", () => {
    expect(fresh().decisions).toEqual(want.decisions);
    expect(fresh().decisions).toStrictEqual(want.decisions);
    expect(isDeepStrictEqual(fresh().decisions, want.decisions)).toBe(true);
    // A different figure is seen as different, whichever side is lazy.
    const wrong = want.decisions.map((d) => (d['kind'] === 'block' ? { ...d, tokensBefore: (d['tokensBefore'] as number) + 1 } : d));
    expect(isDeepStrictEqual(fresh().decisions, wrong)).toBe(false);
    expect(fresh().decisions).not.toEqual(wrong);
    // Two lazy results compare equal to each other, and to a fully read one.
    expect(isDeepStrictEqual(fresh(), fresh())).toBe(true);
    const read = fresh();
    JSON.stringify(read);
    expect(isDeepStrictEqual(fresh(), read)).toBe(true);
    expect(fresh()).toStrictEqual(read);
    const stats = fresh().stats;
    expect(isDeepStrictEqual(stats, { ...read.stats })).toBe(true);
  });

  it('assignment before the first read stores the value, as on a data property', () => {
    const r = fresh();
    const [d] = blockDecisions(r);
    if (d === undefined) throw new Error('no block decision');
    d.tokensSaved = -1;
    expect(d.tokensSaved).toBe(-1);
    expect(Object.getOwnPropertyDescriptor(d, 'tokensSaved')).toEqual({ value: -1, writable: true, enumerable: true, configurable: true });
    // The other figures and the totals do not depend on it.
    expect(d.tokensBefore).toBe(want.decisions.find((w) => w['kind'] === 'block')?.['tokensBefore']);
    expect(r.stats.blockTokensSaved).toBe(want.blockTokensSaved);
    r.stats.blockTokensSaved = 7;
    expect(r.stats.blockTokensSaved).toBe(7);
    // An object inheriting from a decision gets its own property on assignment; the decision keeps its figure.
    const [, e] = blockDecisions(fresh());
    if (e === undefined) throw new Error('no second block decision');
    const child = Object.create(e) as BlockDecision;
    child.tokensBefore = 0;
    expect(Object.hasOwn(child, 'tokensBefore')).toBe(true);
    expect(e.tokensBefore).toBe(want.decisions.filter((w) => w['kind'] === 'block')[1]?.['tokensBefore']);
    // Reading through an inheriting object gives the figure without adding an own property to it.
    const [f] = blockDecisions(fresh());
    const reader = Object.create(f as object) as BlockDecision;
    expect(reader.tokensSaved).toBe(want.decisions.find((w) => w['kind'] === 'block')?.['tokensSaved']);
    expect(Object.hasOwn(reader, 'tokensSaved')).toBe(false);
  });

  it('a decision frozen before its first read still reads the figures, and refuses assignment', () => {
    const [d] = blockDecisions(fresh());
    if (d === undefined) throw new Error('no block decision');
    Object.freeze(d);
    const w = want.decisions.find((x) => x['kind'] === 'block') as Record<string, unknown>;
    expect(d.tokensBefore).toBe(w['tokensBefore']);
    expect(d.tokensBefore).toBe(w['tokensBefore']);
    expect({ ...d }).toStrictEqual(w);
    expect(() => {
      d.tokensSaved = 1;
    }).toThrow(TypeError);
    expect(d.tokensSaved).toBe(w['tokensSaved']);
  });

  it('the figures count the run texts as they were at the call, whatever happens to the input later', () => {
    const mutable = conversation();
    const r = dedupeMessages(mutable, BLOCKS);
    for (const m of mutable) m.content = 'changed after the call';
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

  it('a result without block references has plain totals', () => {
    const r = dedupeMessages([{ id: 'a', content: 'x' }], BLOCKS);
    expect(Object.getOwnPropertyDescriptor(r.stats, 'blockTokensSaved')).toEqual({ value: 0, writable: true, enumerable: true, configurable: true });
  });
});
