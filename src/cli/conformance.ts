/**
 * `ctxdedup conformance`: runs the shipped conformance vectors against ctxdedup or another
 * implementation (`--impl`), prints a pass/fail table per suite and the failures with their diffs.
 * @module
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Command } from 'commander';
// The vectors' runner loads when the command runs, not with every CLI run.
import type { ConformanceImpl, ConformanceReport } from '../conformance/index.js';
import type { CliIO } from './dedupe.js';
import { EXIT, UsageError } from './errors.js';

function list(value: string, previous: string[] | undefined): string[] {
  return [
    ...(previous ?? []),
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  ];
}

function pad(text: string, width: number, right = false): string {
  return right ? text.padStart(width) : text.padEnd(width);
}

/** The report as text: a table per suite, then every failure with its rule and diff. */
export function renderConformance(report: ConformanceReport, implName: string, verbose = false): string {
  const lines = [`ctxdedup conformance: ${implName}`, ''];
  const width = Math.max(5, ...report.suites.map((s) => s.name.length));
  lines.push(`  ${pad('suite', width)}  ${pad('pass', 5, true)}  ${pad('fail', 5, true)}  ${pad('skip', 5, true)}`);
  for (const s of report.suites) {
    const mark = s.failed > 0 ? 'FAIL' : s.passed === 0 ? 'skip' : 'ok';
    lines.push(`  ${pad(s.name, width)}  ${pad(String(s.passed), 5, true)}  ${pad(String(s.failed), 5, true)}  ${pad(String(s.skipped), 5, true)}  ${mark}`);
  }
  const failures = report.vectors.filter((v) => v.status === 'fail');
  if (verbose) {
    lines.push('');
    for (const v of report.vectors) lines.push(`  ${v.status.padEnd(4)} ${v.suite}/${v.id}: ${v.description}`);
  }
  for (const v of failures) {
    lines.push('', `FAIL ${v.suite}/${v.id} (${v.call}): ${v.description}`, `  rule: ${v.rule}`);
    for (const line of (v.diff ?? '').split('\n')) lines.push(`  ${line}`);
  }
  if (report.missing.length > 0) lines.push('', `not provided (vectors skipped): ${report.missing.join(', ')}`);
  const t = report.totals;
  lines.push('', `${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);
  return `${lines.join('\n')}\n`;
}

async function loadImpl(path: string): Promise<ConformanceImpl> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`cannot load --impl ${path}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  }
  const { CALLS } = await import('../conformance/calls.js');
  const names = Object.keys(CALLS);
  if (names.some((name) => typeof module[name] === 'function')) return module as ConformanceImpl;
  const fallback = module['default'];
  if (typeof fallback === 'object' && fallback !== null && names.some((name) => typeof (fallback as Record<string, unknown>)[name] === 'function')) {
    return fallback as ConformanceImpl;
  }
  throw new UsageError(`--impl ${path} exports none of the functions the vectors call (${names.join(', ')})`);
}

/** Registers `ctxdedup conformance`; `setCode` receives the exit code (0 all pass, 1 a failure). */
export function addConformanceCommand(program: Command, io: CliIO, setCode: (code: number) => void): void {
  program
    .command('conformance')
    .description('check an implementation (ctxdedup by default) against the shipped conformance vectors')
    .option('--suite <names>', 'suites to run, comma-separated or repeated (default: all)', list)
    .option('--impl <module>', "module exporting stage functions under ctxdedup's names (default: ctxdedup itself)")
    .option('--smoke', 'only the fast subset that `ctxdedup doctor` runs', false)
    .option('--json', 'print the full report as JSON on stdout', false)
    .option('-v, --verbose', 'list every vector, not only the failures', false)
    .action(async (opts: Record<string, unknown>) => {
      const { listSuites, runConformance } = await import('../conformance/index.js');
      const known = listSuites().map((s) => s.name);
      const suites = opts['suite'] as string[] | undefined;
      if (suites !== undefined && suites.length === 0) throw new UsageError(`--suite names no suite (suites: ${known.join(', ')})`);
      for (const name of suites ?? []) {
        if (!known.includes(name)) throw new UsageError(`unknown suite ${JSON.stringify(name)} (suites: ${known.join(', ')})`);
      }
      const implPath = opts['impl'] as string | undefined;
      const impl = implPath === undefined ? undefined : await loadImpl(implPath);
      const report = await runConformance({
        ...(suites !== undefined ? { suites } : {}),
        ...(impl !== undefined ? { impl } : {}),
        smoke: opts['smoke'] as boolean,
      });
      if (report.totals.passed + report.totals.failed === 0) {
        throw new UsageError(`--impl ${implPath ?? ''} provides none of the functions the selected vectors call (${report.missing.join(', ')})`);
      }
      if (opts['json']) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else io.stdout.write(renderConformance(report, implPath ?? 'ctxdedup', opts['verbose'] as boolean));
      setCode(report.ok ? EXIT.ok : EXIT.data);
    });
}
