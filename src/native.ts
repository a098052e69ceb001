/**
 * Loads the native addon built from crates/ctxdedup-node and describes its functions.
 * Nothing here decides anything: validation lives in the stage modules, algorithms in Rust.
 * @internal
 * @module
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

/** Options of the native message analysis (validated by the caller). @internal */
export interface NativeAnalyzeOptions {
  minChars: number;
  /** UTF-16 code units of each prefix. */
  skipPrefixes: Uint16Array[];
  keepEarliest: boolean;
  recencyStart: number;
  exact: boolean;
  fuzzyThreshold?: number | undefined;
  /**
   * `true` (the default): a reference only ever points at a message kept in full (annotated
   * messages at `index >= recencyStart` stay in full). `false`: context-compression-engine's
   * behaviour, where an exact duplicate may point at a message replaced as a near duplicate.
   */
  visibleTargets?: boolean | undefined;
}

/** Annotations as parallel columns; exact and fuzzy are disjoint. @internal */
export interface NativeAnalysis {
  exactIndex: Uint32Array;
  exactOf: Uint32Array;
  exactLength: Uint32Array;
  fuzzyIndex: Uint32Array;
  fuzzyOf: Uint32Array;
  fuzzyLength: Uint32Array;
  fuzzySimilarity: Float64Array;
}

/** Options of the native block pass (validated by the caller). @internal */
export interface NativeBlockOptions {
  minLines: number;
  minChars: number;
  lineNumbers: boolean;
  lookback?: number | undefined;
  /** The message stage's eligibility rule (length, skipped prefixes as UTF-16 units). */
  messageMinChars: number;
  skipPrefixes: Uint16Array[];
  /** UTF-16 code units of the reference templates. */
  reference: Uint16Array;
  numberedReference: Uint16Array;
}

/** Block references as parallel columns; `numberedFirst` is 0xFFFFFFFF without numbering. @internal */
export interface NativeBlocks {
  message: Uint32Array;
  lineStart: Uint32Array;
  lineCount: Uint32Array;
  unitStart: Uint32Array;
  unitEnd: Uint32Array;
  outLine: Uint32Array;
  target: Uint32Array;
  targetLine: Uint32Array;
  numberedFirst: Uint32Array;
  targetNumberedFirst: Uint32Array;
  width: Uint32Array;
  separator: Uint32Array;
  tokensBefore: Uint32Array;
  tokensAfter: Uint32Array;
  text: string[];
}

/** Findings paragraphs as parallel columns. @internal */
export interface NativeFindings {
  text: Uint32Array;
  start: Uint32Array;
  end: Uint32Array;
  first: Uint32Array;
}

/** Batch identity for the ingestion index. @internal */
export interface NativeIngestBatch {
  /** 64 lowercase hex characters (SHA-256 of the UTF-8 bytes) per content, in batch order. */
  sha256: string;
  /** For each content, the index of the first content of the batch with the same digest. */
  first: Uint32Array;
}

/** Nearest embeddings of one query, most similar first. @internal */
export interface NativeNearest {
  indices: Uint32Array;
  similarities: Float64Array;
}

/** Clusters flattened: cluster `c` is `members[offsets[c]] .. members[offsets[c + 1] - 1]`. @internal */
export interface NativeClusters {
  members: Uint32Array;
  offsets: Uint32Array;
  minSimilarity: Float64Array;
  maxSimilarity: Float64Array;
}

/** Near duplicates of a batch against a window, per batch item. @internal */
export interface NativeNearMatches {
  /** The matched position: a window index, or window length + batch index; -1 for none. */
  target: Int32Array;
  /** Multiset line Jaccard with the target; NaN for none. */
  similarity: Float64Array;
}

