import { createHash } from 'node:crypto';
import { readFileSync, existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  HASHED_EMBEDDING_THRESHOLDS,
  InMemoryStore,
  MemoryDeduplicator,
  SIMILARITY_TOLERANCE,
  SqliteMemoryStore,
  buildMergePrompt,
  hashedEmbedding,
  openMemoryStore,
  type EmbedFunction,
  type Memory,
  type MemoryDedupEvent,
  type MemoryStore,
  type MergeFunction,
  type StoredMemory,
} from '../../src/memory/index.js';
import { tempFiles } from '../support/ingest-services.js';
import { cosine, describeMemoryStoreContract, expectPathError } from '../support/memory-store-contract.js';

const tempDb = tempFiles('ctxdedup-memory-', 'memories.db');

describeMemoryStoreContract('InMemoryStore', async () => new InMemoryStore());
describeMemoryStoreContract('SqliteMemoryStore', async () => new SqliteMemoryStore(tempDb()));

/**
 * Embeds each text as the vector its first word names, so tests pick exact similarities.
 * Pythagorean vectors give exact cosines: cos(a, b) = 24/25 = 0.96, cos(a, c) = 0.8.
 */
const VECTORS: Record<string, number[]> = {
  a: [3, 4, 0],
  b: [4, 3, 0],
  c: [0, 5, 0],
  d: [0, 0, 1],
  e: [5, 12, 0],
  f: [12, 5, 0],
};
const tableEmbed: EmbedFunction = async (texts) =>
  texts.map((t) => {
    const v = VECTORS[t.split(' ')[0]!];
    if (v === undefined) throw new Error(`no test vector for ${t}`);
    return v;
  });

function events(): { log: MemoryDedupEvent[]; logger: (e: MemoryDedupEvent, level: 'info' | 'warn') => void; levels: string[] } {
  const log: MemoryDedupEvent[] = [];
  const levels: string[] = [];
  return { log, levels, logger: (e, level) => (log.push(e), levels.push(level)) };
}

async function contents(store: MemoryStore): Promise<string[]> {
  return (await store.list()).map((m) => m.content).sort();
}

const concat: MergeFunction = async (_older, _newer, { memories }) => memories.map((m) => m.content).join(' + ');

describe('MemoryDeduplicator options', () => {
  it('validates thresholds', () => {
    const store = new InMemoryStore();
    expect(() => new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.8, lowerThreshold: 0.9 })).toThrow(RangeError);
    expect(() => new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 1.01 })).toThrow(/upperThreshold must be in \[0, 1\]/);
    expect(() => new MemoryDeduplicator({ store, embed: tableEmbed, lowerThreshold: -0.1 })).toThrow(RangeError);
    expect(() => new MemoryDeduplicator({ store, embed: tableEmbed, lowerThreshold: Number.NaN })).toThrow(RangeError);
    expect(() => new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: '0.9' as unknown as number })).toThrow(TypeError);
    expect(() => new MemoryDeduplicator({ store: {} as MemoryStore, embed: tableEmbed })).toThrow(/options.store.add must be a function/);
    expect(() => new MemoryDeduplicator({ store, embed: 'x' as unknown as EmbedFunction })).toThrow(TypeError);
    const equal = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.5, lowerThreshold: 0.5 });
    expect([equal.lowerThreshold, equal.upperThreshold]).toEqual([0.5, 0.5]);
    const defaults = new MemoryDeduplicator({ store, embed: tableEmbed });
    expect([defaults.lowerThreshold, defaults.upperThreshold]).toEqual([0.9, 0.95]);
    const hashed = new MemoryDeduplicator({ store });
    expect([hashed.lowerThreshold, hashed.upperThreshold]).toEqual([HASHED_EMBEDDING_THRESHOLDS.lower, HASHED_EMBEDDING_THRESHOLDS.upper]);
  });

  it('rejects bad memories before writing anything', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed });
    await expect(
      dedup.addBatch([
        { id: 'x', content: 'a' },
        { id: '', content: 'b' },
      ]),
    ).rejects.toThrow('memories[1].id must not be empty');
    await expect(
      dedup.addBatch([
        { id: 'x', content: 'a' },
        { id: 'x', content: 'b' },
      ]),
    ).rejects.toThrow(/memories\[1\].id repeats "x"/);
    await expect(dedup.checkAndMerge({ id: 'x', content: 3 } as unknown as Memory)).rejects.toThrow('memories[0].content must be a string, got a number');
    await expect(dedup.checkAndMerge({ id: 'x', content: 'a', timestamp: Number.NaN })).rejects.toThrow(RangeError);
    await expect(dedup.checkAndMerge({ id: 'x', content: 'a \uD800' })).rejects.toThrow(
      new TypeError('memories[0].content contains a lone surrogate (it has no UTF-8 encoding, so a store cannot keep it exactly)'),
    );
    await expect(
      dedup.addBatch([
        { id: 'x', content: 'a' },
        { id: 'y\uDC00', content: 'b' },
      ]),
    ).rejects.toThrow(/^memories\[1\]\.id contains a lone surrogate/);
    await expect(dedup.checkAndMerge({ id: 'x', content: 'a', metadata: [] as unknown as Record<string, unknown> })).rejects.toThrow(TypeError);
    expect(await store.list()).toEqual([]);
  });

  it('rejects bad embeddings before writing anything', async () => {
    const store = new InMemoryStore();
    const bad =
      (result: unknown): EmbedFunction =>
      async () =>
        result as number[][];
    const memory = { id: 'x', content: 'a' };
    await expect(new MemoryDeduplicator({ store, embed: bad([]) }).checkAndMerge(memory)).rejects.toThrow('has 0 vectors for 1 texts');
    await expect(new MemoryDeduplicator({ store, embed: bad([[1, Number.NaN]]) }).checkAndMerge(memory)).rejects.toThrow('embed() result[0][1]');
    await expect(new MemoryDeduplicator({ store, embed: bad([[1e39]]) }).checkAndMerge(memory)).rejects.toThrow(/finite float32/);
    await expect(new MemoryDeduplicator({ store, embed: bad(['x']) }).checkAndMerge(memory)).rejects.toThrow(TypeError);
    const failing: EmbedFunction = async () => {
      throw new Error('embedding service down');
    };
    await expect(new MemoryDeduplicator({ store, embed: failing }).checkAndMerge(memory)).rejects.toThrow('embedding service down');
    expect(await store.list()).toEqual([]);
  });
});

