/**
 * Audit fixes of the memory deduplicator and its embedded stores: large batches yield to the event
 * loop, concurrent writes through one deduplicator are serialized (nothing overwritten unaudited),
 * embeddings, `nearest` arguments, options and metadata are validated before anything is written.
 * Real SQLite files; nothing is mocked.
 */
import { describe, expect, it } from 'vitest';
import {
  type AuditLog,
  type EmbedFunction,
  InMemoryStore,
  type Memory,
  MemoryDeduplicator,
  type MemoryStore,
  type MergeFunction,
  SqliteMemoryStore,
  type StoredMemory,
  hashedEmbedding,
} from '../../src/memory/index.js';
import { tempFiles } from '../support/ingest-services.js';

const tempDb = tempFiles('ctxdedup-stores-', 'memories.db');

const embeddedStores: [string, () => MemoryStore][] = [
  ['InMemoryStore', () => new InMemoryStore()],
  ['SqliteMemoryStore', () => new SqliteMemoryStore(tempDb())],
];

const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet', 'kilo', 'lima'];
/** Memories with a mix of copies (replaced), near copies and distinct facts. */
function memories(n: number): Memory[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `m${i}`,
    content: i % 5 === 0 ? `${words[i % 12]} is a shared fact` : `${words[i % 12]} ${words[(i * 7) % 12]} fact ${i} about ${words[(i * 5) % 11]}`,
    timestamp: i,
  }));
}

const concat: MergeFunction = async (_older, _newer, { memories: ms }) => ms.map((m) => m.content).join(' + ');

describe.each(embeddedStores)('addBatch on %s yields to the event loop', (_name, open) => {
  it('a timer scheduled once the batch is embedded fires before the batch has been written; results are unchanged', async () => {
    const store = open();
    const hashed = hashedEmbedding();
    let fired = false;
    let writtenWhenFired = -1;
    let written = 0;
    // Scheduled after the embedding (which may run off the main thread): only the writes are left.
    const embed: EmbedFunction = async (texts) => {
      const vectors = await hashed(texts);
      if (texts.length > 1) {
        setTimeout(() => {
          fired = true;
          writtenWhenFired = written;
        }, 0);
      }
      return vectors;
    };
    const counting: MemoryStore = {
      kind: store.kind,
      add: async (m: StoredMemory) => {
        written++;
        await store.add(m);
      },
      update: (m) => store.update(m),
      delete: (id) => store.delete(id),
      get: (id) => store.get(id),
      list: () => store.list(),
      nearest: (v, k) => store.nearest(v, k),
      close: () => store.close(),
    };
    const batch = memories(1200);
    const dedup = new MemoryDeduplicator({ store: counting, embed, merge: concat, upperThreshold: 0.88, lowerThreshold: 0.7 });
    const results = await dedup.addBatch(batch);
    expect(fired).toBe(true);
    expect(writtenWhenFired).toBeGreaterThanOrEqual(0);
    expect(writtenWhenFired).toBeLessThan(batch.length);

    // The same memories one call at a time on a fresh store: identical decisions and contents.
    const reference = new InMemoryStore();
    const one = new MemoryDeduplicator({ store: reference, embed: hashed, merge: concat, upperThreshold: 0.88, lowerThreshold: 0.7 });
    const expected = [];
    for (const m of batch) expected.push(await one.checkAndMerge(m));
    expect(results).toEqual(expected);
    const sorted = async (s: MemoryStore): Promise<[string, string][]> =>
      (await s.list()).map((m): [string, string] => [m.id, m.content]).sort((a, b) => (a[0] < b[0] ? -1 : 1));
    expect(await sorted(store)).toEqual(await sorted(reference));
    expect(results.some((r) => r.decision === 'replace')).toBe(true);
    await store.close();
  });
});

