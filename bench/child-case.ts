/**
 * One adversarial case in a fresh child process, for the suites that report peak RSS (a
 * high-water mark, so one process per run) and must be able to kill a run that blows up:
 * the child side ({@link runChildCase}, called by `*-case.ts` scripts) and the parent side
 * ({@link spawnCase}).
 * @module
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { megaChars, peakRssMb } from './harness.js';

/** Which implementation a child runs. */
export type CaseEngine = 'native' | 'reference';

/** What every child reports; a suite adds its own counts. */
export interface CaseReportBase<C extends string> {
  case: C;
  engine: CaseEngine;
  messages: number;
  megaChars: number;
  ms: number;
  /** Peak RSS after building the corpus (and a GC), before the call. */
  rssBeforeMb: number;
  /** Peak RSS after the call: the high-water mark of the whole process. */
  peakRssMb: number;
}

/** What a suite's timed call returns to {@link runChildCase}. */
export interface CaseMeasure<X> {
  ms: number;
  /** Peak RSS right after the call, when the suite does more work before reporting. */
  peakRssMb?: number;
  counts: X;
}

/**
 * The child side: reads `<case> [native|reference]` from argv, builds the corpus, runs
 * `prepare` (outside the RSS baseline's GC), times `measure` and prints one JSON line.
 */
export function runChildCase<C extends string, M extends { content: string }, X extends object>(
  script: string,
  cases: readonly C[],
  corpus: (name: C) => M[],
  measure: (engine: CaseEngine, messages: M[]) => CaseMeasure<X>,
  prepare?: () => void,
): void {
  const name = process.argv[2] as C;
  const engine = process.argv[3] ?? 'native';
  if (!cases.includes(name) || (engine !== 'native' && engine !== 'reference')) {
    console.error(`usage: ${script} <${cases.join('|')}> [native|reference]`);
    process.exit(2);
  }
  const messages = corpus(name);
  prepare?.();
  (globalThis as { gc?: () => void }).gc?.();
  const rssBeforeMb = peakRssMb();
  const result = measure(engine, messages);
  const report: CaseReportBase<C> & X = {
    case: name,
    engine,
    messages: messages.length,
    megaChars: megaChars(messages.map((m) => m.content)),
    ms: result.ms,
    rssBeforeMb,
    peakRssMb: result.peakRssMb ?? peakRssMb(),
    ...result.counts,
  };
  console.log(JSON.stringify(report));
}

const BENCH = dirname(fileURLToPath(import.meta.url));

/** A child's report, or why there is none. */
export type CaseOutcome<R> = { ok: true; report: R } | { ok: false; reason: string };

/** The parent side: runs `bench/<script>` for one case with a hard time limit (only that child is killed). */
export function spawnCase<R>(script: string, name: string, engine: CaseEngine, capSeconds: number): CaseOutcome<R> {
  const child = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(BENCH, script), name, engine], {
    cwd: join(BENCH, '..'),
    encoding: 'utf8',
    timeout: capSeconds * 1000,
    killSignal: 'SIGKILL',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (child.error !== undefined && (child.error as NodeJS.ErrnoException).code === 'ETIMEDOUT') return { ok: false, reason: `killed after ${capSeconds} s` };
  const last = child.stdout.trim().split('\n').pop() ?? '';
  if (child.status !== 0 || !last.startsWith('{')) {
    return { ok: false, reason: `exit ${String(child.status ?? child.signal)}: ${child.stderr.trim().split('\n').slice(-3).join(' | ')}` };
  }
  return { ok: true, report: JSON.parse(last) as R };
}

/** Seconds the reference gets per case (env BENCH_REFERENCE_CAP_S, default 60; 0 skips it). */
export function referenceCap(): number {
  const raw = process.env['BENCH_REFERENCE_CAP_S'];
  const value = raw === undefined ? 60 : Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : 60;
}
