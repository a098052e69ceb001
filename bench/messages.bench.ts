/**
 * Issue 3: message dedup (exact, and exact + fuzzy at threshold 0.85) on synthetic agent
 * transcripts of 1k, 10k and 100k messages, against the pure-JS CCE reference
 * (bench/reference/cce.ts, checked against the golden vectors), measured in the same run.
 *
 * Native is measured twice: through `ctxdedup/cce` (`analyzeDuplicates`, then
 * `analyzeFuzzyDuplicates`, exactly the calls and outputs of the reference, so the ratio compares
 * equal work) and through `dedupeMessages()` (one native call, plus building the rewritten
 * conversation, decisions and stats; more work than the reference does).
 *
 * The exact pass is also compared with a second reference that buckets by a JS djb2 hash as
 * CCE does (README §3), which costs more than a plain `Map` and is closer to CCE's own cost.
 * @module
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { analyzeDuplicates, analyzeFuzzyDuplicates } from '../src/compat/cce.js';
import { dedupeMessages, dedupeMessagesAsync } from '../src/index.js';
import { transcript, type TranscriptMessage } from './corpus.js';
import {
  assertSameAnnotations,
  coldMs,
  DEFAULT_OPTIONS,
  formatNumber,
  get,
  HEAVY_OPTIONS,
  measure,
  megaChars,
  msRow,
  opsRow,
  type BenchRow,
} from './harness.js';
import { refAnalyzeDuplicates, refAnalyzeDuplicatesDjb2, refAnalyzeFuzzyDuplicates } from './reference/cce.js';

const SUITE = 'messages';
const THRESHOLD = 0.85;
const PRESERVE: ReadonlySet<string> = new Set(['system']);

/** Annotations of one exact + fuzzy run. */
interface PairResult {
  exact: Map<number, unknown>;
  fuzzy: Map<number, unknown>;
}

/** CCE's exact + fuzzy sequence through the native compat layer. */
function nativePair(messages: readonly TranscriptMessage[]): PairResult {
  const n = messages.length;
  const exact = analyzeDuplicates(messages, n, PRESERVE);
  return { exact, fuzzy: analyzeFuzzyDuplicates(messages, n, PRESERVE, exact, THRESHOLD) };
}

/** The same sequence through the pure-JS reference. */
function referencePair(messages: readonly TranscriptMessage[]): PairResult {
  const n = messages.length;
  const exact = refAnalyzeDuplicates(messages, n, PRESERVE);
  return { exact, fuzzy: refAnalyzeFuzzyDuplicates(messages, n, PRESERVE, exact, THRESHOLD) };
}

/**
 * Fails the run if native and reference annotate differently: unequal work is no benchmark.
 * The results come from the timed calls themselves, so the slow reference runs no extra time.
 */
function verify(label: string, native: PairResult | undefined, reference: PairResult | undefined): string {
  if (native === undefined || reference === undefined) throw new Error(`bench: ${label} produced no result`);
  assertSameAnnotations(`${label} exact`, native.exact, reference.exact);
  assertSameAnnotations(`${label} fuzzy`, native.fuzzy, reference.fuzzy);
  return `${native.exact.size} exact + ${native.fuzzy.size} near duplicates`;
}

function clone(messages: readonly TranscriptMessage[]): TranscriptMessage[] {
  return JSON.parse(JSON.stringify(messages)) as TranscriptMessage[];
}

