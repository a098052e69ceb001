/**
 * Shared plumbing of the bench suites: the row type every suite returns, a benny wrapper that
 * returns precise per-case timings, cold (fresh-input) timing, and number formatting.
 * @module
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import b from 'benny';
import { peakRssMb } from '../src/cli/report.js';

/**
 * Peak RSS of the calling process (worker threads included) in MB: `VmHWM` on Linux, because
 * `process.resourceUsage().maxRSS` of a child process starts at its parent's high-water mark.
 */
export { peakRssMb };

/**
 * One line of the results table. `native` and `baseline` are in `unit`: ops/s (higher is better)
 * or ms per call (lower is better). `ratio` is always "how many times faster native is":
 * native ops/s / baseline ops/s, or baseline ms / native ms.
 */
export interface BenchRow {
  suite: string;
  case: string;
  native: number;
  baseline: number | null;
  ratio: number | null;
  /** Default 'ops/s'. '%': a share (of characters saved, say), not a speed; `ratio` is then null. */
  unit?: 'ops/s' | 'ms' | '%';
  /** Native throughput in MB/s, where 1 MB = 10^6 UTF-16 code units of content (`.length`). */
  mbPerSec?: number;
  /** Peak resident set size of the measuring process, in MB. */
  peakRssMb?: number;
  /** The baseline was stopped at a time cap: `baseline` and `ratio` are lower bounds. */
  baselineCapped?: boolean;
  note?: string;
}

/** benny/benchmark.js options used by the suites. */
export interface CaseOptions {
  minSamples: number;
  /** Seconds. */
  maxTime: number;
}

/** Default options: enough samples for a stable median on a 2-core machine, bounded time. */
export const DEFAULT_OPTIONS: CaseOptions = { minSamples: 3, maxTime: 2 };
/** For calls that take seconds: benchmark.js still runs a calibration call plus the samples. */
export const HEAVY_OPTIONS: CaseOptions = { minSamples: 1, maxTime: 0 };

/** Timing of one benny case. */
export interface Measured {
  opsPerSec: number;
  msPerOp: number;
  samples: number;
  /** Relative margin of error, percent. */
  rme: number;
}

/**
 * Runs the cases as one benny suite and returns their timings by name. ops/s is taken from the
 * mean time per op (benny's summary rounds ops/s to integers, useless below 1 op/s).
 */
export async function measure(
  suiteName: string,
  cases: ReadonlyArray<readonly [string, () => unknown]>,
  options: CaseOptions = DEFAULT_OPTIONS,
): Promise<Map<string, Measured>> {
  const summary = await b.suite(
    suiteName,
    ...cases.map(([name, fn]) => b.add(name, fn, options)),
    b.cycle((result: { name: string; details: { mean: number }; samples: number; margin: number }) => {
      const ms = result.details.mean * 1000;
      console.log(`  ${suiteName} / ${result.name}: ${formatMs(ms)} ms/op, ${result.samples} samples, ±${result.margin}%`);
    }),
  );
  const out = new Map<string, Measured>();
  for (const r of summary.results) {
    const mean = r.details.mean;
    out.set(r.name, { opsPerSec: 1 / mean, msPerOp: mean * 1000, samples: r.samples, rme: r.details.relativeMarginOfError });
  }
  return out;
}

/** The timing of case `name`, or an error naming it (a typo must not read as zero). */
export function get(results: Map<string, Measured>, name: string): Measured {
  const m = results.get(name);
  if (m === undefined) throw new Error(`bench: no result for case ${name}`);
  return m;
}

/** V8's full collection (`global.gc`), without having to start node with `--expose-gc`. */
const fullGc = ((): (() => void) => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/** How long the heap is left to settle after a full collection (see {@link coldMs}). */
const SETTLE_MS = 250;

/**
 * A full collection, then a pause without using the CPU: V8 finishes sweeping on background
 * threads after `gc()` returns, and a timed call that starts right away shares the machine with
 * that work (and may be made to finish it); on 2 cores that alone moved the 100k exact figures by
 * 60%.
 */
function settleHeap(): void {
  fullGc();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, SETTLE_MS);
}

/**
 * Median wall time (ms) of `fn` over `runs` calls, each on an input built fresh by `make`
 * (not timed). This is the "first touch" cost a server pays for a freshly parsed request: no
 * V8 string hash is cached yet, and no string has been flattened or compared before.
 *
 * Building a large input leaves garbage-collection work behind (hundreds of MB of parsed
 * strings), which would otherwise land in whichever timed call happens to trigger it; the heap is
 * settled before each timed call ({@link settleHeap}) to keep that debt out of both sides'
 * figures. Each side still pays for the collections its own allocations cause.
 */
export function coldMs<T>(make: () => T, fn: (input: T) => unknown, runs: number): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const input = make();
    settleHeap();
    const start = performance.now();
    fn(input);
    times.push(performance.now() - start);
  }
  times.sort((x, y) => x - y);
  return times[Math.floor((times.length - 1) / 2)] as number;
}

/** A row comparing two benny timings. */
export function opsRow(suite: string, name: string, native: Measured, baseline: Measured | null, megaChars: number, note?: string): BenchRow {
  const row: BenchRow = {
    suite,
    case: name,
    native: native.opsPerSec,
    baseline: baseline === null ? null : baseline.opsPerSec,
    ratio: baseline === null ? null : native.opsPerSec / baseline.opsPerSec,
    unit: 'ops/s',
    mbPerSec: megaChars * native.opsPerSec,
  };
  if (note !== undefined) row.note = note;
  return row;
}

/** A row comparing two wall times in ms. */
export function msRow(suite: string, name: string, nativeMs: number, baselineMs: number | null, megaChars: number, note?: string): BenchRow {
  const row: BenchRow = {
    suite,
    case: name,
    native: nativeMs,
    baseline: baselineMs,
    ratio: baselineMs === null ? null : baselineMs / nativeMs,
    unit: 'ms',
    mbPerSec: megaChars / (nativeMs / 1000),
  };
  if (note !== undefined) row.note = note;
  return row;
}

/** Three significant digits, no exponent for the magnitudes seen here. */
export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(x))));
  return x.toLocaleString('en-US', { maximumFractionDigits: Math.min(digits, 6), minimumFractionDigits: 0 });
}

function formatMs(ms: number): string {
  return formatNumber(ms);
}

/** Megachars (10^6 UTF-16 code units) in a list of contents. */
export function megaChars(contents: Iterable<string>): number {
  let total = 0;
  for (const c of contents) total += c.length;
  return total / 1e6;
}

/** Throws unless both lists hold the same objects in the same order (survivors of a dedup). */
export function assertSameItems(label: string, native: readonly unknown[], baseline: readonly unknown[]): void {
  const same = native.length === baseline.length && native.every((x, i) => x === baseline[i]);
  if (!same) throw new Error(`bench: native and baseline disagree on ${label}; the comparison would be void`);
}

/** Throws unless two annotation maps have equal entries (similarities compared exactly). */
export function assertSameAnnotations(label: string, native: ReadonlyMap<number, unknown>, baseline: ReadonlyMap<number, unknown>): void {
  const sorted = (m: ReadonlyMap<number, unknown>): string => JSON.stringify([...m.entries()].sort((x, y) => x[0] - y[0]));
  if (sorted(native) !== sorted(baseline)) {
    throw new Error(`bench: native and baseline disagree on ${label}; the comparison would be void`);
  }
}