describe.each(embeddedStores)('concurrent writes through one deduplicator on %s', (_name, open) => {
  it('merge into the same stored memory one after the other; every overwritten version is audited', async () => {
    const store = open();
    const vectors: Record<string, number[]> = { S: [1, 0, 0], A: [0.8, 0.6, 0], B: [0.8, 0, 0.6] };
    // Merged texts embed like S.
    const embed: EmbedFunction = async (texts) => texts.map((t) => vectors[t] ?? [1, 0, 0]);
    const merge: MergeFunction = async (_older, _newer, { memories: ms }) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return ms.map((m) => m.content).join('+');
    };
    const dedup = new MemoryDeduplicator({ store, embed, merge, upperThreshold: 0.95, lowerThreshold: 0.7 });
    await dedup.checkAndMerge({ id: 's', content: 'S', timestamp: 10 });
    const [ra, rb] = await Promise.all([
      dedup.checkAndMerge({ id: 'a', content: 'A', timestamp: 1 }),
      dedup.checkAndMerge({ id: 'b', content: 'B', timestamp: 2 }),
    ]);
    expect([ra.decision, rb.decision]).toEqual(['merge', 'merge']);
    expect(ra.stored.content).toBe('A+S');
    // B saw A's merge: nothing of A is lost.
    expect(rb.stored.content).toBe('B+A+S');
    expect((await store.list()).map((m) => [m.id, m.content])).toEqual([['s', 'B+A+S']]);
    const audited = (await dedup.history()).map((e) => [e.action, e.memory.id, e.memory.content, e.replacedBy]);
    expect(audited).toEqual([
      ['merged', 'a', 'A', 's'],
      ['merged', 's', 'S', 's'],
      ['merged', 'b', 'B', 's'],
      ['merged', 's', 'A+S', 's'],
    ]);
    await store.close();
  });

  it('the same memory written twice at once: one write, the other rejects as already stored', async () => {
    const store = open();
    const dedup = new MemoryDeduplicator({ store });
    const m = { id: 'x', content: 'Alice is allergic to peanuts.', timestamp: 5 };
    const settled = await Promise.allSettled([dedup.checkAndMerge(m), dedup.checkAndMerge(m)]);
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { decision: 'insert' } });
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: new RangeError('memories[0].id "x" is already in the store') });
    expect((await store.list()).map((s) => s.id)).toEqual(['x']);
    expect(await dedup.history()).toEqual([]);
    await store.close();
  });
});

describe.each(embeddedStores)('%s validates embeddings and nearest() arguments', (_name, open) => {
  const f32 = (...v: number[]): Float32Array => Float32Array.of(...v);

  it('refuses non-finite embeddings at add and update, and stays usable', async () => {
    const store = open();
    await store.add({ id: 'ok', content: 'x', embedding: f32(1, 0, 0) });
    await expect(store.add({ id: 'nan', content: 'y', embedding: f32(Number.NaN, 0, 0) })).rejects.toThrow(new RangeError('memory.embedding[0] is NaN'));
    await expect(store.add({ id: 'inf', content: 'y', embedding: f32(0, 0, Number.POSITIVE_INFINITY) })).rejects.toThrow(
      new RangeError('memory.embedding[2] is Infinity'),
    );
    await expect(store.update({ id: 'ok', content: 'y', embedding: f32(0, Number.NEGATIVE_INFINITY, 0) })).rejects.toThrow(
      new RangeError('memory.embedding[1] is -Infinity'),
    );
    await expect(store.add({ id: 'arr', content: 'y', embedding: [1, 0, 0] as unknown as Float32Array })).rejects.toThrow(
      new TypeError('memory.embedding must be a Float32Array'),
    );
    await expect(store.add({ id: 'empty', content: 'y', embedding: f32() })).rejects.toThrow(new RangeError('memory.embedding is empty'));
    expect((await store.list()).map((m) => [m.id, m.content])).toEqual([['ok', 'x']]);
    const near = await store.nearest(f32(1, 0, 0), 5);
    expect(near.map((n) => [n.memory.id, n.similarity])).toEqual([['ok', 1]]);
    await store.close();
  });

  it('nearest() takes a Float32Array and a non-negative integer k', async () => {
    const store = open();
    for (let i = 0; i < 3; i++) await store.add({ id: `m${i}`, content: `c${i}`, embedding: f32(1, i, 0) });
    const v = f32(1, 0, 0);
    await expect(store.nearest(v, Number.NaN)).rejects.toThrow(new RangeError('k must be a non-negative integer, got NaN'));
    await expect(store.nearest(v, 1.5)).rejects.toThrow(new RangeError('k must be a non-negative integer, got 1.5'));
    await expect(store.nearest(v, -1)).rejects.toThrow(new RangeError('k must be a non-negative integer, got -1'));
    await expect(store.nearest(v, Number.POSITIVE_INFINITY)).rejects.toThrow(new RangeError('k must be a non-negative integer, got Infinity'));
    await expect(store.nearest(v, '2' as unknown as number)).rejects.toThrow(new TypeError('k must be a number, got a string'));
    await expect(store.nearest([1, 0, 0] as unknown as Float32Array, 2)).rejects.toThrow(new TypeError('vector must be a Float32Array'));
    await expect(store.nearest(f32(Number.NaN, 0, 0), 2)).rejects.toThrow(new RangeError('vector[0] is NaN'));
    expect(await store.nearest(v, 0)).toEqual([]);
    expect((await store.nearest(v, 2)).map((n) => n.memory.id)).toEqual(['m0', 'm1']);
    await store.close();
  });
});

