/**
 * Issue 2: `deduplicate()` (Stage 3, byte-exact dedup of scored items) against a plain `Map`
 * baseline, measured in the same run.
 *
 * - "warm" rows are benny ops/s on one corpus called repeatedly. From the second call on, V8 has
 *   cached every string's hash, which the `Map` baseline profits from and native code cannot.
 * - "cold" rows are the median of single calls on freshly JSON-parsed copies: what a server
 *   pays for a request it has just parsed.
 * - The long-string cases (equal length, differing late) show scaling: time per item at 1k vs 2k.
 * @module
 */
import { SMALL_BATCH } from '../src/index.js';
import { deduplicateVia } from '../src/stages/deduplicate.js';
import { longScoredCorpus, scoredCorpus, type ScoredEntry } from './corpus.js';
import {
  assertSameItems,
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
  type CaseOptions,
} from './harness.js';
import { deduplicateBaseline } from './reference/stage3.js';

const SUITE = 'deduplicate';

interface Corpus {
  name: string;
  items: ScoredEntry[];
  options: CaseOptions;
  /** Fresh-input runs for the cold median. */
  coldRuns: number;
}

function clone(items: readonly ScoredEntry[]): ScoredEntry[] {
  return JSON.parse(JSON.stringify(items)) as ScoredEntry[];
}

async function measureCorpus(c: Corpus): Promise<BenchRow[]> {
  const mc = megaChars(c.items.map((e) => e.item.content));
  // Same survivors, same objects, or the comparison means nothing.
  assertSameItems(c.name, deduplicateVia('native', c.items), deduplicateBaseline(c.items));
  // Small batches take the library's internal fast path under the default ('auto'); measure the
  // native core on them too (the internal 'native' path), so both the default and the addon's
  // own cost are visible.
  const small = c.items.length <= SMALL_BATCH;
  const engines: Array<'auto' | 'native'> = small ? ['auto', 'native'] : ['auto'];
  const label = (engine: 'auto' | 'native'): string => (small ? `engine ${engine}` : '');
  const cases: Array<[string, () => unknown]> = engines.map((engine) => [`native ${engine}`, () => deduplicateVia(engine, c.items)]);
  cases.push(['baseline', () => deduplicateBaseline(c.items)]);
  const results = await measure(`${SUITE}: ${c.name}`, cases, c.options);
  const baseline = get(results, 'baseline');
  const rows: BenchRow[] = [];
  for (const engine of engines) {
    const name = [c.name, label(engine), 'warm'].filter((x) => x !== '').join(', ');
    rows.push(opsRow(SUITE, name, get(results, `native ${engine}`), baseline, mc, `${formatNumber(mc)} M chars`));
  }
  if (c.coldRuns > 0) {
    const baselineCold = coldMs(
      () => clone(c.items),
      (items) => deduplicateBaseline(items),
      c.coldRuns,
    );
    for (const engine of engines) {
      const nativeCold = coldMs(
        () => clone(c.items),
        (items) => deduplicateVia(engine, items),
        c.coldRuns,
      );
      const name = [c.name, label(engine), 'cold'].filter((x) => x !== '').join(', ');
      rows.push(msRow(SUITE, name, nativeCold, baselineCold, mc, `median of ${c.coldRuns} fresh inputs`));
    }
  }
  return rows;
}

/** Runs the deduplicate suite; see the module comment. */
export async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const random: Array<[string, number, CaseOptions, number]> = [
    ['100 items x 1-4 KB, 30% dup', 100, DEFAULT_OPTIONS, 200],
    ['10k items x 1-4 KB, 30% dup', 10_000, DEFAULT_OPTIONS, 9],
    ['100k items x 1-4 KB, 30% dup', 100_000, DEFAULT_OPTIONS, 3],
  ];
  for (const [name, count, options, coldRuns] of random) {
    const items = scoredCorpus({ count, minChars: 1024, maxChars: 4096, duplicateRate: 0.3, seed: 1 });
    rows.push(...(await measureCorpus({ name, items, options, coldRuns })));
  }

  // Equal-length long strings: time per item should stay flat from 1k to 2k items.
  const perItem: Array<{ native: number; baseline: number }> = [];
  for (const count of [1_000, 2_000]) {
    const items = longScoredCorpus(count, 20_000, 2);
    const name = `${count / 1000}k distinct items x 20,000 chars (equal length)`;
    const r = await measureCorpus({ name, items, options: HEAVY_OPTIONS, coldRuns: 0 });
    const row = r[0] as BenchRow;
    const us = { native: 1e6 / row.native / count, baseline: 1e6 / (row.baseline as number) / count };
    perItem.push(us);
    row.note = `${row.note ?? ''}; µs/item: native ${formatNumber(us.native)}, baseline ${formatNumber(us.baseline)}`;
    rows.push(...r);
  }
  const [at1k, at2k] = perItem as [{ native: number; baseline: number }, { native: number; baseline: number }];
  const last = rows[rows.length - 1] as BenchRow;
  last.note +=
    `; µs/item 2k ÷ 1k: native ${formatNumber(at2k.native / at1k.native)}, ` +
    `baseline ${formatNumber(at2k.baseline / at1k.baseline)} (1 = linear, 2 = quadratic)`;
  return rows;
}