describe('checkAndMerge thresholds', () => {
  // cos(a, b) is exactly 0.96.
  async function decide(upperThreshold: number, lowerThreshold: number, merge?: MergeFunction) {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold, lowerThreshold, ...(merge ? { merge } : {}) });
    await dedup.checkAndMerge({ id: 'old', content: 'a old', timestamp: 1 });
    const result = await dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 });
    return { result, store, dedup };
  }

  it('replaces at exactly the upper bound', async () => {
    const { result, store } = await decide(0.96, 0.9, concat);
    expect(result).toMatchObject({ decision: 'replace', similarity: 0.96, closestId: 'old', replaced: ['old'] });
    expect(await contents(store)).toEqual(['b new']);
  });

  it('merges below the upper bound by more than SIMILARITY_TOLERANCE', async () => {
    const { result, store } = await decide(0.96 + 2 * SIMILARITY_TOLERANCE, 0.9, concat);
    expect(result).toMatchObject({ decision: 'merge', similarity: 0.96, replaced: ['old'] });
    expect(result.stored).toEqual({ id: 'new', content: 'a old + b new', timestamp: 2 });
    expect(await contents(store)).toEqual(['a old + b new']);
  });

  it('merges at exactly the lower bound (inclusive)', async () => {
    const { result } = await decide(0.99, 0.96, concat);
    expect(result.decision).toBe('merge');
  });

  it('counts a similarity within SIMILARITY_TOLERANCE of a bound as reaching it', async () => {
    expect(SIMILARITY_TOLERANCE).toBe(1e-6);
    expect((await decide(0.99, 0.96 + SIMILARITY_TOLERANCE / 2, concat)).result.decision).toBe('merge');
    expect((await decide(0.96 + SIMILARITY_TOLERANCE / 2, 0.9, concat)).result.decision).toBe('replace');
  });

  it('inserts below the lower bound by more than SIMILARITY_TOLERANCE', async () => {
    const { result, store } = await decide(0.99, 0.96 + 2 * SIMILARITY_TOLERANCE, concat);
    expect(result).toMatchObject({ decision: 'insert', similarity: 0.96, replaced: [] });
    expect(await contents(store)).toEqual(['a old', 'b new']);
  });

  it('keeps both between the bounds when there is no merge function', async () => {
    const { result, store } = await decide(0.99, 0.9);
    expect(result.decision).toBe('insert');
    expect(result.reason).toMatch(/no merge function/);
    expect(await contents(store)).toEqual(['a old', 'b new']);
  });

  it('inserts everything when disabled', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, enabled: false });
    await dedup.addBatch([
      { id: '1', content: 'a' },
      { id: '2', content: 'a' },
    ]);
    expect(await contents(store)).toEqual(['a', 'a']);
  });
});

