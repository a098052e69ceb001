/**
 * ChromaMemoryStore against a real Chroma server (`chroma run` from .ci/chroma.sh's virtualenv):
 * the generic store contract, then what only a remote store has (restart persistence, an
 * unreachable server, paging, the collection's distance space).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChromaClient, type EmbeddingFunction } from 'chromadb';
import { ChromaMemoryStore } from '../../src/memory/chroma-store.js';
import { MemoryDeduplicator } from '../../src/memory/deduplicator.js';
import type { EmbedFunction } from '../../src/memory/embedding.js';
import { chromaAvailable, startChroma, type ChromaProcess } from '../support/chroma-server.js';
import { freePort, tempDir } from '../support/ingest-services.js';
import {
  bruteForceNearest,
  describeMemoryStoreContract,
  expectNearest,
  expectSameMemory,
  f32,
  memory,
  randomVector,
  seededRandom,
} from '../support/memory-store-contract.js';

/** Checked once: in CI a missing server fails the file here, elsewhere both suites are skipped. */
const available = chromaAvailable();

/** For raw-client collections in these tests: embeddings are always given, so this never runs. */
const noEmbedding: EmbeddingFunction = { generate: () => Promise.reject(new Error('test: no embedding')) };

describe.skipIf(!available)('ChromaMemoryStore on a real Chroma server', () => {
  let server: ChromaProcess;
  let collections = 0;
  /** A store on a collection no other test uses, so it starts empty. */
  const open = (): Promise<ChromaMemoryStore> => ChromaMemoryStore.connect({ url: server.url, collection: `mem-${++collections}` });

  beforeAll(async () => {
    server = await startChroma();
  });
  afterAll(async () => {
    await server?.stop();
  });

  describeMemoryStoreContract('chroma', open);

  it('drives the MemoryDeduplicator: write-time replace, merge and insert, batch, undo', async () => {
    const store = await open();
    // The first word of a text names its vector; cos(a, b) = 0.96, cos(a, c) = 0.8, d is orthogonal.
    const vectors: Record<string, number[]> = { a: [3, 4, 0, 0], b: [4, 3, 0, 0], c: [0, 5, 0, 0], d: [0, 0, 0, 1] };
    const embed: EmbedFunction = async (texts) => texts.map((t) => vectors[t.split(' ')[0]!]!);
    const merge = async (): Promise<string> => 'a merged';
    const writer = new MemoryDeduplicator({ store, embed, merge, upperThreshold: 0.99, lowerThreshold: 0.9 });
    expect((await writer.checkAndMerge({ id: 'm1', content: 'a first', timestamp: 1 })).decision).toBe('insert');
    const merged = await writer.checkAndMerge({ id: 'm2', content: 'b second', timestamp: 2 });
    expect(merged).toMatchObject({ decision: 'merge', replaced: ['m1'], closestId: 'm1' });
    expect(merged.similarity).toBeCloseTo(0.96, 6);
    expect((await writer.checkAndMerge({ id: 'm3', content: 'd third', timestamp: 3 })).decision).toBe('insert');
    const replacer = new MemoryDeduplicator({ store, embed, upperThreshold: 0.95, lowerThreshold: 0.9 });
    expect((await replacer.checkAndMerge({ id: 'm4', content: 'a fourth', timestamp: 4 })).decision).toBe('replace');
    expect((await store.list()).map((m) => m.content).sort()).toEqual(['a fourth', 'd third']);
    await writer.undo('m1');
    expect((await store.get('m1'))?.content).toBe('a first');

    // Batch: m1 (a) and m4 (a) are the same vector, so all pairs are >= upper: keep the newest.
    const batch = new MemoryDeduplicator({ store, embed, upperThreshold: 0.95, lowerThreshold: 0.9 });
    const before = (await store.list()).map((m) => m.id).sort();
    const dry = await batch.dedupeAll({ dryRun: true });
    expect((await store.list()).map((m) => m.id).sort()).toEqual(before);
    expect(dry.clusters.map((c) => [c.members.map((m) => m.id), c.action])).toEqual([[['m1', 'm4'], 'keep_newest']]);
    const real = await batch.dedupeAll();
    expect(real.clusters.map((c) => c.removedIds)).toEqual([['m1']]);
    expect((await store.list()).map((m) => m.id).sort()).toEqual(['m3', 'm4']);
    await store.close();
  });

  it('keeps the audit log on the server: history and undo survive a new connection', async () => {
    const name = `audited-${++collections}`;
    const vectors: Record<string, number[]> = { a: [1, 0, 0, 0], b: [0.92, Math.sqrt(1 - 0.92 * 0.92), 0, 0] };
    const embed: EmbedFunction = async (texts) => texts.map((t) => vectors[t.split(' ')[0]!]!);
    const first = await ChromaMemoryStore.connect({ url: server.url, collection: name });
    const writer = new MemoryDeduplicator({ store: first, embed, merge: async () => 'a merged', now: () => 1000 });
    await writer.checkAndMerge({ id: 'm1', content: 'a peanuts', timestamp: 1, metadata: { speaker: 'ann' } });
    await writer.checkAndMerge({ id: 'm2', content: 'b peanuts and shellfish', timestamp: 2 });
    const written = await writer.history();
    expect(written.map((e) => [e.seq, e.action, e.memory.id, e.memory.content, e.replacedBy, e.undone])).toEqual([
      [1, 'merged', 'm1', 'a peanuts', 'm2', false],
      [2, 'merged', 'm2', 'b peanuts and shellfish', 'm2', false],
    ]);
    await first.close();

    // Another process (here: another connection and deduplicator) sees the same history.
    const second = await ChromaMemoryStore.connect({ url: server.url, collection: name });
    const reader = new MemoryDeduplicator({ store: second, embed, merge: async () => 'a merged' });
    const read = await reader.history();
    expect(read.map((e) => [e.seq, e.at, e.action, e.memory.id, e.memory.content, e.replacedBy, e.similarity, e.undone])).toEqual(
      written.map((e) => [e.seq, e.at, e.action, e.memory.id, e.memory.content, e.replacedBy, e.similarity, e.undone]),
    );
    expectSameMemory(read[0]!.memory, { id: 'm1', content: 'a peanuts', timestamp: 1, metadata: { speaker: 'ann' }, embedding: f32(1, 0, 0, 0) });
    expect(await reader.undo('m2')).toEqual({ id: 'm2', content: 'b peanuts and shellfish', timestamp: 2 });
    expect((await second.get('m2'))?.content).toBe('b peanuts and shellfish');
    // The merged version it overwrote is audited first (undo('m2') would bring it back).
    expect((await reader.history()).map((e) => [e.seq, e.action, e.memory.id, e.memory.content, e.undone])).toEqual([
      [1, 'merged', 'm1', 'a peanuts', false],
      [2, 'merged', 'm2', 'b peanuts and shellfish', true],
      [3, 'replaced', 'm2', 'a merged', false],
    ]);
    // New entries continue the sequence.
    await reader.checkAndMerge({ id: 'm3', content: 'a again', timestamp: 3 });
    expect((await reader.history()).map((e) => [e.seq, e.memory.id, e.undone])).toEqual([
      [1, 'm1', false],
      [2, 'm2', true],
      [3, 'm2', false],
      [4, 'm2', false],
      [5, 'm3', false],
    ]);
    await second.close();
  });

  it('two instances recording at once lose no audit entry and never share a sequence number', async () => {
    const name = `audit-race-${++collections}`;
    const [a, b] = await Promise.all([
      ChromaMemoryStore.connect({ url: server.url, collection: name }),
      ChromaMemoryStore.connect({ url: server.url, collection: name }),
    ]);
    const entry = (store: string, i: number) => ({
      at: i,
      action: 'replaced' as const,
      memory: memory(`${store}${i}`, f32(1, i, 0, 0), { content: `from ${store} ${i}` }),
      replacedBy: 'x',
      similarity: i / 10,
    });
    const recorded = await Promise.all(Array.from({ length: 8 }, (_, i) => [a.audit.record(entry('a', i)), b.audit.record(entry('b', i))]).flat());
    const seqs = recorded.map((e) => e.seq).sort((x, y) => x - y);
    expect(seqs).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
    const listed = await a.audit.list();
    expect(listed.map((e) => e.seq)).toEqual(seqs);
    expect(listed.map((e) => e.memory.content).sort()).toEqual(recorded.map((e) => e.memory.content).sort());
    for (const e of listed) expect(recorded.find((r) => r.seq === e.seq)?.memory.id).toBe(e.memory.id);
    await a.close();
    await b.close();
  });

  it('connects to the same collection again and sees what another instance wrote', async () => {
    const name = `shared-${++collections}`;
    const writer = await ChromaMemoryStore.connect({ url: server.url, collection: name });
    expect(writer.kind).toBe('chroma');
    const m = memory('s1', f32(1, 2, 3, 4, 5, 6, 7, 8), { timestamp: 42, metadata: { from: 'writer' } });
    await writer.add(m);
    const reader = await ChromaMemoryStore.connect({ url: server.url, collection: name });
    expectSameMemory(await reader.get('s1'), m);
    await expect(reader.add(m)).rejects.toThrow(/ChromaMemoryStore .*add: a memory with id "s1" already exists/);
    await writer.close();
    await reader.close();
  });

  it("serializes one instance's writes: of two concurrent adds of one id, exactly one succeeds", async () => {
    const store = await open();
    const results = await Promise.allSettled([
      store.add(memory('race', f32(1, 0, 0, 0, 0, 0, 0, 0), { content: 'first' })),
      store.add(memory('race', f32(0, 1, 0, 0, 0, 0, 0, 0), { content: 'second' })),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((await store.get('race'))?.content).toBe('first');
    await store.close();
  });

  it('finds every tie at the k-th place, even beyond the candidates first asked for', async () => {
    const store = await open();
    const v = f32(0.5, 0.25, 0, 0, 0, 0, 0, 1);
    // More tied memories than k plus the store's candidate margin, added in scrambled id order.
    const ids = Array.from({ length: 24 }, (_, i) => `tie-${String((i * 7) % 24).padStart(2, '0')}`);
    for (const id of ids) await store.add(memory(id, v));
    await store.add(memory('near', f32(0.5, 0.25, 0, 0, 0, 0, 0, 0.9)));
    const top = await store.nearest(v, 3);
    expect(top.map((r) => r.memory.id)).toEqual(['tie-00', 'tie-01', 'tie-02']);
    for (const r of top) expect(r.similarity).toBeCloseTo(1, 6);
    const many = await store.nearest(v, 25);
    expect(many.map((r) => r.memory.id)).toEqual([...[...ids].sort(), 'near']);
    await store.close();
  });

  it('lists more than one page, and reads records it did not write', async () => {
    const name = `paged-${++collections}`;
    const store = await ChromaMemoryStore.connect({ url: server.url, collection: name });
    // Written straight through the client in batches (one store.add per record would take long):
    // plain Chroma records with a numeric `timestamp` and none of the store's own keys.
    const client = new ChromaClient({ host: '127.0.0.1', port: server.port });
    const raw = await client.getCollection({ name, embeddingFunction: noEmbedding });
    const random = seededRandom(7);
    const total = 2345;
    for (let start = 0; start < total; start += 1000) {
      const ids = Array.from({ length: Math.min(1000, total - start) }, (_, i) => `r${start + i}`);
      await raw.add({
        ids,
        embeddings: ids.map(() => Array.from(randomVector(random, 8))),
        documents: ids.map((id) => `doc ${id}`),
        metadatas: ids.map((_, i) => ({ timestamp: start + i })),
      });
    }
    const all = await store.list();
    expect(all).toHaveLength(total);
    expect(new Set(all.map((m) => m.id)).size).toBe(total);
    const r1234 = all.find((m) => m.id === 'r1234')!;
    expect(r1234.content).toBe('doc r1234');
    expect(r1234.timestamp).toBe(1234);
    expect(r1234.metadata).toBeUndefined();
    expect(r1234.embedding).toHaveLength(8);
    const query = r1234.embedding;
    expectNearest(await store.nearest(query, 4), bruteForceNearest(all, query, 4));
    await store.close();
  });

  it('refuses an existing collection whose distance space is not cosine', async () => {
    const name = `l2-${++collections}`;
    const client = new ChromaClient({ host: '127.0.0.1', port: server.port });
    await client.createCollection({ name, configuration: { hnsw: { space: 'l2' } }, embeddingFunction: noEmbedding });
    await expect(ChromaMemoryStore.connect({ url: server.url, collection: name })).rejects.toThrow(
      /ChromaMemoryStore \(http:\/\/127\.0\.0\.1:\d+, collection 'l2-\d+'\): the collection exists with distance space 'l2', not 'cosine'/,
    );
  });

  it("rejects bad input with a TypeError or RangeError naming the field, and server refusals with the store's name", async () => {
    const store = await open();
    await store.add(memory('ok', f32(1, 0, 0, 0, 0, 0, 0, 0)));
    await expect(store.add(memory('bad', f32(1, 0, 0, 0, 0, 0, 0, 0), { content: 'a\uD800' }))).rejects.toThrow(
      new TypeError('memory.content contains a lone surrogate, which Chroma cannot store'),
    );
    await expect(store.add(memory('nan', f32(1, Number.NaN, 0, 0, 0, 0, 0, 0)))).rejects.toThrow(new RangeError('memory.embedding[1] is NaN'));
    await expect(store.add(memory('', f32(1, 0, 0, 0, 0, 0, 0, 0)))).rejects.toThrow(TypeError);
    await expect(store.add({ ...memory('arr', f32(1)), embedding: [1] as unknown as Float32Array })).rejects.toThrow(
      new TypeError('memory.embedding must be a Float32Array'),
    );
    await expect(store.add(memory('ts', f32(1, 0, 0, 0, 0, 0, 0, 0), { timestamp: Number.POSITIVE_INFINITY }))).rejects.toThrow(TypeError);
    await expect(store.nearest(f32(1, 0, 0, 0, 0, 0, 0, 0), -1)).rejects.toThrow(RangeError);
    await expect(store.nearest(f32(1, 0, 0, 0, 0, 0, 0, 0), 1.5)).rejects.toThrow(RangeError);
    // The dimension is the server's to check.
    await expect(store.add(memory('dim', f32(1, 0, 0)))).rejects.toThrow(
      /ChromaMemoryStore \(http:\/\/127\.0\.0\.1:\d+, collection 'mem-\d+'\): add failed: .*dimension of 8, got 3/,
    );
    await expect(store.nearest(f32(1, 0), 1)).rejects.toThrow(/nearest failed: .*dimension/);
    expect((await store.list()).map((m) => m.id)).toEqual(['ok']);
    await store.close();
    await expect(store.get('ok')).rejects.toThrow(/ChromaMemoryStore .*: the store is closed/);
    await expect(store.add(memory('late', f32(1, 0, 0, 0, 0, 0, 0, 0)))).rejects.toThrow(/the store is closed/);
  });
});

describe.skipIf(!available)('ChromaMemoryStore across server restarts', () => {
  // Made in beforeAll, not while collecting: a skipped suite would leave it behind.
  let data: ReturnType<typeof tempDir>;
  beforeAll(() => {
    data = tempDir('ctxdedup-chroma-persist-');
  });
  afterAll(() => data?.remove());

  it('keeps every memory, field and embedding when the server restarts on the same --path', async () => {
    const random = seededRandom(11);
    const memories = [
      memory('p1', randomVector(random, 384), { content: 'first', timestamp: 1_700_000_000_000, metadata: { a: [1, 2] } }),
      memory('p2', randomVector(random, 384), { content: 'second' }),
      memory('p3', randomVector(random, 384), { content: 'third', timestamp: 3, metadata: { gone: true } }),
    ];
    const first = await startChroma({ path: data.dir });
    let store = await ChromaMemoryStore.connect({ url: first.url, collection: 'persisted' });
    for (const m of memories) await store.add(m);
    // An update that drops fields must survive the restart too (Chroma merges metadata).
    const p3 = memory('p3', memories[2]!.embedding, { content: 'third, updated' });
    await store.update(p3);
    memories[2] = p3;
    await first.stop();

    // The old server is gone: a clear error naming the store, the URL and the operation.
    await expect(store.get('p1')).rejects.toThrow(
      new RegExp(`ChromaMemoryStore \\(${first.url.replace(/[.]/g, '\\.')}, collection 'persisted'\\): get failed: cannot reach the Chroma server`),
    );

    const second = await startChroma({ path: data.dir });
    try {
      store = await ChromaMemoryStore.connect({ url: second.url, collection: 'persisted' });
      const all = (await store.list()).sort((a, b) => (a.id < b.id ? -1 : 1));
      expect(all.map((m) => m.id)).toEqual(['p1', 'p2', 'p3']);
      memories.forEach((m, i) => expectSameMemory(all[i], m));
      const query = randomVector(random, 384);
      expectNearest(await store.nearest(query, 3), bruteForceNearest(memories, query, 3));
      await store.close();
    } finally {
      await second.stop();
    }
  });

  it('an unreachable server fails connect with a clear error', async () => {
    const port = await freePort();
    const started = Date.now();
    await expect(ChromaMemoryStore.connect({ url: `http://127.0.0.1:${port}`, collection: 'nowhere' })).rejects.toThrow(
      `ChromaMemoryStore (http://127.0.0.1:${port}, collection 'nowhere'): connect failed: cannot reach the Chroma server at http://127.0.0.1:${port} (is it running?)`,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('ChromaMemoryStore options (no server needed)', () => {
  it('rejects malformed URLs before any request', async () => {
    await expect(ChromaMemoryStore.connect({ url: 'not a url' })).rejects.toThrow(RangeError);
    await expect(ChromaMemoryStore.connect({ url: 'redis://127.0.0.1:6379' })).rejects.toThrow(/http:\/\/ or https:\/\//);
    await expect(ChromaMemoryStore.connect({ url: 'http://127.0.0.1:8000/prefix' })).rejects.toThrow(/scheme:\/\/host:port only/);
    await expect(ChromaMemoryStore.connect({ url: 'http://user:secret@127.0.0.1:8000' })).rejects.toThrow(/options.headers/);
  });
});
