/**
 * Issue 3, adversarial input: each corpus runs in fresh child processes
 * (bench/adversarial-case.ts) that time one `dedupeMessages` exact + fuzzy call and report peak
 * RSS. The pure-JS reference runs once per corpus too, killed at a time cap
 * (env BENCH_REFERENCE_CAP_S, default 60; 0 skips it), to show how the straightforward
 * algorithm scales on the same input.
 * @module
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CaseReport } from './adversarial-case.js';
import { ADVERSARIAL_CASES, type AdversarialCase } from './corpus.js';
import { formatNumber, type BenchRow } from './harness.js';

const SUITE = 'adversarial';
const HERE = dirname(fileURLToPath(import.meta.url));
const CASE_SCRIPT = join(HERE, 'adversarial-case.ts');
/** Native runs per corpus (median time, max RSS). */
const NATIVE_RUNS = 3;
/** A native run longer than this is killed and reported as such. */
const NATIVE_CAP_S = 120;

type Outcome = { ok: true; report: CaseReport } | { ok: false; reason: string };

/** Runs one child with a hard time limit; only that child is killed on timeout. */
function runChild(name: AdversarialCase, engine: 'native' | 'reference', capSeconds: number): Outcome {
  const child = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', CASE_SCRIPT, name, engine], {
    cwd: join(HERE, '..'),
    encoding: 'utf8',
    timeout: capSeconds * 1000,
    killSignal: 'SIGKILL',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (child.error !== undefined && (child.error as NodeJS.ErrnoException).code === 'ETIMEDOUT') {
    return { ok: false, reason: `killed after ${capSeconds} s` };
  }
  const last = child.stdout.trim().split('\n').pop() ?? '';
  if (child.status !== 0 || !last.startsWith('{')) {
    return { ok: false, reason: `exit ${String(child.status ?? child.signal)}: ${child.stderr.trim().split('\n').slice(-3).join(' | ')}` };
  }
  return { ok: true, report: JSON.parse(last) as CaseReport };
}

function median(values: number[]): number {
  const sorted = values.slice().sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

function referenceCap(): number {
  const raw = process.env['BENCH_REFERENCE_CAP_S'];
  const value = raw === undefined ? 60 : Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : 60;
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