describe('checkAndMerge behaviour', () => {
  it('merge gets older, newer and a prompt; the result carries the newest metadata and max intensity', async () => {
    const store = new InMemoryStore();
    const calls: Parameters<MergeFunction>[] = [];
    const merge: MergeFunction = async (...args) => {
      calls.push(args);
      return { content: 'a merged fact' };
    };
    const { log, logger } = events();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, merge, logger, upperThreshold: 0.99, lowerThreshold: 0.9 });
    await dedup.checkAndMerge({ id: 'old', content: 'a old', timestamp: 1000, metadata: { speaker: 'ann', intensity: 7, topic: 'x' } });
    const result = await dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2000, metadata: { speaker: 'bob', intensity: 3 } });
    expect(calls).toHaveLength(1);
    const [older, newer, context] = calls[0]!;
    expect(older.id).toBe('old');
    expect(newer.id).toBe('new');
    expect(context.memories.map((m) => m.id)).toEqual(['old', 'new']);
    expect(context.prompt).toBe(buildMergePrompt([older, newer]));
    expect(result.stored).toEqual({ id: 'new', content: 'a merged fact', timestamp: 2000, metadata: { speaker: 'bob', intensity: 7 } });
    const stored = await store.get('new');
    // The merged text is embedded again (as vector a, by its first word).
    expect(stored?.content).toBe('a merged fact');
    expect(stored?.embedding).toEqual(Float32Array.from(VECTORS['a']!));
    expect(log.map((e) => e.event)).toEqual(['dedup_check', 'dedup_check', 'dedup_merge']);
    expect(log[2]).toEqual({ event: 'dedup_merge', ids: ['old', 'new'], count: 2, resultId: 'new' });
  });

  it('an incoming memory older than its stored duplicate does not replace it', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95 });
    await dedup.checkAndMerge({ id: 'late', content: 'a late', timestamp: 5 });
    const result = await dedup.checkAndMerge({ id: 'backfill', content: 'b early', timestamp: 1 });
    expect(result).toMatchObject({ decision: 'replace', replaced: [], stored: { id: 'late' } });
    expect(await contents(store)).toEqual(['a late']);
    const history = await dedup.history();
    expect(history.map((e) => [e.memory.id, e.replacedBy, e.action])).toEqual([['backfill', 'late', 'replaced']]);
  });

  it('addBatch compares new memories with each other', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95 });
    const results = await dedup.addBatch([
      { id: '1', content: 'a first', timestamp: 1 },
      { id: '2', content: 'd other', timestamp: 2 },
      { id: '3', content: 'b again', timestamp: 3 },
    ]);
    expect(results.map((r) => r.decision)).toEqual(['insert', 'insert', 'replace']);
    expect(results[2]).toMatchObject({ closestId: '1', replaced: ['1'] });
    expect(await contents(store)).toEqual(['b again', 'd other']);
  });

  it('accepts a logger object (info/warn)', async () => {
    const seen: string[] = [];
    const logger = { info: (e: MemoryDedupEvent) => seen.push(`info:${e.event}`), warn: (e: MemoryDedupEvent) => seen.push(`warn:${e.event}`) };
    const dedup = new MemoryDeduplicator({ store: new InMemoryStore(), embed: tableEmbed, logger });
    await dedup.checkAndMerge({ id: '1', content: 'a' });
    expect(seen).toEqual(['info:dedup_check']);
    expect(() => new MemoryDeduplicator({ store: new InMemoryStore(), logger: {} as never })).toThrow(/logger/);
  });

  it('works end to end with the built-in hashed embedding', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, merge: concat });
    const r1 = await dedup.checkAndMerge({ id: '1', content: 'Alice is allergic to peanuts.', timestamp: 1 });
    const r2 = await dedup.checkAndMerge({ id: '2', content: 'alice is allergic to peanuts', timestamp: 2 });
    const r3 = await dedup.checkAndMerge({ id: '3', content: 'The deployment runs every Friday night.', timestamp: 3 });
    expect([r1.decision, r2.decision, r3.decision]).toEqual(['insert', 'replace', 'insert']);
    expect(await contents(store)).toEqual(['The deployment runs every Friday night.', 'alice is allergic to peanuts']);
  });
});

