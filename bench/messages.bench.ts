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

  const exact = await measure(`${SUITE}: ${label} exact`, [
    ['cce analyzeDuplicates', () => analyzeDuplicates(messages, n, PRESERVE)],
    ['dedupeMessages fuzzy:false', () => dedupeMessages(messages, { fuzzy: false })],
    ['reference', () => refAnalyzeDuplicates(messages, n, PRESERVE)],
    ['reference djb2', () => refAnalyzeDuplicatesDjb2(messages, n, PRESERVE)],
  ], DEFAULT_OPTIONS);
  const refExact = get(exact, 'reference');
  const nativeExact = get(exact, 'cce analyzeDuplicates');
  rows.push(opsRow(SUITE, `${label} exact: cce analyzeDuplicates, warm`, nativeExact, refExact, mc, `${formatNumber(mc)} M chars`));
  rows.push(opsRow(SUITE, `${label} exact: dedupeMessages, warm`, get(exact, 'dedupeMessages fuzzy:false'), refExact, mc));
  rows.push(
    opsRow(SUITE, `${label} exact: cce analyzeDuplicates vs djb2-bucket reference`, nativeExact, get(exact, 'reference djb2'), mc, 'CCE-style bucketing: JS djb2 of `${length}:${content}`'),
  );
  // The reference's Map hashes each content once per fresh string; repeated calls hide that.
  const runs = count >= 100_000 ? 5 : 7;
  rows.push(
    msRow(
      SUITE,
      `${label} exact: cce analyzeDuplicates, cold`,
      coldMs(() => clone(messages), (m) => analyzeDuplicates(m, n, PRESERVE), runs),
      coldMs(() => clone(messages), (m) => refAnalyzeDuplicates(m, n, PRESERVE), runs),
      mc,
      `median of ${runs} fresh inputs`,
    ),
  );
  rows.push(
    msRow(
      SUITE,
      `${label} exact: cce analyzeDuplicates vs djb2-bucket reference, cold`,
      coldMs(() => clone(messages), (m) => analyzeDuplicates(m, n, PRESERVE), runs),
      coldMs(() => clone(messages), (m) => refAnalyzeDuplicatesDjb2(m, n, PRESERVE), runs),
      mc,
      `median of ${runs} fresh inputs; CCE-style bucketing`,
    ),
  );

  let lastNative: PairResult | undefined;
  let lastReference: PairResult | undefined;
  const fuzzyCases: Array<[string, () => unknown]> = [
    ['cce exact+fuzzy', () => (lastNative = nativePair(messages))],
    ['dedupeMessages fuzzy:true', () => dedupeMessages(messages, { fuzzy: true, threshold: THRESHOLD })],
    ['reference', () => (lastReference = referencePair(messages))],
  ];
  if (count === 10_000) {
    fuzzyCases.splice(2, 0, ['dedupeMessagesAsync fuzzy:true', () => dedupeMessagesAsync(messages, { fuzzy: true, threshold: THRESHOLD })]);
  }
  const fuzzy = await measure(`${SUITE}: ${label} exact+fuzzy`, fuzzyCases, count >= 100_000 ? HEAVY_OPTIONS : DEFAULT_OPTIONS);
  const found = verify(label, lastNative, lastReference);
  const refFuzzy = get(fuzzy, 'reference');
  rows.push(opsRow(SUITE, `${label} exact+fuzzy: cce pair`, get(fuzzy, 'cce exact+fuzzy'), refFuzzy, mc, found));
  rows.push(opsRow(SUITE, `${label} exact+fuzzy: dedupeMessages`, get(fuzzy, 'dedupeMessages fuzzy:true'), refFuzzy, mc));
  if (count === 10_000) {
    rows.push(opsRow(SUITE, `${label} exact+fuzzy: dedupeMessagesAsync`, get(fuzzy, 'dedupeMessagesAsync fuzzy:true'), refFuzzy, mc, 'off-thread, contents copied first'));
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
        coldMs(() => clone(messages), (m) => (coldNative = nativePair(m)), fuzzyRuns),
        coldMs(() => clone(messages), (m) => (coldReference = referencePair(m)), fuzzyRuns),
        mc,
        `median of ${fuzzyRuns} fresh inputs; ${verify(`${label} cold`, coldNative, coldReference)}`,
      ),
    );
  }
  return rows;
}

/** Runs the messages suite; see the module comment. */
export async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const count of [1_000, 10_000, 100_000]) rows.push(...(await runSize(count)));
  return rows;
}
