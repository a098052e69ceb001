/**
 * The {@link MemoryStore} contract as vitest tests, shared by every store (in-memory, SQLite,
 * ChromaDB): call {@link describeMemoryStoreContract} from a store's test file.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryDeduplicator, type MergeFunction } from '../../src/memory/deduplicator.js';
import type { EmbedFunction } from '../../src/memory/embedding.js';
import type { MemoryStore, NearestMemory, StoredMemory } from '../../src/memory/store.js';
import { mulberry32 } from '../../bench/prng.js';

/** Cosine similarity in float64, as the tests expect stores to report it. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

/** A deterministic pseudo-random generator in [0, 1) (mulberry32), so failures reproduce. */
export function seededRandom(seed: number): () => number {
  return mulberry32(seed).next;
}

/** A vector of `dim` values in [-1, 1) from `random`. */
export function randomVector(random: () => number, dim: number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = random() * 2 - 1;
  return v;
}

/** `Float32Array.of(...)`, shorter in tables. */
export const f32 = (...values: number[]): Float32Array => Float32Array.of(...values);

/** A stored memory with the given fields and nothing else. */
export function memory(id: string, embedding: Float32Array, extra: Partial<Omit<StoredMemory, 'id' | 'embedding'>> = {}): StoredMemory {
  return { id, content: extra.content ?? `content of ${id}`, embedding, ...extra };
}

/**
 * `[t, sqrt(1 - t^2), 0, 0]`: its float64 cosine with `[1, 0, 0, 0]` is exactly `t` for the
 * thresholds tested here (asserted by the tests), while the float32 copies a store holds score a
 * little below `t`.
 */
export function atCosine(t: number): number[] {
  return [t, Math.sqrt(1 - t * t), 0, 0];
}

/** Cosine similarity of two float64 vectors, as a caller computes it before any float32 storage. */
export function cosine64(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / (Math.sqrt(na) * Math.sqrt(nb));
}

/** An embedder that looks each text up in `table` (float64 vectors, as a caller's model returns). */
export function tableEmbedding(table: Record<string, readonly number[]>): EmbedFunction {
  return async (texts) =>
    texts.map((text) => {
      const vector = Object.hasOwn(table, text) ? table[text] : undefined;
      if (vector === undefined) throw new Error(`test: no vector for ${JSON.stringify(text)}`);
      return vector;
    });
}

/**
 * Asserts that `run` throws, or returns a promise that rejects with, an error of class `kind` whose
 * message starts with `prefix` (the path and the rule; the rest describes the value, in the words
 * of src/validation.ts).
 */