async function runSize(count: number): Promise<BenchRow[]> {
  const label = `${count / 1000}k msgs`;
  const messages = transcript(count, 42);
  const mc = megaChars(messages.map((m) => m.content));
  const n = messages.length;
  const rows: BenchRow[] = [];
  const exactNative = analyzeDuplicates(messages, n, PRESERVE);
  assertSameAnnotations(`${label} exact`, exactNative, refAnalyzeDuplicates(messages, n, PRESERVE));
  assertSameAnnotations(`${label} exact (djb2)`, exactNative, refAnalyzeDuplicatesDjb2(messages, n, PRESERVE));

  const exact = await measure(
    `${SUITE}: ${label} exact`,
    [
      ['cce analyzeDuplicates', () => analyzeDuplicates(messages, n, PRESERVE)],
      ['dedupeMessages fuzzy:false', () => dedupeMessages(messages, { near: false })],
      ['reference', () => refAnalyzeDuplicates(messages, n, PRESERVE)],
      ['reference djb2', () => refAnalyzeDuplicatesDjb2(messages, n, PRESERVE)],
    ],
    DEFAULT_OPTIONS,
  );
  const refExact = get(exact, 'reference');
  const nativeExact = get(exact, 'cce analyzeDuplicates');
  rows.push(opsRow(SUITE, `${label} exact: cce analyzeDuplicates, warm`, nativeExact, refExact, mc, `${formatNumber(mc)} M chars`));
  rows.push(opsRow(SUITE, `${label} exact: dedupeMessages, warm`, get(exact, 'dedupeMessages fuzzy:false'), refExact, mc));
  rows.push(
    opsRow(
      SUITE,
      `${label} exact: cce analyzeDuplicates vs djb2-bucket reference`,
      nativeExact,
      get(exact, 'reference djb2'),
      mc,
      'CCE-style bucketing: JS djb2 of `${length}:${content}`',
    ),
  );
  // The reference's Map hashes each content once per fresh string; repeated calls hide that.
  const runs = count >= 100_000 ? 5 : 7;
  const nativeCold = coldMs(
    () => clone(messages),
    (m) => analyzeDuplicates(m, n, PRESERVE),
    runs,
  );
  for (const [name, reference, note] of [
    ['cce analyzeDuplicates, cold', refAnalyzeDuplicates, `median of ${runs} fresh inputs`],
    ['cce analyzeDuplicates vs djb2-bucket reference, cold', refAnalyzeDuplicatesDjb2, `median of ${runs} fresh inputs; CCE-style bucketing`],
  ] as const) {
    const referenceCold = coldMs(
      () => clone(messages),
      (m) => reference(m, n, PRESERVE),
      runs,
    );
    rows.push(msRow(SUITE, `${label} exact: ${name}`, nativeCold, referenceCold, mc, note));
  }

  let lastNative: PairResult | undefined;
  let lastReference: PairResult | undefined;
  const fuzzyCases: Array<[string, () => unknown]> = [
    ['cce exact+fuzzy', () => (lastNative = nativePair(messages))],
    ['dedupeMessages fuzzy:true', () => dedupeMessages(messages, { near: true, threshold: THRESHOLD })],
    ['reference', () => (lastReference = referencePair(messages))],
  ];
  if (count === 10_000) {
    fuzzyCases.splice(2, 0, ['dedupeMessagesAsync fuzzy:true', () => dedupeMessagesAsync(messages, { near: true, threshold: THRESHOLD })]);
  }
  const fuzzy = await measure(`${SUITE}: ${label} exact+fuzzy`, fuzzyCases, count >= 100_000 ? HEAVY_OPTIONS : DEFAULT_OPTIONS);
  const found = verify(label, lastNative, lastReference);
  const refFuzzy = get(fuzzy, 'reference');
  rows.push(opsRow(SUITE, `${label} exact+fuzzy: cce pair`, get(fuzzy, 'cce exact+fuzzy'), refFuzzy, mc, found));
  rows.push(opsRow(SUITE, `${label} exact+fuzzy: dedupeMessages`, get(fuzzy, 'dedupeMessages fuzzy:true'), refFuzzy, mc));
  if (count === 10_000) {
    rows.push(
      opsRow(
        SUITE,
        `${label} exact+fuzzy: dedupeMessagesAsync`,
        get(fuzzy, 'dedupeMessagesAsync fuzzy:true'),
        refFuzzy,
        mc,
        'off-thread, contents copied first',
      ),
    );
  }
  if (count >= 100_000) {
    // The warm row above is one call per side, timed in whatever state the heap is in; the
    // reference allocates heavily, so its figure moves with that state (18-37 s across runs).
    // Fresh inputs on a settled heap give both sides the same conditions.
    const fuzzyRuns = 3;
    let coldNative: PairResult | undefined;
    let coldReference: PairResult | undefined;
    rows.push(
      msRow(
        SUITE,
        `${label} exact+fuzzy: cce pair, cold`,
        coldMs(
          () => clone(messages),
          (m) => (coldNative = nativePair(m)),
          fuzzyRuns,
        ),
        coldMs(
          () => clone(messages),
          (m) => (coldReference = referencePair(m)),
          fuzzyRuns,
        ),
        mc,
        `median of ${fuzzyRuns} fresh inputs; ${verify(`${label} cold`, coldNative, coldReference)}`,
      ),
    );
  }
  return rows;
}