describe('a NaN embedding cannot poison a SQLite file', () => {
  it('is refused, so the file reopens and keeps deduplicating', async () => {
    const path = tempDb();
    let store = new SqliteMemoryStore(path);
    await store.add({ id: 'ok', content: 'Alice is allergic to peanuts.', embedding: Float32Array.of(1, 0, 0) });
    await expect(store.add({ id: 'bad', content: 'x', embedding: Float32Array.of(Number.NaN, 0, 0) })).rejects.toThrow(RangeError);
    await store.close();
    store = new SqliteMemoryStore(path);
    expect((await store.nearest(Float32Array.of(1, 0, 0), 1)).map((n) => n.memory.id)).toEqual(['ok']);
    const dedup = new MemoryDeduplicator({ store, embed: async (t) => t.map(() => [1, 0, 0]) });
    const r = await dedup.checkAndMerge({ id: 'dup', content: 'Alice is allergic to peanuts.', timestamp: 1 });
    expect(r.decision).toBe('replace');
    await store.close();
  });
});

describe('MemoryDeduplicator option and metadata validation', () => {
  it('refuses an audit log without record/list/markUndone and a clock that is not a function', () => {
    const store = new InMemoryStore();
    expect(() => new MemoryDeduplicator({ store, audit: 'x' as unknown as AuditLog })).toThrow(new TypeError('options.audit must be an object, got a string'));
    expect(() => new MemoryDeduplicator({ store, audit: { record: async () => undefined } as unknown as AuditLog })).toThrow(
      new TypeError('options.audit.list must be a function'),
    );
    expect(() => new MemoryDeduplicator({ store, now: 5 as unknown as () => number })).toThrow(new TypeError('options.now must be a function, got a number'));
  });

  it('refuses metadata that JSON would silently change, naming the path; writes nothing', async () => {
    const store = new InMemoryStore();
    const dedup = new MemoryDeduplicator({ store });
    const write = (metadata: unknown): Promise<unknown> => dedup.checkAndMerge({ id: 'm', content: 'a fact', metadata: metadata as Record<string, unknown> });
    await expect(write({ score: Number.NaN })).rejects.toThrow(new TypeError('memories[0].metadata.score must be a finite number, got NaN'));
    await expect(write({ a: { b: [1, Number.POSITIVE_INFINITY] } })).rejects.toThrow(
      new TypeError('memories[0].metadata.a.b[1] must be a finite number, got Infinity'),
    );
    await expect(write({ when: new Date(0) })).rejects.toThrow(
      new TypeError('memories[0].metadata.when must be a plain object, array, string, finite number, boolean or null, got a Date'),
    );
    await expect(
      write({
        toJSON() {
          return null;
        },
      }),
    ).rejects.toThrow(new TypeError('memories[0].metadata has a toJSON method (JSON would store what it returns, not the object)'));
    await expect(write({ gone: undefined })).rejects.toThrow(new TypeError('memories[0].metadata.gone must be a JSON value, got undefined'));
    await expect(write({ big: 10n })).rejects.toThrow(new TypeError('memories[0].metadata.big must be a JSON value, got a bigint'));
    await expect(write({ f: () => 1 })).rejects.toThrow(new TypeError('memories[0].metadata.f must be a JSON value, got a function'));
    await expect(write({ holes: [1, , 3] })).rejects.toThrow(new TypeError('memories[0].metadata.holes[1] must be a JSON value, got a hole'));
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    await expect(write(cycle)).rejects.toThrow(new TypeError('memories[0].metadata.self is a cycle (it contains itself)'));
    expect(await store.list()).toEqual([]);
    // Plain JSON is kept verbatim, a "__proto__" key included.
    const plain = JSON.parse('{"speaker":"ann","n":[1,2.5,null,true],"nested":{"x":"y"},"__proto__":{"z":1}}') as Record<string, unknown>;
    const r = await dedup.checkAndMerge({ id: 'ok', content: 'a plain fact', metadata: plain });
    expect(r.stored.metadata).toEqual(plain);
    expect(JSON.stringify((await store.get('ok'))!.metadata)).toBe(JSON.stringify(plain));
  });
});