/** Wraps a store so chosen methods fail. */
function failing(store: MemoryStore, fail: Partial<Record<'add' | 'update' | 'delete' | 'nearest' | 'list', Error>>): MemoryStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      const error = fail[key as keyof typeof fail];
      if (error) return async () => Promise.reject(error);
      const value = Reflect.get(target, key, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('never loses a memory', () => {
  it('a failing store query inserts anyway (fail open) and warns', async () => {
    const inner = new InMemoryStore();
    await inner.add({ id: 'old', content: 'a old', embedding: Float32Array.from(VECTORS['a']!) });
    const { log, levels, logger } = events();
    const dedup = new MemoryDeduplicator({ store: failing(inner, { nearest: new Error('index offline') }), embed: tableEmbed, logger });
    const result = await dedup.checkAndMerge({ id: 'new', content: 'a new' });
    expect(result).toMatchObject({ decision: 'insert', failure: 'store_query', similarity: null });
    expect(await contents(inner)).toEqual(['a new', 'a old']);
    expect(log).toEqual([{ event: 'dedup_fail', ids: ['new'], failed: 'store_query', error: 'index offline', fallback: 'insert' }]);
    expect(levels).toEqual(['warn']);
  });

  it.each([
    ['throws', async () => Promise.reject(new Error('LLM timeout'))],
    ['returns an empty text', async () => '   '],
    ['returns no content', async () => ({}) as { content: string }],
  ])('a merge that %s falls back to replace, audited and logged', async (_name, merge) => {
    const store = new InMemoryStore();
    const { log, logger } = events();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, merge: merge as MergeFunction, logger, upperThreshold: 0.99, lowerThreshold: 0.9 });
    await dedup.checkAndMerge({ id: 'old', content: 'a old', timestamp: 1 });
    const result = await dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 });
    expect(result).toMatchObject({ decision: 'replace', failure: 'merge', replaced: ['old'] });
    expect(await contents(store)).toEqual(['b new']);
    expect(log.find((e) => e.event === 'dedup_fail')).toMatchObject({ failed: 'merge', fallback: 'keep_newest', ids: ['old', 'new'] });
    expect((await dedup.history()).map((e) => e.memory.content)).toEqual(['a old']);
  });

  it('a merged text that cannot be embedded falls back to replace', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, merge: async () => 'zzz unembeddable', upperThreshold: 0.99, lowerThreshold: 0.9 });
    await dedup.checkAndMerge({ id: 'old', content: 'a old', timestamp: 1 });
    const result = await dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 });
    expect(result).toMatchObject({ decision: 'replace', failure: 'embed_merged' });
    expect(await contents(store)).toEqual(['b new']);
  });

  it('a failing write leaves the older memory in place', async () => {
    const inner = new InMemoryStore();
    await inner.add({ id: 'old', content: 'a old', embedding: Float32Array.from(VECTORS['a']!), timestamp: 1 });
    const dedup = new MemoryDeduplicator({ store: failing(inner, { add: new Error('disk full') }), embed: tableEmbed, merge: concat, upperThreshold: 0.95 });
    await expect(dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 })).rejects.toThrow('disk full');
    expect(await contents(inner)).toEqual(['a old']);
  });

  it('a crash between write and delete leaves both (more facts, never fewer)', async () => {
    const inner = new InMemoryStore();
    await inner.add({ id: 'old', content: 'a old', embedding: Float32Array.from(VECTORS['a']!), timestamp: 1 });
    const dedup = new MemoryDeduplicator({
      store: failing(inner, { delete: new Error('killed') }),
      embed: tableEmbed,
      merge: concat,
      upperThreshold: 0.99,
      lowerThreshold: 0.9,
    });
    await expect(dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 })).rejects.toThrow('killed');
    expect(await contents(inner)).toEqual(['a old', 'a old + b new']);
    // The audit entries were written first, so undo still has both originals.
    expect((await dedup.history()).map((e) => e.memory.id)).toEqual(['old', 'new']);
  });

  it('undo restores a replaced memory and a merged-away one; unknown ids reject', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, merge: concat, upperThreshold: 0.99, lowerThreshold: 0.9 });
    await dedup.checkAndMerge({ id: 'old', content: 'a old', timestamp: 1, metadata: { k: 1 } });
    await dedup.checkAndMerge({ id: 'new', content: 'b new', timestamp: 2 });
    expect(await contents(store)).toEqual(['a old + b new']);
    const restored = await dedup.undo('old');
    expect(restored).toEqual({ id: 'old', content: 'a old', timestamp: 1, metadata: { k: 1 } });
    expect(await contents(store)).toEqual(['a old', 'a old + b new']);
    expect((await store.get('old'))?.embedding).toEqual(Float32Array.from(VECTORS['a']!));
    expect((await dedup.history())[0]!.undone).toBe(true);
    await expect(dedup.undo('old')).rejects.toThrow(RangeError);
    await expect(dedup.undo('never')).rejects.toThrow(/no audited version of memory "never"/);
  });

  it('undo audits what it overwrites: a later memory under a reused id is never lost', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95 });
    await dedup.checkAndMerge({ id: 'm1', content: 'a peanuts', timestamp: 1 });
    expect(await dedup.checkAndMerge({ id: 'm2', content: 'b peanuts!', timestamp: 2 })).toMatchObject({ decision: 'replace' });
    // The id m1 is free again: an unrelated memory is written under it.
    expect(await dedup.checkAndMerge({ id: 'm1', content: 'd deploy key', timestamp: 3 })).toMatchObject({ decision: 'insert' });
    await dedup.undo('m1');
    expect((await store.get('m1'))?.content).toBe('a peanuts');
    const last = (await dedup.history()).at(-1);
    expect(last).toMatchObject({ action: 'replaced', replacedBy: 'm1', memory: { id: 'm1', content: 'd deploy key', timestamp: 3 } });
    // ... and undo brings it back in turn, auditing the restored version again.
    expect(await dedup.undo('m1')).toEqual({ id: 'm1', content: 'd deploy key', timestamp: 3 });
    expect((await store.get('m1'))?.content).toBe('d deploy key');
    expect((await dedup.history()).map((e) => [e.memory.content, e.undone])).toEqual([
      ['a peanuts', true],
      ['d deploy key', true],
      ['a peanuts', false],
    ]);
  });
});

