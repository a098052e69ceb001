/**
 * Runs the bench suites and writes bench/results/latest.md (gitignored), then prints it.
 *
 *   npm run bench                      # every suite
 *   npx tsx bench/run.ts deduplicate   # one suite (or several, space-separated)
 *
 * Build the release addon first (`npm run build`): the suites import the library from ../src
 * and load whatever addon is in npm/<platform>/.
 *
 * Suite interface: every `bench/<name>.bench.ts` is a suite called `<name>`. It exports
 *
 *   export async function run(): Promise<BenchRow[]>
 *
 * where BenchRow (bench/harness.ts) is
 *   { suite, case, native, baseline, ratio, unit?, mbPerSec?, peakRssMb?, baselineCapped?, note? }
 * - `native` and `baseline` are in `unit`: 'ops/s' (default; higher is better), 'ms' per call, or '%'
 *   (a share such as characters saved, not a speed);
 *   `baseline` is null when there is none;
 * - `ratio` is how many times faster native is (native ops/s ÷ baseline ops/s, or baseline ms ÷
 *   native ms), null without a baseline;
 * - `mbPerSec`: 1 MB = 10^6 UTF-16 code units of content (`.length`), not bytes;
 * - `baselineCapped`: the baseline was killed at a time cap, so baseline and ratio are lower bounds.
 * Suites run in the order deduplicate, messages, adversarial, blocks, then the others alphabetically.
 * A suite that throws becomes a "suite failed" row (and exit code 1); the others still report.
 * @module
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { formatNumber, type BenchRow } from './harness.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const PREFERRED = ['deduplicate', 'messages', 'adversarial', 'blocks'];

interface SuiteModule {
  run(): Promise<BenchRow[]>;
}

function availableSuites(): string[] {
  const names = readdirSync(HERE)
    .filter((f) => f.endsWith('.bench.ts'))
    .map((f) => f.slice(0, -'.bench.ts'.length));
  const rank = (n: string): number => (PREFERRED.includes(n) ? PREFERRED.indexOf(n) : PREFERRED.length);
  return names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function value(x: number, unit: 'ops/s' | 'ms' | '%'): string {
  return `${formatNumber(x)} ${unit}`;
}

function toMarkdown(rows: readonly BenchRow[]): string {
  const lines = [
    '| suite | case | native | baseline | ratio (× faster) | native MB/s | peak RSS MB | note |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    const unit = r.unit ?? 'ops/s';
    const capped = r.baselineCapped === true ? '> ' : '';
    const cells = [
      r.suite,
      r.case,
      value(r.native, unit),
      r.baseline === null ? '–' : capped + value(r.baseline, unit),
      r.ratio === null ? '–' : `${capped}${formatNumber(r.ratio)}×`,
      r.mbPerSec === undefined ? '' : formatNumber(r.mbPerSec),
      r.peakRssMb === undefined ? '' : formatNumber(r.peakRssMb),
      (r.note ?? '').replace(/\|/g, '\\|'),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** Facts that decide whether two result files are comparable. */
function environment(started: Date, loadStart: number[]): string {
  const addonDir = join(ROOT, 'npm');
  const addons = existsSync(addonDir) ? readdirSync(addonDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.node')) : [];
  const addonInfo = addons
    .map((f) => {
      const s = statSync(join(addonDir, f));
      return `npm/${f} (${formatNumber(s.size / 1024)} KB, built ${s.mtime.toISOString()})`;
    })
    .join(', ');
  let commit = 'unknown';
  try {
    // Read-only: which commit the source tree is based on, and whether it has local changes.
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim();
    if (dirty !== '') commit += ' + local changes';
  } catch {
    // Not a git checkout: leave "unknown".
  }
  const la = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' ');
  return [
    `- date: ${started.toISOString()}, duration ${formatNumber((Date.now() - started.getTime()) / 1000)} s`,
    `- node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}`,
    `- load average at start / end: ${la(loadStart)} / ${la(loadavg())} (other processes skew figures)`,
    `- source: ${commit}; addon: ${addonInfo || 'none found'}`,
  ].join('\n');
}

async function main(): Promise<void> {
  const available = availableSuites();
  const requested = process.argv.slice(2);
  const unknown = requested.filter((n) => !available.includes(n));
  if (unknown.length > 0) {
    console.error(`unknown suite(s): ${unknown.join(', ')}; available: ${available.join(', ')}`);
    process.exit(2);
  }
  const selected = requested.length > 0 ? available.filter((n) => requested.includes(n)) : available;
  const started = new Date();
  const loadStart = loadavg();
  const rows: BenchRow[] = [];
  for (const name of selected) {
    console.log(`\n== suite ${name} ==`);
    const t0 = performance.now();
    // One failing suite must not cost the figures of the others: it becomes a row of its own.
    try {
      const mod = (await import(pathToFileURL(join(HERE, `${name}.bench.ts`)).href)) as Partial<SuiteModule>;
      if (typeof mod.run !== 'function') throw new Error(`bench/${name}.bench.ts does not export run()`);
      rows.push(...(await mod.run()));
      console.log(`== suite ${name} done in ${formatNumber((performance.now() - t0) / 1000)} s ==`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      console.error(`== suite ${name} FAILED: ${message}`);
      rows.push({ suite: name, case: 'suite failed', native: Number.NaN, baseline: null, ratio: null, note: message.split('\n')[0] ?? '' });
      process.exitCode = 1;
    }
  }
  const report = [
    `# ctxdedup benchmarks (${selected.join(', ')})`,
    '',
    environment(started, loadStart),
    '',
    toMarkdown(rows),
    '',
    'ratio = how many times faster native is than the pure-JS baseline measured in the same run. ' +
      'MB = 10^6 UTF-16 code units of content. "warm" = benny ops/s on one corpus called repeatedly; ' +
      '"cold" = median ms of single calls on freshly JSON-parsed copies. See bench/README.md.',
    '',
  ].join('\n');
  const outDir = join(HERE, 'results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'latest.md'), report);
  console.log(`\n${report}`);
  console.log(`written to ${join('bench', 'results', 'latest.md')}`);
}

await main();
