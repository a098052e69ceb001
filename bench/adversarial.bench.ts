/**
 * Issue 3, adversarial input: each corpus runs in fresh child processes
 * (bench/adversarial-case.ts) that time one `dedupeMessages` exact + fuzzy call and report peak
 * RSS. The pure-JS reference runs once per corpus too, killed at a time cap
 * (env BENCH_REFERENCE_CAP_S, default 60; 0 skips it), to show how the straightforward
 * algorithm scales on the same input.
 * @module
 */
import type { CaseReport } from './adversarial-case.js';
import { type CaseEngine, type CaseOutcome, referenceCap, spawnCase } from './child-case.js';
import { ADVERSARIAL_CASES, type AdversarialCase } from './corpus.js';
import { formatNumber, type BenchRow } from './harness.js';

const SUITE = 'adversarial';
/** Native runs per corpus (median time, max RSS). */
const NATIVE_RUNS = 3;
/** A native run longer than this is killed and reported as such. */
const NATIVE_CAP_S = 120;

/** Runs one child with a hard time limit; only that child is killed on timeout. */
function runChild(name: AdversarialCase, engine: CaseEngine, capSeconds: number): CaseOutcome<CaseReport> {
  return spawnCase<CaseReport>('adversarial-case.ts', name, engine, capSeconds);
}

function median(values: number[]): number {
  const sorted = values.slice().sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

async function runCase(name: AdversarialCase, capSeconds: number): Promise<BenchRow> {
  const reports: CaseReport[] = [];
  for (let r = 0; r < NATIVE_RUNS; r++) {
    const outcome = runChild(name, 'native', NATIVE_CAP_S);
    if (!outcome.ok) {
      console.log(`  ${SUITE} / ${name} native: ${outcome.reason}`);
      return { suite: SUITE, case: name, native: NATIVE_CAP_S * 1000, baseline: null, ratio: null, unit: 'ms', note: `native ${outcome.reason}` };
    }
    reports.push(outcome.report);
    console.log(`  ${SUITE} / ${name} native: ${formatNumber(outcome.report.ms)} ms, peak RSS ${formatNumber(outcome.report.peakRssMb)} MB`);
  }
  const first = reports[0] as CaseReport;
  const ms = median(reports.map((r) => r.ms));
  const peak = Math.max(...reports.map((r) => r.peakRssMb));
  const row: BenchRow = {
    suite: SUITE,
    case: `${name} (${first.messages} msgs, ${formatNumber(first.megaChars)} M chars)`,
    native: ms,
    baseline: null,
    ratio: null,
    unit: 'ms',
    mbPerSec: first.megaChars / (ms / 1000),
    peakRssMb: peak,
  };
  const notes = [
    `median of ${NATIVE_RUNS} processes`,
    `RSS before call ${formatNumber(median(reports.map((r) => r.rssBeforeMb)))} MB`,
    `${first.exact} exact + ${first.fuzzy} near dups`,
  ];
  if (capSeconds > 0) {
    const ref = runChild(name, 'reference', capSeconds);
    if (ref.ok) {
      row.baseline = ref.report.ms;
      row.ratio = ref.report.ms / ms;
      if (ref.report.exact !== first.exact || ref.report.fuzzy !== first.fuzzy) notes.push('REFERENCE COUNTS DIFFER');
      console.log(`  ${SUITE} / ${name} reference: ${formatNumber(ref.report.ms)} ms`);
    } else {
      row.baseline = capSeconds * 1000;
      row.ratio = (capSeconds * 1000) / ms;
      row.baselineCapped = true;
      notes.push(`reference ${ref.reason}`);
      console.log(`  ${SUITE} / ${name} reference: ${ref.reason}`);
    }
  }
  row.note = notes.join('; ');
  return row;
}

/** Runs the adversarial suite; see the module comment. */
export async function run(): Promise<BenchRow[]> {
  const cap = referenceCap();
  const rows: BenchRow[] = [];
  for (const name of ADVERSARIAL_CASES) rows.push(await runCase(name, cap));
  return rows;
}