describe('dedupeAll', () => {
  // cos(a,b) = 0.96, cos(e,f) = 120/169 ≈ 0.710, cos(a,e) = 63/65 ≈ 0.969, cos(b,e) ≈ 0.862.
  async function seeded(path?: string): Promise<MemoryStore> {
    const store = path ? new SqliteMemoryStore(path) : new InMemoryStore();
    const rows: [string, string, number][] = [
      ['m1', 'a one', 1],
      ['m2', 'b two', 2],
      ['m3', 'd three', 3],
      ['m4', 'c four', 4],
    ];
    for (const [id, content, timestamp] of rows) {
      await store.add({ id, content, timestamp, embedding: Float32Array.from(VECTORS[content[0]!]!) });
    }
    return store;
  }

  it('keeps the newest when every pair reaches the upper bound', async () => {
    const store = await seeded();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95, lowerThreshold: 0.9 });
    const report = await dedup.dedupeAll();
    expect(report.clusters).toHaveLength(1);
    expect(report.clusters[0]).toMatchObject({ action: 'keep_newest', resultId: 'm2', removedIds: ['m1'], minSimilarity: 0.96, maxSimilarity: 0.96 });
    expect(report.clusters[0]!.members.map((m) => m.id)).toEqual(['m1', 'm2']);
    expect([report.memories, report.removed, report.remaining]).toEqual([4, 1, 3]);
    expect(await contents(store)).toEqual(['b two', 'c four', 'd three']);
    expect((await dedup.history()).map((e) => [e.memory.id, e.action, e.replacedBy])).toEqual([['m1', 'replaced', 'm2']]);
  });

  it('chains under single linkage, splits under complete, and reports the minimum similarity', async () => {
    // a~b = 0.96, b~c = 0.6, a~c = 0.8: with lower 0.8, a-b-c... use lower 0.79 so a~c and a~b
    // link but b~c (0.6) does not: single gives {a, b, c}, complete splits.
    const store = await seeded();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.99, lowerThreshold: 0.79, merge: concat });
    const single = await dedup.dedupeAll({ dryRun: true });
    expect(single.clusters).toHaveLength(1);
    expect(single.clusters[0]!.members.map((m) => m.id)).toEqual(['m1', 'm2', 'm4']);
    expect(single.clusters[0]!.minSimilarity).toBeCloseTo(0.6, 12);
    expect(single.clusters[0]!.maxSimilarity).toBe(0.96);
    const complete = await dedup.dedupeAll({ dryRun: true, linkage: 'complete' });
    expect(complete.clusters.map((c) => c.members.map((m) => m.id))).toEqual([['m1', 'm2']]);
    expect(complete.clusters[0]!.minSimilarity).toBe(0.96);
    await expect(dedup.dedupeAll({ linkage: 'average' as 'single' })).rejects.toThrow(RangeError);
    // Building the message never throws, whatever the value (a BigInt has no JSON form).
    await expectPathError(() => dedup.dedupeAll({ linkage: 10n as never }), TypeError, "options.linkage must be 'single' or 'complete', got ");
    await expectPathError(() => dedup.dedupeAll({ dryRun: 1n as never }), TypeError, 'options.dryRun must be a boolean, got ');
  });

  it('merges clusters below the upper bound, all members oldest to newest in one prompt', async () => {
    const store = await seeded();
    const prompts: string[] = [];
    const merge: MergeFunction = async (_o, _n, { memories, prompt }) => {
      prompts.push(prompt);
      return `a ${memories.map((m) => m.id).join(',')}`;
    };
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.99, lowerThreshold: 0.79, merge });
    const report = await dedup.dedupeAll();
    expect(report.clusters[0]).toMatchObject({ action: 'merge', resultId: 'm4', removedIds: ['m1', 'm2'], mergedContent: 'a m1,m2,m4' });
    expect(prompts).toHaveLength(1);
    expect(prompts[0]!.indexOf('a one')).toBeLessThan(prompts[0]!.indexOf('b two'));
    expect(prompts[0]!.indexOf('b two')).toBeLessThan(prompts[0]!.indexOf('c four'));
    expect(await contents(store)).toEqual(['a m1,m2,m4', 'd three']);
    // All three previous versions are audited (m4's too: it was overwritten).
    expect((await dedup.history()).map((e) => e.memory.id)).toEqual(['m1', 'm2', 'm4']);
    await dedup.undo('m4');
    expect(await contents(store)).toEqual(['c four', 'd three']);
  });

  it('skips clusters that need a merge when there is no merge function; falls back on merge failure', async () => {
    const store = await seeded();
    const skip = await new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.99, lowerThreshold: 0.9 }).dedupeAll();
    expect(skip.clusters[0]).toMatchObject({ action: 'skip', removedIds: [] });
    expect(await store.list()).toHaveLength(4);
    const { log, logger } = events();
    const broken = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.99, lowerThreshold: 0.9, logger, merge: async () => '' });
    const report = await broken.dedupeAll();
    expect(report.clusters[0]).toMatchObject({ action: 'merge', failure: 'merge', removedIds: ['m1'] });
    expect(await contents(store)).toEqual(['b two', 'c four', 'd three']);
    expect(log.some((e) => e.event === 'dedup_fail')).toBe(true);
  });

  it('dry run reports exactly what a real run does and leaves the SQLite file byte-identical', async () => {
    const path = tempDb();
    const store = await seeded(path);
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95, lowerThreshold: 0.79, merge: concat });
    const digest = () => [path, `${path}-wal`].map((f) => (existsSync(f) ? createHash('sha256').update(readFileSync(f)).digest('hex') : 'absent')).join();
    const before = digest();
    const listBefore = await store.list();
    const dry = await dedup.dedupeAll({ dryRun: true });
    expect(digest()).toBe(before);
    expect(await store.list()).toEqual(listBefore);
    expect(dry.dryRun).toBe(true);
    const real = await dedup.dedupeAll();
    const strip = (r: typeof dry) => r.clusters.map(({ mergedContent: _m, ...c }) => c);
    expect(strip(real)).toEqual(strip(dry));
    expect([real.removed, real.remaining]).toEqual([dry.removed, dry.remaining]);
    await store.close();
  });

  it('clusters a realistic store with the hashed embedding', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, enabled: false });
    await dedup.addBatch([
      { id: '1', content: 'The user prefers dark mode in all editors.', timestamp: 1 },
      { id: '2', content: 'Bob works at Acme Corp as a senior backend engineer.', timestamp: 2 },
      { id: '3', content: 'the user prefers dark mode in all editors', timestamp: 3 },
      { id: '4', content: 'The team deploys to Kubernetes every Friday.', timestamp: 4 },
    ]);
    const report = await new MemoryDeduplicator({ store }).dedupeAll();
    expect(report.clusters.map((c) => [c.members.map((m) => m.id), c.action])).toEqual([[['1', '3'], 'keep_newest']]);
    expect(await store.list()).toHaveLength(3);
  });
});

