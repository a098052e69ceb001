/**
 * Embedding functions: the contract, and the built-in offline default (hashed word and
 * character-trigram features, computed natively).
 * @module
 */
import { describe, expectArray, expectKnownKeys, expectOptions, optionalNumber, typeError } from '../validation.js';
import { native } from '../native.js';

/** Any async text embedder, e.g. a call to an embeddings API or a local sentence model. */
export type EmbedFunction = (texts: string[]) => Promise<readonly (readonly number[] | Float32Array)[]>;

/** Thresholds that suit one embedder (cosine similarity scales differ between models). */
export interface RecommendedThresholds {
  upper: number;
  lower: number;
}

/** An embed function that also says which thresholds suit it. */
export interface CalibratedEmbedFunction extends EmbedFunction {
  readonly recommendedThresholds: RecommendedThresholds;
  readonly dim: number;
}

/** Options of {@link hashedEmbedding}. */
export interface HashedEmbeddingOptions {
  /** Components per vector. Default 512. */
  dim?: number;
}

/**
 * Thresholds calibrated for the hashed embedding on the bundled calibration set
 * (test/support/fixtures/memory-calibration.json): copies with edits of punctuation, case, spelling or a
 * word or two score above `upper`; rewordings that keep most words fall between the bounds;
 * different facts about the same subject fall below `lower`.
 */
export const HASHED_EMBEDDING_THRESHOLDS: RecommendedThresholds = Object.freeze({ upper: 0.88, lower: 0.7 });

/**
 * The built-in offline embedder: signed feature hashing of words and character trigrams (see
 * `crates/ctxdedup-core/src/hashed_embedding.rs` for the exact features). Deterministic and fast,
 * but lexical: it scores rewordings that share few words as dissimilar. Pass a neural sentence
 * embedder in production; use this for tests, offline tools and as a fallback.
 * @throws TypeError / RangeError for bad options; the returned function rejects with a TypeError
 *   naming the offending text (`texts[1] must be a string`).
 */
export function hashedEmbedding(options: HashedEmbeddingOptions = {}): CalibratedEmbedFunction {
  expectOptions(options);
  expectKnownKeys(options as Record<string, unknown>, 'options', ['dim']);
  const dim = optionalNumber(options.dim, 'options.dim', 512, { min: 1, max: 65536, integer: true });
  const embed = async (texts: string[]): Promise<Float32Array[]> => {
    expectArray(texts, 'texts');
    for (let i = 0; i < texts.length; i++) {
      if (typeof texts[i] !== 'string') typeError(`texts[${i}]`, `must be a string, got ${describe(texts[i])}`);
    }
    const flat = texts.length >= 256 ? await native.embedHashedNgramsAsync(texts, dim) : native.embedHashedNgrams(texts, dim);
    return Array.from({ length: texts.length }, (_, i) => flat.subarray(i * dim, (i + 1) * dim));
  };
  return Object.assign(embed, { recommendedThresholds: HASHED_EMBEDDING_THRESHOLDS, dim });
}
