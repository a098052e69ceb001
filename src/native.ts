/**
 * Loads the native addon built from crates/ctxdedup-node and describes its functions.
 * Nothing here decides anything: validation lives in the stage modules, algorithms in Rust.
 * @internal
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
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
  countTokens(text: string, encoding: string): number;
  countTokensBatch(texts: string[], encoding: string): Uint32Array;
}

/** Whether this Linux process runs on musl rather than glibc (as napi-rs's own loaders decide). */
function isMusl(): boolean {
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    // No ldd (a minimal image): glibc reports its version in the process report, musl does not.
    const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
    return header?.glibcVersionRuntime === undefined;
  }
}

/** The napi platform id of this process, e.g. `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
function platformId(): string {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
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

/**
 * Loads the addon, from (in order) `CTXDEDUP_NATIVE_PATH`, a build from source in this checkout
 * (`npm/<platform>/`, where `npm run build:native` puts it), or the prebuilt per-platform package
 * `ctxdedup-<platform>` (an optional dependency of ctxdedup, which npm installs on that platform
 * only).
 * @throws Error naming the platform and the package to install when none of them loads.
 */
function load(): NativeBinding {
  const require = createRequire(import.meta.url);
  const id = platformId();
  const root = packageRoot();
  const pkg = `ctxdedup-${id}`;
  const override = process.env['CTXDEDUP_NATIVE_PATH'];
  const local = join(root, 'npm', id, `ctxdedup.${id}.node`);
  const candidates: { path: string; via: NativeOrigin['via']; platform: string | undefined }[] = [
    ...(override ? [{ path: override, via: 'CTXDEDUP_NATIVE_PATH' as const, platform: undefined }] : []),
    ...(existsSync(local) ? [{ path: local, via: 'package build' as const, platform: id }] : []),
    { path: pkg, via: 'platform package', platform: id },
  ];
  const failures: string[] = [];
  let packageMissing = false;
  for (const { path: candidate, via, platform } of candidates) {
    try {
      const binding = require(candidate) as NativeBinding;
      origin = { file: require.resolve(candidate), via, platform, failures: failures.slice() };
      return binding;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (candidate === pkg && code === 'MODULE_NOT_FOUND' && String(message).includes(`'${pkg}'`)) {
        packageMissing = true;
      } else {
        failures.push(`${candidate}: ${String(message).split('\n')[0]}`);
      }
    }
  }
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string; optionalDependencies?: Record<string, string> };
  const version = manifest.version ?? 'latest';
  const prebuilt = Object.keys(manifest.optionalDependencies ?? {})
    .filter((name) => name.startsWith('ctxdedup-'))
    .map((name) => name.slice('ctxdedup-'.length));
  const fromSource = 'or build it from source in a clone of the repository (`npm install`, needs Rust: https://rustup.rs)';
  let advice: string;
  if (!prebuilt.includes(id)) {
    advice = `no prebuilt package exists for ${id} (prebuilt: ${prebuilt.join(', ') || 'none'}): ${fromSource}.`;
  } else if (packageMissing) {
    advice =
      `install the package ${pkg}@${version} (\`npm install ${pkg}@${version}\`), ${fromSource}. ` +
      'npm installs it with ctxdedup as an optional dependency, unless optional dependencies were omitted ' +
      '(--omit=optional, --no-optional) or the lockfile was made on another platform.';
  } else {
    advice = `the installed ${pkg} failed to load; reinstall ${pkg}@${version}, ${fromSource}.`;
  }
  throw new Error(
    `ctxdedup: no native addon for ${id} (Node.js ${process.version}): ${advice}` +
      failures.map((f) => `\n  tried ${f}`).join(''),
  );
}

/** The loaded addon. @internal */
export const native: NativeBinding = load();

/** Where {@link native} was loaded from. @internal */
export const nativeOrigin: NativeOrigin = origin as NativeOrigin;