describe('SqliteMemoryStore persistence', () => {
  it('keeps memories, vectors and the audit log across reopening', async () => {
    const path = tempDb();
    let store = new SqliteMemoryStore(path);
    let dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95 });
    await dedup.addBatch([
      { id: 'x', content: 'a x', timestamp: 1 },
      { id: 'y', content: 'd y', timestamp: 2 },
      { id: 'z', content: 'b z', timestamp: 3 },
    ]);
    await store.close();
    store = new SqliteMemoryStore(path);
    dedup = new MemoryDeduplicator({ store, embed: tableEmbed, upperThreshold: 0.95 });
    expect(await contents(store)).toEqual(['b z', 'd y']);
    const [hit] = await store.nearest(Float32Array.from(VECTORS['a']!), 1);
    expect(hit!.memory.id).toBe('z');
    expect(hit!.similarity).toBe(0.96);
    expect((await dedup.history()).map((e) => e.memory.id)).toEqual(['x']);
    await dedup.undo('x');
    await store.close();
    store = new SqliteMemoryStore(path);
    expect(await contents(store)).toEqual(['a x', 'b z', 'd y']);
    expect((await store.audit.list())[0]!.undone).toBe(true);
    await store.close();
    await expect(store.list()).rejects.toThrow(/closed/);
  });

  it('requires a path: no silent temporary database; :memory: only by name', async () => {
    for (const path of [undefined, null, '', 42]) {
      expect(() => new SqliteMemoryStore(path as unknown as string)).toThrow(TypeError);
      expect(() => new SqliteMemoryStore(path as unknown as string)).toThrow(
        /^path must be a file path \(or ':memory:' for a database that is never saved\), got /,
      );
    }
    const named = new SqliteMemoryStore(':memory:');
    await named.add({ id: '1', content: 'x', embedding: Float32Array.of(1, 0) });
    expect(await named.list()).toHaveLength(1);
    await named.close();
  });

  it('open errors name the file and keep the driver error as the cause', () => {
    const dir = dirname(tempDb());
    const garbage = join(dir, 'garbage.db');
    writeFileSync(garbage, 'not a database '.repeat(100));
    const cases: [string, RegExp][] = [
      [dir, /unable to open database file/],
      [join(dir, 'missing', 'memories.db'), /directory does not exist/],
      [garbage, /file is not a database/],
    ];
    for (const [path, driverMessage] of cases) {
      let caught: unknown;
      try {
        new SqliteMemoryStore(path);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(Error);
      const error = caught as Error;
      expect(error.message).toContain(`cannot open the SQLite memory store ${JSON.stringify(path)}`);
      expect(error.message).toMatch(driverMessage);
      expect(error.cause).toBeInstanceOf(Error);
      expect((error.cause as Error).message).toMatch(driverMessage);
    }
  });

  it('rejects an embedding of another dimension', async () => {
    const store = new SqliteMemoryStore(tempDb());
    await store.add({ id: '1', content: 'x', embedding: Float32Array.of(1, 0) });
    await expect(store.add({ id: '2', content: 'y', embedding: Float32Array.of(1, 0, 0) })).rejects.toThrow(/3 dimensions, the store holds 2/);
    await expect(store.nearest(Float32Array.of(1), 1)).rejects.toThrow(RangeError);
    await store.close();
  });
});