export async function expectPathError(run: () => unknown, kind: new (message?: string) => Error, prefix: string): Promise<void> {
  let caught: unknown;
  try {
    await run();
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ${kind.name} starting with ${JSON.stringify(prefix)}`).toBeInstanceOf(kind);
  expect((caught as Error).message.startsWith(prefix), `${JSON.stringify((caught as Error).message)} starts with ${JSON.stringify(prefix)}`).toBe(true);
}

/** Asserts that `actual` holds exactly what `expected` says, embedding values included. */
export function expectSameMemory(actual: StoredMemory | undefined, expected: StoredMemory): void {
  expect(actual).toBeDefined();
  const got = actual!;
  expect(got.id).toBe(expected.id);
  expect(got.content).toBe(expected.content);
  expect(got.timestamp).toBe(expected.timestamp);
  expect(got.metadata).toEqual(expected.metadata);
  expectSameVector(got.embedding, expected.embedding);
}

/**
 * Asserts `actual` is a Float32Array holding `expected`'s values within float32 precision: each
 * value within a relative 1e-6 (a few units in the last place). Embedded stores give the values
 * back exactly; Chroma, in cosine space, gives back the normalized vector scaled by the norm again,
 * which moves some values by one unit in the last place.
 */
export function expectSameVector(actual: Float32Array, expected: Float32Array): void {
  expect(actual).toBeInstanceOf(Float32Array);
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (Math.abs(a - e) > 1e-6 * Math.max(Math.abs(a), Math.abs(e))) {
      expect.fail(`embedding[${i}] is ${a}, expected ${e} (within float32 precision)`);
    }
  }
}

/** The order and similarities a correct store reports, computed by brute force. */
export function bruteForceNearest(memories: readonly StoredMemory[], vector: Float32Array, k: number): { id: string; similarity: number }[] {
  return memories
    .map((m) => ({ id: m.id, similarity: cosine(vector, m.embedding) }))
    .sort((a, b) => b.similarity - a.similarity || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(0, k);
}

/** Asserts `actual` is `expected` (ids in order, similarities within 1e-5). */
export function expectNearest(actual: NearestMemory[], expected: { id: string; similarity: number }[]): void {
  expect(actual.map((r) => r.memory.id)).toEqual(expected.map((e) => e.id));
  actual.forEach((r, i) => {
    expect(Math.abs(r.similarity - expected[i]!.similarity), `similarity of ${r.memory.id}`).toBeLessThan(1e-5);
  });
}

const byId = (a: StoredMemory, b: StoredMemory): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Registers the generic store contract tests under `describe(name)`.
 * @param open Opens a fresh, EMPTY store; called once per test. The test closes it.
 */
export function describeMemoryStoreContract(name: string, open: () => Promise<MemoryStore>): void {
  describe(`MemoryStore contract: ${name}`, () => {
    let opened: MemoryStore[] = [];
    const fresh = async (): Promise<MemoryStore> => {
      const store = await open();
      opened.push(store);
      return store;
    };
    afterEach(async () => {
      for (const store of opened) await store.close();
      opened = [];
    });

    it('starts empty', async () => {
      const store = await fresh();
      expect(await store.list()).toEqual([]);
      expect(await store.get('missing')).toBeUndefined();
      expect(await store.nearest(f32(1, 0, 0, 0, 0, 0, 0, 0), 3)).toEqual([]);
      expect(await store.delete('missing')).toBe(false);
    });

    it('round-trips content, timestamp, metadata and the float32 embedding', async () => {
      const store = await fresh();
      const full = memory('m-full', f32(0.1, -1 / 3, 2.5e-8, 1234.5678, -0.75, 0, 1e-30, 1 + 2 ** -23), {
        content: 'The user prefers tea — “earl grey”, 😀, \u0000 and a\r\nnewline',
        timestamp: 1_732_233_600_123,
        metadata: { speaker: 'user', intensity: 0.8, tags: ['drink', 'tea'], nested: { ok: true, none: null }, unicode: 'é😀' },
      });
      const bare = memory('m-bare', f32(1, 2, 3, 4, 5, 6, 7, 8), { content: '' });
      const fractional = memory('m-frac', f32(-1, 0, 0, 0, 0, 0, 0, 1), { timestamp: 1.5, metadata: {} });
      for (const m of [full, bare, fractional]) await store.add(m);
      expectSameMemory(await store.get('m-full'), full);
      expectSameMemory(await store.get('m-bare'), bare);
      expectSameMemory(await store.get('m-frac'), fractional);
      const all = (await store.list()).sort(byId);
      expect(all.map((m) => m.id)).toEqual(['m-bare', 'm-frac', 'm-full']);
      expectSameMemory(all[0], bare);
      expectSameMemory(all[1], fractional);
      expectSameMemory(all[2], full);
    });

    it('keeps its own copy: mutating what was added or returned does not change the store', async () => {
      const store = await fresh();
      const added = memory('a', f32(1, 2, 3, 4, 5, 6, 7, 8), { metadata: { n: 1 } });
      await store.add(added);
      added.embedding[0] = 99;
      added.metadata!['n'] = 2;
      const got = await store.get('a');
      got!.embedding[1] = 99;
      expectSameVector((await store.get('a'))!.embedding, f32(1, 2, 3, 4, 5, 6, 7, 8));
      expect((await store.get('a'))!.metadata).toEqual({ n: 1 });
    });

    it('add rejects an existing id and leaves the stored memory as it was', async () => {
      const store = await fresh();
      const original = memory('dup', f32(1, 0, 0, 0, 0, 0, 0, 0), { timestamp: 10, metadata: { v: 1 } });
      await store.add(original);
      await expect(store.add(memory('dup', f32(0, 1, 0, 0, 0, 0, 0, 0), { content: 'other' }))).rejects.toThrow(/dup/);
      expectSameMemory(await store.get('dup'), original);
      expect(await store.list()).toHaveLength(1);
    });

    it('update replaces every field, including dropping timestamp and metadata', async () => {
      const store = await fresh();
      await store.add(memory('u', f32(1, 0, 0, 0, 0, 0, 0, 0), { content: 'old', timestamp: 100, metadata: { v: 1, keep: 'no' } }));
      const replaced = memory('u', f32(0, 0, 1, 0, 0, 0, 0, 0.5), { content: 'new', timestamp: 200, metadata: { v: 2 } });
      await store.update(replaced);
      expectSameMemory(await store.get('u'), replaced);
      const stripped = memory('u', f32(0, 1, 0, 0, 0, 0, 0, 0), { content: 'stripped' });
      await store.update(stripped);
      expectSameMemory(await store.get('u'), stripped);
      expect(await store.list()).toHaveLength(1);
      // The new embedding is what nearest sees.
      expectNearest(await store.nearest(f32(0, 1, 0, 0, 0, 0, 0, 0), 1), [{ id: 'u', similarity: 1 }]);
    });

    it('update rejects a missing id and does not create it', async () => {
      const store = await fresh();
      await expect(store.update(memory('ghost', f32(1, 0, 0, 0, 0, 0, 0, 0)))).rejects.toThrow(/ghost/);
      expect(await store.get('ghost')).toBeUndefined();
      expect(await store.list()).toEqual([]);
    });

    it('delete resolves true once, then false; the memory is gone everywhere', async () => {
      const store = await fresh();
      await store.add(memory('x', f32(1, 0, 0, 0, 0, 0, 0, 0)));
      await store.add(memory('y', f32(0, 1, 0, 0, 0, 0, 0, 0)));
      expect(await store.delete('x')).toBe(true);
      expect(await store.delete('x')).toBe(false);
      expect(await store.get('x')).toBeUndefined();
      expect((await store.list()).map((m) => m.id)).toEqual(['y']);
      expect((await store.nearest(f32(1, 0, 0, 0, 0, 0, 0, 0), 5)).map((r) => r.memory.id)).toEqual(['y']);
      // The id can be used again.
      await store.add(memory('x', f32(0, 0, 1, 0, 0, 0, 0, 0)));
      expectSameVector((await store.get('x'))!.embedding, f32(0, 0, 1, 0, 0, 0, 0, 0));
    });

    it('nearest ranks by cosine similarity, reports it, and returns whole memories', async () => {
      const store = await fresh();
      const memories = [
        memory('same', f32(1, 2, 3, 4, 5, 6, 7, 8), { timestamp: 5, metadata: { k: 'v' } }),
        memory('scaled', f32(2, 4, 6, 8, 10, 12, 14, 16.5)),
        memory('close', f32(1, 2, 3, 4, 5, 6, 7, 0)),
        memory('orthogonal', f32(8, -7, 6, -5, 4, -3, 2, -1.5)),
        memory('opposite', f32(-1, -2, -3, -4, -5, -6, -7, -8)),
        memory('far', f32(0, 0, 0, 0, 0, 0, 1, -1)),
      ];
      for (const m of memories) await store.add(m);
      const query = f32(1, 2, 3, 4, 5, 6, 7, 8);
      const top3 = await store.nearest(query, 3);
      expectNearest(top3, bruteForceNearest(memories, query, 3));
      expect(top3[0]!.memory.id).toBe('same');
      expect(top3[0]!.similarity).toBeCloseTo(1, 5);
      expectSameMemory(top3[0]!.memory, memories[0]!);
      const all = await store.nearest(query, 6);
      expectNearest(all, bruteForceNearest(memories, query, 6));
      expect(all[5]!.memory.id).toBe('opposite');
      expect(all[5]!.similarity).toBeCloseTo(-1, 5);
      for (const r of all) {
        expect(r.similarity).toBeGreaterThanOrEqual(-1);
        expect(r.similarity).toBeLessThanOrEqual(1);
      }
    });

    it('nearest breaks exact ties by id', async () => {
      const store = await fresh();
      const v = f32(0.3, 0.1, 0, 0, 0, 0, 0, 0.2);
      for (const id of ['t-c', 't-a', 't-d', 't-b']) await store.add(memory(id, v));
      await store.add(memory('other', f32(0, 0, 1, 0, 0, 0, 0, 0)));
      const top = await store.nearest(v, 2);
      expect(top.map((r) => r.memory.id)).toEqual(['t-a', 't-b']);
      const all = await store.nearest(v, 5);
      expect(all.map((r) => r.memory.id)).toEqual(['t-a', 't-b', 't-c', 't-d', 'other']);
    });

    it('nearest with k larger than the store returns everything; k = 0 returns nothing', async () => {
      const store = await fresh();
      const memories = [memory('p', f32(1, 0, 0, 0, 0, 0, 0, 0)), memory('q', f32(1, 1, 0, 0, 0, 0, 0, 0))];
      for (const m of memories) await store.add(m);
      const query = f32(1, 0.1, 0, 0, 0, 0, 0, 0);
      expectNearest(await store.nearest(query, 50), bruteForceNearest(memories, query, 50));
      expect(await store.nearest(query, 0)).toEqual([]);
    });

    it('nearest on 384-dimensional embeddings agrees with brute force', async () => {
      const store = await fresh();
      const random = seededRandom(384);
      const memories = Array.from({ length: 40 }, (_, i) => memory(`v${String(i).padStart(2, '0')}`, randomVector(random, 384), { timestamp: i }));
      for (const m of memories) await store.add(m);
      for (const query of [memories[7]!.embedding, randomVector(random, 384), randomVector(random, 384)]) {
        expectNearest(await store.nearest(query, 5), bruteForceNearest(memories, query, 5));
      }
      expectSameMemory(await store.get('v07'), memories[7]!);
    });

    it('keeps a lone surrogate in id or content exactly, or refuses it with a TypeError: never alters it', async () => {
      const store = await fresh();
      const odd = memory('id-\uD800', f32(1, 0, 0, 0, 0, 0, 0, 0), { content: 'text \uDC00 and \uD83D' });
      let refused: unknown;
      try {
        await store.add(odd);
      } catch (error) {
        refused = error;
      }
      if (refused === undefined) {
        expectSameMemory(await store.get('id-\uD800'), odd);
        expect((await store.list()).map((m) => [m.id, m.content])).toEqual([[odd.id, odd.content]]);
      } else {
        expect(refused).toBeInstanceOf(TypeError);
        expect((refused as Error).message).toMatch(/lone surrogate/);
        expect(await store.list()).toEqual([]);
      }
    });

    it('close is idempotent', async () => {
      const store = await fresh();
      await store.close();
      await store.close();
    });

    describe('MemoryDeduplicator on this store', () => {
      const PEANUTS = 'Alice is allergic to peanuts.';
      const SHELLFISH = 'Alice is allergic to peanuts and shellfish.';
      // cos(PEANUTS, SHELLFISH) = 0.92: between the default bounds (0.90, 0.95), so they merge.
      const embed = tableEmbedding({ [PEANUTS]: atCosine(1), [SHELLFISH]: atCosine(0.92), unrelated: [0, 0, 1, 0] });
      // A merge that loses a fact: the deduplicator must not depend on the model being right.
      const lossyMerge: MergeFunction = async () => PEANUTS;

      it('a merged-in incoming memory goes to the audit log first, and undo brings it back', async () => {
        const store = await fresh();
        const dedup = new MemoryDeduplicator({ store, embed, merge: lossyMerge, upperThreshold: 0.95, lowerThreshold: 0.9 });
        await dedup.checkAndMerge({ id: 'old', content: PEANUTS, timestamp: 1 });
        const result = await dedup.checkAndMerge({ id: 'new', content: SHELLFISH, timestamp: 2, metadata: { speaker: 'alice' } });
        expect(result).toMatchObject({ decision: 'merge', replaced: ['old'], stored: { id: 'new', content: PEANUTS } });
        expect((await store.list()).map((m) => [m.id, m.content])).toEqual([['new', PEANUTS]]);
        // Both inputs of the merge are in the history, verbatim: "shellfish" is not lost.
        const history = await dedup.history();
        expect(history.map((e) => [e.action, e.memory.id, e.memory.content, e.replacedBy])).toEqual([
          ['merged', 'old', PEANUTS, 'new'],
          ['merged', 'new', SHELLFISH, 'new'],
        ]);
        expect(history[1]!.memory.metadata).toEqual({ speaker: 'alice' });
        expect(await dedup.undo('new')).toEqual({ id: 'new', content: SHELLFISH, timestamp: 2, metadata: { speaker: 'alice' } });
        expectSameVector((await store.get('new'))!.embedding, Float32Array.from(atCosine(0.92)));
        await dedup.undo('old');
        expect((await store.list()).map((m) => [m.id, m.content]).sort()).toEqual([
          ['new', SHELLFISH],
          ['old', PEANUTS],
        ]);
      });

      it('an incoming memory older than the one it merges into is audited too', async () => {
        const store = await fresh();
        const dedup = new MemoryDeduplicator({ store, embed, merge: lossyMerge, upperThreshold: 0.95, lowerThreshold: 0.9 });
        await dedup.checkAndMerge({ id: 'late', content: PEANUTS, timestamp: 5 });
        await dedup.checkAndMerge({ id: 'backfill', content: SHELLFISH, timestamp: 1 });
        expect((await store.list()).map((m) => [m.id, m.content])).toEqual([['late', PEANUTS]]);
        expect((await dedup.history()).map((e) => [e.memory.id, e.memory.content])).toEqual([
          ['backfill', SHELLFISH],
          ['late', PEANUTS],
        ]);
        await dedup.undo('backfill');
        expect((await store.get('backfill'))?.content).toBe(SHELLFISH);
      });

      it('addBatch validates the whole batch (ids already stored included) before writing anything', async () => {
        const store = await fresh();
        const dedup = new MemoryDeduplicator({ store, embed, merge: lossyMerge, upperThreshold: 0.95, lowerThreshold: 0.9 });
        await dedup.checkAndMerge({ id: 'x', content: PEANUTS, timestamp: 1 });
        const before = await store.list();
        await expect(
          dedup.addBatch([
            { id: 'y', content: 'unrelated', timestamp: 2 },
            { id: 'x', content: SHELLFISH, timestamp: 3 },
          ]),
        ).rejects.toThrow(new RangeError('memories[1].id "x" is already in the store'));
        await expectPathError(() => dedup.addBatch([{ id: 'y', content: 'unrelated' }, undefined as never]), TypeError, 'memories[1] must be an object, got ');
        await expectPathError(
          () => dedup.addBatch([{ id: 'y', content: 'unrelated' }, , { id: 'z', content: 'unrelated' }] as never),
          TypeError,
          'memories[1] must be an object, got ',
        );
        const after = await store.list();
        expect(after).toHaveLength(1);
        expectSameMemory(after[0], before[0]!);
        expect(await dedup.history()).toEqual([]);
      });

      it('decides "at the threshold" on float32-stored vectors whose float64 cosine is exactly the bound', async () => {
        const table = { base: atCosine(1), lower: atCosine(0.9), upper: atCosine(0.95), belowLower: atCosine(0.89999), belowUpper: atCosine(0.94999) };
        // The premise: the caller's float64 vectors score exactly the bounds, their float32 copies do not.
        expect(cosine64(table.base, table.lower)).toBe(0.9);
        expect(cosine64(table.base, table.upper)).toBe(0.95);
        expect(cosine(Float32Array.from(table.base), Float32Array.from(table.lower))).toBeLessThan(0.9);
        expect(cosine(Float32Array.from(table.base), Float32Array.from(table.upper))).toBeLessThan(0.95);
        const decide = async (content: keyof typeof table): Promise<string> => {
          const store = await fresh();
          const merge: MergeFunction = async () => 'base';
          const dedup = new MemoryDeduplicator({ store, embed: tableEmbedding(table), merge, upperThreshold: 0.95, lowerThreshold: 0.9 });
          await dedup.checkAndMerge({ id: 'stored', content: 'base', timestamp: 1 });
          return (await dedup.checkAndMerge({ id: 'incoming', content, timestamp: 2 })).decision;
        };
        expect(await decide('lower')).toBe('merge');
        expect(await decide('upper')).toBe('replace');
        // The tolerance is far below any difference a caller means.
        expect(await decide('belowLower')).toBe('insert');
        expect(await decide('belowUpper')).toBe('merge');

        // Batch mode decides the same way.
        const batch = async (content: keyof typeof table): Promise<string[]> => {
          const store = await fresh();
          const dedup = new MemoryDeduplicator({ store, embed: tableEmbedding(table), upperThreshold: 0.95, lowerThreshold: 0.9, enabled: false });
          await dedup.addBatch([
            { id: 'stored', content: 'base', timestamp: 1 },
            { id: 'incoming', content, timestamp: 2 },
          ]);
          return (await dedup.dedupeAll({ dryRun: true })).clusters.map((c) => c.action);
        };
        expect(await batch('lower')).toEqual(['skip']);
        expect(await batch('upper')).toEqual(['keep_newest']);
        expect(await batch('belowLower')).toEqual([]);
        expect(await batch('belowUpper')).toEqual(['skip']);
      });
    });
  });
}