/** Latency percentiles of one side, in ms. */
interface Latency {
  p50: number;
  p99: number;
  /** Sum over all calls. */
  total: number;
}

function percentiles(times: number[]): Latency {
  const sorted = [...times].sort((x, y) => x - y);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
  return { p50: at(0.5), p99: at(0.99), total: times.reduce((a, b) => a + b, 0) };
}

/**
 * Per-call latency of native and reference on the same inputs, each call on its own freshly
 * JSON-parsed copy (not timed): a request a server has just parsed, strings unhashed. The two
 * sides alternate input by input (which goes first alternates too), so a burst of load on the
 * shared machine hits both. Warm-up calls first, so neither side is timed while V8 compiles it.
 */
function latency(inputs: readonly string[], native: (m: TranscriptMessage[]) => unknown, reference: (m: TranscriptMessage[]) => unknown): [Latency, Latency] {
  const parse = (k: number): TranscriptMessage[] => JSON.parse(inputs[k % inputs.length] as string) as TranscriptMessage[];
  for (let k = 0; k < 50; k++) {
    native(parse(k));
    reference(parse(k));
  }
  const timesNative: number[] = [];
  const timesReference: number[] = [];
  for (let k = 0; k < inputs.length; k++) {
    const a = parse(k);
    const b = parse(k);
    const time = (fn: (m: TranscriptMessage[]) => unknown, m: TranscriptMessage[], into: number[]): void => {
      const start = performance.now();
      fn(m);
      into.push(performance.now() - start);
    };
    if (k % 2 === 0) {
      time(native, a, timesNative);
      time(reference, b, timesReference);
    } else {
      time(reference, b, timesReference);
      time(native, a, timesNative);
    }
  }
  return [percentiles(timesNative), percentiles(timesReference)];
}

function latencyRow(name: string, [native, reference]: [Latency, Latency], megaChars: number, calls: number): BenchRow {
  const us = (ms: number): string => `${formatNumber(ms * 1000)} µs`;
  return {
    ...msRow(SUITE, name, native.p50, reference.p50, megaChars / calls),
    note: `p50 ${us(native.p50)} vs ${us(reference.p50)}; p99 ${us(native.p99)} vs ${us(reference.p99)} (×${formatNumber(reference.p99 / native.p99)}); total ×${formatNumber(reference.total / native.total)} over ${calls} calls`,
  };
}