describe('openMemoryStore', () => {
  it('rejects a spec that is not a string, naming it', async () => {
    await expectPathError(() => openMemoryStore(5 as never), TypeError, "store must be 'sqlite:<path>', 'chroma:<url>' or 'memory', got ");
    await expectPathError(() => openMemoryStore(10n as never), TypeError, "store must be 'sqlite:<path>', 'chroma:<url>' or 'memory', got ");
    await expect(openMemoryStore('sqlite:')).rejects.toThrow(TypeError);
  });
});

describe('buildMergePrompt', () => {
  it('states the rules and lists memories oldest to newest with timestamps and speakers', () => {
    const prompt = buildMergePrompt([
      { id: '3', content: 'third', timestamp: Date.UTC(2026, 0, 3), metadata: { speaker: 'carol' } },
      { id: '1', content: 'first', timestamp: Date.UTC(2026, 0, 1) },
      { id: '2', content: 'second', timestamp: Date.UTC(2026, 0, 2), metadata: { author: 'bob' } },
    ]);
    expect(prompt).toContain('Combine all distinct facts');
    expect(prompt).toContain('prefer the newer');
    expect(prompt).toContain('concise but complete');
    expect(prompt).toContain('Keep who said it');
    expect(prompt).toContain('1. [2026-01-01T00:00:00.000Z] first');
    expect(prompt).toContain('2. [2026-01-02T00:00:00.000Z, said by bob] second');
    expect(prompt).toContain('3. [2026-01-03T00:00:00.000Z, said by carol] third');
    expect(prompt).toContain('The following 3 memories');
    expect(buildMergePrompt([{ id: 'a', content: 'undated' }])).toContain('[time unknown] undated');
  });

  it('rejects holes and wrong values with an error naming the index, before building anything', async () => {
    await expectPathError(() => buildMergePrompt(new Array(3)), TypeError, 'memories[0] must be an object, got ');
    await expectPathError(
      () => buildMergePrompt([{ id: 'a', content: 'x' }, , { id: 'b', content: 'y' }] as Memory[]),
      TypeError,
      'memories[1] must be an object, got ',
    );
    await expectPathError(() => buildMergePrompt([{ id: 'a', content: 7 } as unknown as Memory]), TypeError, 'memories[0].content must be a string, got ');
    await expectPathError(() => buildMergePrompt('x' as unknown as Memory[]), TypeError, 'memories must be an array, got ');
  });

  it('rejects a timestamp outside the Date range with a RangeError naming it', () => {
    const ok = { id: 'a', content: 'x', timestamp: 8.64e15 };
    expect(buildMergePrompt([ok])).toContain('+275760-09-13T00:00:00.000Z');
    for (const timestamp of [8.64e15 + 1, -8.64e15 - 1, 1e20]) {
      expect(() => buildMergePrompt([ok, { id: 'b', content: 'y', timestamp }])).toThrow(
        new RangeError(`memories[1].timestamp must be within ±8.64e15 ms of the epoch (a valid Date), got ${timestamp}`),
      );
    }
  });

  it('the deduplicator rejects such a timestamp before writing anything', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store, embed: tableEmbed });
    await expect(
      dedup.addBatch([
        { id: '1', content: 'a', timestamp: 1 },
        { id: '2', content: 'b', timestamp: 1e20 },
      ]),
    ).rejects.toThrow(/^memories\[1\]\.timestamp must be within/);
    expect(await store.list()).toEqual([]);
  });
});