/** The addon's exports. @internal */
export interface NativeBinding {
  sha256Bytes(data: Uint8Array): string;
  sha256String(text: string): string;
  groupExact(contents: string[]): Uint32Array;
  scoredSurvivors(contents: string[], scores: Float64Array): Uint32Array;
  analyzeMessages(
    contents: string[],
    lengths: Uint32Array,
    blocked: Uint8Array,
    fuzzyExcluded: Uint8Array,
    options: NativeAnalyzeOptions,
  ): NativeAnalysis;
  /**
   * `analyzeMessages` with packed options and result (one `Float64Array` each way):
   * `flags[i]` bit 0 blocked, bit 1 kept out of the fuzzy pass; `params` =
   * `[minChars, keepEarliest, recencyStart, exact, fuzzy, fuzzyThreshold, visibleTargets,
   * prefixCount, (length, ...units) per prefix]`; result = `[exactCount, fuzzyCount,
   * (index, of, length) per exact, (index, of, length, similarity) per fuzzy]`.
   */
  analyzeMessagesPacked(contents: string[], lengths: Uint32Array, flags: Uint8Array, params: Float64Array): Float64Array;
  analyzeMessagesAsync(
    contents: string[],
    lengths: Uint32Array,
    blocked: Uint8Array,
    fuzzyExcluded: Uint8Array,
    options: NativeAnalyzeOptions,
  ): Promise<NativeAnalysis>;
  panicForTest(): void;
  blockTemplateError(template: Uint16Array, numbered: boolean): string | null;
  dedupeBlocksSync(contents: string[], ids: string[], source: Uint8Array, blocked: Uint8Array, options: NativeBlockOptions): NativeBlocks;
  dedupeBlocksAsync(
    contents: string[],
    ids: string[],
    source: Uint8Array,
    blocked: Uint8Array,
    options: NativeBlockOptions,
  ): Promise<NativeBlocks>;
  ingestHashBatch(contents: string[]): NativeIngestBatch;
  ingestHashBatchAsync(contents: string[]): Promise<NativeIngestBatch>;
  nearDuplicatesInWindow(window: string[], batch: string[], exclude: Uint8Array, threshold: number): NativeNearMatches;
  nearDuplicatesInWindowAsync(window: string[], batch: string[], exclude: Uint8Array, threshold: number): Promise<NativeNearMatches>;
  /** 64 lowercase hex characters per content longer than `minBytes`, in batch order. */
  resourceChecksums(contents: (string | Uint8Array)[], byteLengths: Float64Array, minBytes: number): string;
  dedupeFindings(texts: string[], minKeyUnits: number): NativeFindings;
  paragraphKeys(paragraphs: string[]): string[];
  findingsNormalizationVersion(): number;
  cosineNearest(embeddings: Float32Array, dim: number, query: Float32Array, k: number): NativeNearest;
  cosineClusters(embeddings: Float32Array, dim: number, threshold: number, complete: boolean): NativeClusters;
  cosineClustersAsync(
    embeddings: Float32Array,
    dim: number,
    threshold: number,
    complete: boolean,
  ): Promise<NativeClusters>;
  embedHashedNgrams(texts: string[], dim: number): Float32Array;
  embedHashedNgramsAsync(texts: string[], dim: number): Promise<Float32Array>;
}

/**
 * napi platform ids this process can load, most likely first, e.g. `linux-x64-gnu`. On Linux
 * both libc flavours are candidates; a binary for the wrong one fails to load and the next is tried.
 */
function platformIds(): string[] {
  const { platform, arch } = process;
  if (platform === 'linux') return [`linux-${arch}-gnu`, `linux-${arch}-musl`];
  if (platform === 'win32') return [`win32-${arch}-msvc`];
  return [`${platform}-${arch}`];
}

/** Where the loaded addon came from (what `ctxdedup doctor` prints). @internal */
export interface NativeOrigin {
  /** The file that was loaded. */
  file: string;
  /** How it was found: the `CTXDEDUP_NATIVE_PATH` override, a build inside the package, or a platform package. */
  via: 'CTXDEDUP_NATIVE_PATH' | 'package build' | 'platform package';
  /** The napi platform id it was loaded as (undefined for the override). */
  platform: string | undefined;
  /** Candidates tried before it, with why they failed to load. */
  failures: string[];
}

let origin: NativeOrigin | undefined;

function load(): NativeBinding {
  const require = createRequire(import.meta.url);
  const ids = platformIds();
  const root = packageRoot();
  const override = process.env['CTXDEDUP_NATIVE_PATH'];
  const candidates: { path: string; via: NativeOrigin['via']; platform: string | undefined }[] = [
    ...(override ? [{ path: override, via: 'CTXDEDUP_NATIVE_PATH' as const, platform: undefined }] : []),
    ...ids
      .map((id) => ({ path: join(root, 'npm', id, `ctxdedup.${id}.node`), via: 'package build' as const, platform: id }))
      .filter((c) => existsSync(c.path)),
    ...ids.map((id) => ({ path: `ctxdedup-${id}`, via: 'platform package' as const, platform: id })),
  ];
  const failures: string[] = [];
  for (const { path: candidate, via, platform } of candidates) {
    try {
      const binding = require(candidate) as NativeBinding;
      origin = { file: require.resolve(candidate), via, platform, failures: failures.slice() };
      return binding;
    } catch (error) {
      failures.push(`${candidate}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(
    `ctxdedup: no native addon for ${ids.join(' / ')}. Build it with \`npm run build:native\` (needs Rust).\n` +
      failures.map((f) => `  tried ${f}`).join('\n'),
  );
}

/** The loaded addon. @internal */
export const native: NativeBinding = load();

/** Where {@link native} was loaded from. @internal */
export const nativeOrigin: NativeOrigin = origin as NativeOrigin;
