/**
 * Loads the native addon built from crates/ctxdedup-node and describes its functions.
 * Nothing here decides anything: validation lives in the stage modules, algorithms in Rust.
 * @internal
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  analyzeMessagesAsync(
    contents: string[],
    lengths: Uint32Array,
    blocked: Uint8Array,
    fuzzyExcluded: Uint8Array,
    options: NativeAnalyzeOptions,
  ): Promise<NativeAnalysis>;
  panicForTest(): void;
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

interface Manifest {
  name?: string;
  version?: string;
  optionalDependencies?: Record<string, string>;
}

/** The directory and manifest of the ctxdedup package this module belongs to. */
function packageRoot(): { dir: string; manifest: Manifest } {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const path = join(dir, 'package.json');
    if (existsSync(path)) {
      const manifest = JSON.parse(readFileSync(path, 'utf8')) as Manifest;
      if (manifest.name === 'ctxdedup') return { dir, manifest };
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('ctxdedup: cannot locate the package root');
    dir = parent;
  }
}

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
  const { dir: root, manifest } = packageRoot();
  const binary = `ctxdedup.${id}.node`;
  const pkg = `ctxdedup-${id}`;
  const override = process.env['CTXDEDUP_NATIVE_PATH'];
  const local = join(root, 'npm', id, binary);
  const candidates = [...(override ? [override] : []), ...(existsSync(local) ? [local] : []), pkg];
  const failures: string[] = [];
  let packageMissing = false;
  for (const candidate of candidates) {
    try {
      return require(candidate) as NativeBinding;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (candidate === pkg && code === 'MODULE_NOT_FOUND' && String(message).includes(`'${pkg}'`)) {
        packageMissing = true;
      } else {
        failures.push(`${candidate}: ${String(message).split('\n')[0]}`);
      }
    }
  }
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
