/**
 * End-to-end throughput of `ctxdedup dedupe` (read, parse, dedup, write) on a generated sessions
 * JSONL corpus, exact and exact+fuzzy, against the same pipeline with the pure-JS reference dedup
 * (bench/reference/cce.ts, loaded by every worker through bench/cli-reference-engine.mjs).
 *
 *   npx tsx bench/run.ts cli                            # 1 GB corpus
 *   CTXDEDUP_BENCH_MB=200 npx tsx bench/cli.bench.ts    # quicker
 *   CTXDEDUP_BENCH_CORPUS=../shared/corpus npx tsx bench/cli.bench.ts   # real transcripts, x10
 *
 * Every run is a fresh plain Node.js process (bench/cli-child.mjs, without the TypeScript loader,
 * which worker threads would inherit) running the built CLI (dist/, compiled here when stale)
 * with its default `--jobs` (one worker thread per CPU); one more configuration uses `--jobs 1`.
 * Each configuration runs CTXDEDUP_BENCH_REPEAT times (default 3), native and reference
 * interleaved, and the fastest run counts: on a shared 2-core machine a burst of someone else's
 * work halves a single run, so the best run is the one closest to the pipeline's own speed
 * (peak RSS is the largest of the runs). The corpus is written to the OS temp directory before
 * any timing and removed afterwards.
 * @module
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { formatNumber, type BenchRow } from './harness.js';

export type { BenchRow };

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(SELF, '..', '..');
const REFERENCE_ENGINE = pathToFileURL(join(ROOT, 'bench', 'cli-reference-engine.mjs')).href;
/** Runs the built CLI in a plain Node.js process (see the file). */
const CHILD = join(ROOT, 'bench', 'cli-child.mjs');

/** What a child run reports. */
interface ChildResult {
  /** The CLI's own figures: from its start to its report. */
  seconds: number;
  mbPerSec: number;
  sessionsPerSec: number;
  /** VmHWM of the child process, worker threads included. */
  peakRssMb: number;
  /**
   * CPU seconds of the whole child process (every thread, start-up included): on a shared
   * machine a steadier figure than the wall time, since other work delays but does not add to it.
   */
  cpuSeconds: number;
  sessions: number;
  exact: number;
  near: number;
  /** Wall time of the whole child process (start-up and shutdown included), seconds. */
  processSeconds: number;
}

/** What a run deduplicates: exact, exact + fuzzy, or exact + blocks with `--keep earliest`. */
type Mode = 'exact' | 'fuzzy' | 'blocks';

const MODE_ARGS: Record<Mode, string[]> = { exact: [], fuzzy: ['--near'], blocks: ['--keep', 'earliest', '--blocks'] };

function runChild(engine: 'native' | 'js', fuzzy: boolean | Mode, jobs: string, corpus: string, out: string, keepOutput = false): ChildResult {
  const mode: Mode = fuzzy === true ? 'fuzzy' : fuzzy === false ? 'exact' : fuzzy;
  const started = performance.now();
  const args = ['dedupe', corpus, '-o', out, '--json', ...MODE_ARGS[mode], ...(jobs === 'default' ? [] : ['--jobs', jobs])];
  const r = spawnSync(process.execPath, [CHILD, engine === 'js' ? REFERENCE_ENGINE : '', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  const processSeconds = (performance.now() - started) / 1000;
  if (!keepOutput) rmSync(out, { force: true });
  if (r.status !== 0) throw new Error(`child ${engine} ${mode} failed: ${r.stderr}`);
  const result = JSON.parse(r.stdout.trim().split('\n').pop() as string) as Omit<ChildResult, 'processSeconds'>;
  console.log(
    `  cli / ${engine} ${mode === 'fuzzy' ? 'exact+fuzzy' : mode === 'blocks' ? 'exact+blocks --keep earliest' : 'exact'} jobs=${jobs}: ${result.mbPerSec} MB/s, ${result.sessionsPerSec} sessions/s, peak RSS ${Math.round(result.peakRssMb)} MB, ${formatNumber(result.cpuSeconds)} CPU s`,
  );
  return { ...result, processSeconds };
}

/** Compiles dist/ when it is missing or older than src/ (the children run the built CLI). */
function ensureBuilt(): void {
  const bin = join(ROOT, 'dist', 'cli', 'run.js');
  const newest = Math.max(
    ...readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => statSync(join(e.parentPath, e.name)).mtimeMs),
  );
  if (existsSync(bin) && statSync(bin).mtimeMs >= newest) return;
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
}

/** The fastest of several runs, with the largest peak RSS and the range of times. */
function best(runs: readonly ChildResult[]): ChildResult & { range: string } {
  const fastest = [...runs].sort((a, b) => a.seconds - b.seconds)[0] as ChildResult;
  const times = runs.map((r) => r.seconds);
  return {
    ...fastest,
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb)),
    range: `best of ${runs.length} (${formatNumber(Math.min(...times))}–${formatNumber(Math.max(...times))} s)`,
  };
}

function describe(r: ChildResult & { range: string }): string {
  return `${formatNumber(r.mbPerSec)} MB/s, ${formatNumber(r.sessionsPerSec)} sessions/s, peak RSS ${Math.round(r.peakRssMb)} MB, process ${formatNumber(r.processSeconds)} s, ${formatNumber(r.cpuSeconds)} CPU s, ${r.range}`;
}