describe('hashedEmbedding', () => {
  const calibration = JSON.parse(readFileSync(new URL('../support/fixtures/memory-calibration.json', import.meta.url), 'utf8')) as {
    pairs: { label: 'same' | 'reworded' | 'different'; a: string; b: string }[];
  };

  it('matches its calibrated thresholds on the calibration set', async () => {
    const embed = hashedEmbedding();
    const vectors = (await embed(calibration.pairs.flatMap((p) => [p.a, p.b]))) as Float32Array[];
    const sims = calibration.pairs.map((p, i) => ({ ...p, sim: cosine(vectors[2 * i]!, vectors[2 * i + 1]!) }));
    const { upper, lower } = HASHED_EMBEDDING_THRESHOLDS;
    for (const s of sims.filter((x) => x.label === 'same')) expect(s.sim, s.b).toBeGreaterThanOrEqual(upper);
    for (const s of sims.filter((x) => x.label === 'different')) expect(s.sim, s.b).toBeLessThan(lower);
    const reworded = sims.filter((x) => x.label === 'reworded');
    // Lexical features miss rewordings that share few words; most are still caught.
    expect(reworded.filter((s) => s.sim >= lower).length).toBeGreaterThanOrEqual(reworded.length - 1);
  });

  it('is deterministic, unit length, dimension-checked, and the async path agrees', async () => {
    const embed = hashedEmbedding({ dim: 64 });
    expect(embed.dim).toBe(64);
    const many = Array.from({ length: 300 }, (_, i) => `memory number ${i} about topic ${i % 7}`);
    const [first] = (await embed([many[0]!])) as Float32Array[];
    const all = (await embed(many)) as Float32Array[];
    expect(all[0]).toEqual(first);
    expect(all[5]!.reduce((s, v) => s + v * v, 0)).toBeCloseTo(1, 5);
    expect(() => hashedEmbedding({ dim: 0 })).toThrow(RangeError);
    expect(() => hashedEmbedding({ dim: 1.5 })).toThrow(RangeError);
  });

  it('rejects options that are not an object, and texts that are not strings, naming them', async () => {
    await expectPathError(() => hashedEmbedding(5 as never), TypeError, 'options must be an object, got ');
    await expectPathError(() => hashedEmbedding(null as never), TypeError, 'options must be an object, got ');
    const embed = hashedEmbedding({ dim: 8 });
    await expectPathError(() => embed(['a', , 'b'] as string[]), TypeError, 'texts[1] must be a string, got ');
    await expectPathError(() => embed('ab' as unknown as string[]), TypeError, 'texts must be an array, got ');
  });
});

describe('stored memories are copies', () => {
  it('mutating an input or an output does not change the store', async () => {
    const store = new InMemoryStore();
    const memory: StoredMemory = { id: '1', content: 'x', metadata: { tags: ['a'] }, embedding: Float32Array.of(1, 0) };
    await store.add(memory);
    (memory.metadata!['tags'] as string[]).push('b');
    memory.embedding[0] = 0;
    const got = await store.get('1');
    expect(got?.metadata).toEqual({ tags: ['a'] });
    expect(got?.embedding).toEqual(Float32Array.of(1, 0));
  });
});
