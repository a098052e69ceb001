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
  skipPrefixes: string[];
  keepEarliest: boolean;
  recencyStart: number;
  exact: boolean;
  fuzzyThreshold?: number | undefined;
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

/** The addon's exports. @internal */
export interface NativeBinding {
  sha256Bytes(data: Uint8Array): string;
  sha256String(text: string): string;
  groupExact(contents: string[]): Uint32Array;
  scoredSurvivors(contents: string[], scores: Float64Array): Uint32Array;
  analyzeMessages(
    contents: string[],
    blocked: Uint8Array,
    fuzzyExcluded: Uint8Array,
    options: NativeAnalyzeOptions,
  ): NativeAnalysis;
  analyzeMessagesAsync(
    contents: string[],
    blocked: Uint8Array,
    fuzzyExcluded: Uint8Array,
    options: NativeAnalyzeOptions,
  ): Promise<NativeAnalysis>;
  panicForTest(): void;
}

/** The napi platform id of this process, e.g. `linux-x64-gnu`. */
function platformId(): string {
  const { platform, arch } = process;
  if (platform === 'linux') {
    const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
    const glibc = report?.header?.glibcVersionRuntime !== undefined || existsSync('/lib/ld-linux-x86-64.so.2');
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'ctxdedup') {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('ctxdedup: cannot locate the package root');
    dir = parent;
  }
}

function load(): NativeBinding {
  const require = createRequire(import.meta.url);
  const id = platformId();
  const override = process.env['CTXDEDUP_NATIVE_PATH'];
  const candidates = [
    ...(override ? [override] : []),
    join(packageRoot(), 'npm', id, `ctxdedup.${id}.node`),
    `ctxdedup-${id}`,
  ];
  const failures: string[] = [];
  for (const candidate of candidates) {
    try {
      return require(candidate) as NativeBinding;
    } catch (error) {
      failures.push(`${candidate}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(
    `ctxdedup: no native addon for ${id}. Build it with \`npm run build:native\` (needs Rust).\n` +
      failures.map((f) => `  tried ${f}`).join('\n'),
  );
}

/** The loaded addon. @internal */
export const native: NativeBinding = load();