/** Generates the corpus and measures the pipelines. */
export async function run(): Promise<BenchRow[]> {
  ensureBuilt();
  const mb = Number(process.env['CTXDEDUP_BENCH_MB'] ?? 1000);
  const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-cli-bench-'));
  try {
    // @ts-expect-error -- plain ESM generator script without types
    const { writeSessionsJsonl } = (await import('../examples/make-corpus.mjs')) as {
      writeSessionsJsonl(path: string, bytes: number): Promise<{ bytes: number; sessions: number }>;
    };
    const corpus = join(dir, 'corpus.jsonl');
    const given = process.env['CTXDEDUP_BENCH_CORPUS'];
    const { sessions } =
      given === undefined ? await writeSessionsJsonl(corpus, mb * 1e6) : copyCorpus(given, corpus, Number(process.env['CTXDEDUP_BENCH_CORPUS_REPEAT'] ?? 10));
    const size = statSync(corpus).size;
    const label = `${formatNumber(size / 1e6)} MB, ${sessions.toLocaleString('en-US')} sessions`;
    const workers = `${cpus().length} worker threads`;
    const rows: BenchRow[] = [];
    const repeat = Math.max(1, Number(process.env['CTXDEDUP_BENCH_REPEAT'] ?? 3));
    for (const fuzzy of [false, true]) {
      const natives: ChildResult[] = [];
      const baselines: ChildResult[] = [];
      for (let r = 0; r < repeat; r++) {
        natives.push(runChild('native', fuzzy, 'default', corpus, join(dir, 'out.jsonl')));
        baselines.push(runChild('js', fuzzy, 'default', corpus, join(dir, 'out-js.jsonl')));
      }
      const native = best(natives);
      const baseline = best(baselines);
      // The same messages must be replaced. How they are counted may differ: the CLI keeps every
      // reference pointing at a message kept in full, so an exact copy of a message replaced as a
      // near duplicate counts as near there, where the reference (CCE's rule) leaves the chain.
      if (native.exact + native.near !== baseline.exact + baseline.near || (!fuzzy && native.exact !== baseline.exact) || native.sessions !== sessions) {
        throw new Error(
          `bench: native and JS reference disagree (${native.exact}/${native.near} vs ${baseline.exact}/${baseline.near}); the comparison would be void`,
        );
      }
      rows.push({
        suite: 'cli',
        case: `dedupe ${fuzzy ? 'exact+fuzzy' : 'exact'}, ${label}, ${workers}`,
        native: native.seconds * 1000,
        baseline: baseline.seconds * 1000,
        ratio: baseline.seconds / native.seconds,
        unit: 'ms',
        mbPerSec: native.mbPerSec,
        peakRssMb: native.peakRssMb,
        note: `MB = 10^6 input bytes. native ${describe(native)}; JS reference ${describe(baseline)}`,
      });
    }
    const single = best(Array.from({ length: repeat }, () => runChild('native', false, '1', corpus, join(dir, 'out-1.jsonl'))));
    rows.push({
      suite: 'cli',
      case: `dedupe exact, ${label}, --jobs 1`,
      native: single.seconds * 1000,
      baseline: null,
      ratio: null,
      unit: 'ms',
      mbPerSec: single.mbPerSec,
      peakRssMb: single.peakRssMb,
      note: `everything on the main thread: ${describe(single)}`,
    });
    // Block dedup (native only: the reference engine has no block pass), with the check that
    // the output does not depend on how many workers wrote it.
    const outputs = { default: join(dir, 'out-blocks.jsonl'), one: join(dir, 'out-blocks-1.jsonl') };
    for (const [jobs, out] of [
      ['default', outputs.default],
      ['1', outputs.one],
    ] as const) {
      const runs = Array.from({ length: repeat }, (_, r) => runChild('native', 'blocks', jobs, corpus, out, r === repeat - 1));
      const b = best(runs);
      rows.push({
        suite: 'cli',
        case: `dedupe exact+blocks --keep earliest, ${label}, ${jobs === '1' ? '--jobs 1' : workers}`,
        native: b.seconds * 1000,
        baseline: null,
        ratio: null,
        unit: 'ms',
        mbPerSec: b.mbPerSec,
        peakRssMb: b.peakRssMb,
        note: `native ${describe(b)}`,
      });
    }
    if (!readFileSync(outputs.default).equals(readFileSync(outputs.one))) {
      throw new Error('bench: --blocks output differs between --jobs 1 and the default jobs');
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Writes `repeat` copies of the sessions JSONL files under `from` (a file or a directory;
 * `.jsonl` or `.jsonl.gz`) to `to`, for a corpus of real transcripts large enough to time.
 */
function copyCorpus(from: string, to: string, repeat: number): { sessions: number } {
  const files = statSync(from).isDirectory()
    ? readdirSync(from)
        .filter((f) => /\.jsonl(\.gz)?$/.test(f))
        .sort()
        .map((f) => join(from, f))
    : [from];
  const texts = files.map((f) => {
    const raw = readFileSync(f);
    const text = f.endsWith('.gz') ? gunzipSync(raw) : raw;
    return text.length > 0 && text[text.length - 1] !== 0x0a ? Buffer.concat([text, Buffer.from('\n')]) : text;
  });
  const once = Buffer.concat(texts);
  const sessions = once
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim() !== '').length;
  writeFileSync(to, Buffer.concat(Array.from({ length: repeat }, () => once)));
  return { sessions: sessions * repeat };
}

if (process.argv[1] === SELF) {
  const rows = await run();
  console.table(
    rows.map((r) => ({
      case: r.case,
      ms: r.native.toFixed(0),
      baseline: r.baseline?.toFixed(0),
      ratio: r.ratio?.toFixed(2),
      mbPerSec: r.mbPerSec,
      peakRssMb: r.peakRssMb,
    })),
  );
}