/** The calls compared per conversation, each with its reference. */
function latencyCases(inputs: readonly string[], label: string, megaChars: number): BenchRow[] {
  const calls = inputs.length;
  const pair = (m: TranscriptMessage[]): unknown => nativePair(m);
  const refPair = (m: TranscriptMessage[]): unknown => referencePair(m);
  const exact = (m: TranscriptMessage[]): unknown => analyzeDuplicates(m, m.length, PRESERVE);
  return [
    latencyRow(
      `${label} exact: cce analyzeDuplicates vs djb2 reference, per call`,
      latency(inputs, exact, (m) => refAnalyzeDuplicatesDjb2(m, m.length, PRESERVE)),
      megaChars,
      calls,
    ),
    latencyRow(
      `${label} exact: cce analyzeDuplicates vs Map reference, per call`,
      latency(inputs, exact, (m) => refAnalyzeDuplicates(m, m.length, PRESERVE)),
      megaChars,
      calls,
    ),
    latencyRow(
      `${label} exact: dedupeMessages vs djb2 reference, per call`,
      latency(
        inputs,
        (m) => dedupeMessages(m, { near: false }),
        (m) => refAnalyzeDuplicatesDjb2(m, m.length, PRESERVE),
      ),
      megaChars,
      calls,
    ),
    latencyRow(`${label} exact+fuzzy: cce pair vs reference pair, per call`, latency(inputs, pair, refPair), megaChars, calls),
    latencyRow(
      `${label} exact+fuzzy: dedupeMessages vs reference pair, per call`,
      latency(inputs, (m) => dedupeMessages(m, { near: true, threshold: THRESHOLD }), refPair),
      megaChars,
      calls,
    ),
  ];
}

/** Sessions of the development corpus (real agent transcripts), as JSON texts of their messages. */
function realSessions(): string[] {
  const dir = join(fileURLToPath(import.meta.url), '..', '..', '..', 'shared', 'corpus');
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl.gz'))
    .sort()) {
    for (const line of gunzipSync(readFileSync(join(dir, name)))
      .toString('utf8')
      .split('\n')) {
      if (line.trim() === '') continue;
      const messages = (JSON.parse(line) as { messages?: TranscriptMessage[] }).messages;
      if (Array.isArray(messages)) out.push(JSON.stringify(messages));
    }
  }
  return out;
}

/**
 * Per-call latency on conversations of the size people send: windows of 10, 40 and 200
 * messages of the synthetic transcript (each call a different window), and every session of
 * the real development corpus (shared/corpus) when it is present.
 */
export async function runLatency(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const base = transcript(1_000, 42);
  for (const size of [10, 40, 200]) {
    const calls = size === 200 ? 300 : 1000;
    const inputs: string[] = [];
    let chars = 0;
    for (let k = 0; k < calls; k++) {
      const from = (k * 37) % (base.length - size);
      const window = base.slice(from, from + size);
      chars += window.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.length : 0), 0);
      inputs.push(JSON.stringify(window));
    }
    const check = JSON.parse(inputs[1] as string) as TranscriptMessage[];
    verify(`${size} msgs window`, nativePair(check), referencePair(check));
    rows.push(...latencyCases(inputs, `${size} msgs`, chars / 1e6));
  }
  const sessions = realSessions();
  if (sessions.length > 0) {
    let chars = 0;
    let count = 0;
    for (const text of sessions) {
      const messages = JSON.parse(text) as TranscriptMessage[];
      verify('real session', nativePair(messages), referencePair(messages));
      count += messages.length;
      chars += messages.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.length : 0), 0);
    }
    const label = `real sessions (${sessions.length}, ${formatNumber(count / sessions.length)} msgs avg)`;
    // Several rounds over the 167 sessions, so p99 is not one call.
    const rounds = Array.from({ length: 6 }, () => sessions).flat();
    rows.push(...latencyCases(rounds, label, (6 * chars) / 1e6));
  }
  return rows;
}

/** Runs the messages suite; see the module comment. `CTXDEDUP_BENCH_LATENCY_ONLY=1`: only the per-call latency rows. */
export async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = await runLatency();
  if (process.env['CTXDEDUP_BENCH_LATENCY_ONLY'] === '1') return rows;
  for (const count of [1_000, 10_000, 100_000]) rows.push(...(await runSize(count)));
  return rows;
}
