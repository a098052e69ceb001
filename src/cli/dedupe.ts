/**
 * `ctxdedup dedupe`: per-session message dedup over a streamed corpus, optional cross-session
 * dedup of identical tool outputs, a verbatim file for `restore`, and the report.
 * @module
 */
import { resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { referenceTag } from '../stages/message-analysis.js';
import { DEFAULT_TEMPLATES } from '../stages/messages.js';
import { countTokens, loadTokenizer, type TokenEncoding } from '../tokens.js';
import {
  dedupeHandler,
  loadEngine,
  validateSettings,
  VERBATIM_VERSION,
  verbatimEntry,
  type DedupeEngine,
  type DedupeOutcome,
  type DedupeSettings,
} from './dedupe-session.js';
import { UsageError, type DataError } from './errors.js';
import type { FormatName } from './formats.js';
import { discover, type InputFile } from './input.js';
import type { SessionResult } from './jobs.js';
import { beginCommit, finishedFile, keepCreatedFolders, type Outputs, removeCreatedFolders, Sink, type Target } from './output.js';
import { checkPaths, type PathUse } from './paths.js';
import { runPipeline, type OutputPatch, type PipelineProgress } from './pipeline.js';
import { defaultJobs, HybridExecutor, inProcess, WorkerPool, type Executor } from './pool.js';
import { Progress } from './progress.js';
import { SharedCounts, sharedCountsBuffer } from './shared-counts.js';
import { renderHtml, ReportBuilder, ReplacementMeter, type DedupeReport } from './report.js';

export type { DedupeEngine };

/**
 * Without an explicit `--jobs`, smaller inputs are processed on the main thread (stdin: until
 * this many bytes have gone by): starting worker threads (each loads the modules and the addon)
 * costs more than deduplicating a few megabytes.
 */
export const WORKER_THRESHOLD_BYTES = 16 << 20;

/** Options of {@link dedupeCommand} (already parsed from the command line). */
export interface DedupeCommandOptions
  extends Pick<DedupeSettings, 'keep' | 'fuzzy' | 'threshold' | 'minChars' | 'recencyWindow' | 'preserve' | 'crossSession' | 'blocks'> {
  inputs: string[];
  format?: FormatName;
  out?: string;
  dryRun: boolean;
  verbatim?: string;
  onError: 'skip' | 'abort';
  /** Jobs (batches of sessions) in flight. */
  concurrency: number;
  /**
   * Worker threads that parse and deduplicate; 1 runs everything on the main thread. Default:
   * one per CPU for inputs of {@link WORKER_THRESHOLD_BYTES} or more, else the main thread.
   */
  jobs?: number;
  tokenizer: TokenEncoding;
  json: boolean;
  quiet: boolean;
  /** Force the progress display on (default: only when stderr is a TTY). */
  progress?: boolean;
  /** HTML report path (published with the outputs). */
  report?: string;
  /**
   * Runs once the report is final and before anything is committed (the report on stdout): if it
   * fails, the run commits no file.
   */
  beforeCommit?: (report: DedupeReport) => Promise<void>;
  /** A per-session engine function: runs on the main thread only (implies `jobs: 1`). */
  engine?: DedupeEngine;
  /** URL of a module exporting `engine`: loaded by every worker (and the main thread). */
  engineModule?: string;
  /** Target size of a batch of session lines in bytes (default 2 MiB). */
  batchBytes?: number;
  /** Longest line (or document) in bytes (default: what one string can hold; tests use less). */
  maxLineBytes?: number;
  /** Running from TypeScript sources: the worker threads' loader module (see `WorkerInit.loader`). */
  workerLoader?: string;
}

/** Streams a command works with. */
export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
}

/**
 * Where each input's output goes (paths as given: {@link checkOutputs} resolves and checks them).
 * @throws UsageError for several inputs without `-o`, or two inputs mapped to one output
 */
export async function planTargets(
  files: readonly InputFile[],
  directories: number,
  out: string | undefined,
  dryRun: boolean,
  stdout: Writable,
): Promise<Target[]> {
  if (dryRun) return files.map(() => ({ kind: 'none' }));
  if (out === undefined) {
    if (files.length !== 1 || directories > 0) {
      throw new UsageError('several inputs: give -o <dir> to write them, or --dry-run for the report only');
    }
    return [{ kind: 'stream', stream: stdout }];
  }
  let isDir = directories > 0 || files.length > 1 || out.endsWith('/');
  try {
    if ((await stat(out)).isDirectory()) isDir = true;
  } catch {
    // does not exist yet
  }
  const targets: Target[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    if (isDir && file.path === '-') throw new UsageError('stdin (-) needs -o <file>, not a directory');
    const path = isDir ? resolve(out, file.rel) : resolve(out);
    if (seen.has(path)) throw new UsageError(`two inputs map to the same output: ${path}`);
    seen.add(path);
    targets.push({ kind: 'file', path });
  }
  return targets;
}

/**
 * Checks, before any work, that no output of a command (`targets`, then `extra` outputs such as
 * the verbatim file) is one of its inputs (`files`, then `extraInputs`) or another of its
 * outputs, stdin and stdout included when redirected from or to a file; see {@link checkPaths}.
 * @returns the targets and the extra outputs, with real paths (write there)
 * @throws UsageError naming both paths
 */
export async function checkOutputs(
  files: readonly InputFile[],
  extraInputs: readonly PathUse[],
  targets: readonly Target[],
  extra: readonly PathUse[],
  io: Pick<CliIO, 'stdin' | 'stdout'>,
): Promise<{ targets: Target[]; extra: string[] }> {
  const inputs: PathUse[] = [...files.filter((f) => f.path !== '-').map((f) => ({ path: f.path, role: 'input' })), ...extraInputs];
  const outputs: PathUse[] = [];
  for (const t of targets) if (t.kind === 'file') outputs.push({ path: t.path, role: '-o' });
  outputs.push(...extra);
  const real = await checkPaths(inputs, outputs, { stdout: io.stdout, ...(files.some((f) => f.path === '-') ? { stdin: io.stdin } : {}) });
  let k = 0;
  const resolved = targets.map((t): Target => (t.kind === 'file' ? { kind: 'file', path: real[k++] as string } : t));
  return { targets: resolved, extra: real.slice(k) };
}

/** Starts the executor the options ask for; without `--jobs`, the input size decides. */
async function executorFor(o: DedupeCommandOptions, settings: DedupeSettings, files: readonly InputFile[]): Promise<Executor<DedupeOutcome>> {
  // With workers, token counts of replaced contents are shared by every thread of the run.
  const tokenCounts = sharedCountsBuffer();
  const counts = new SharedCounts(tokenCounts);
  const local = async (shared?: SharedCounts): Promise<Executor<DedupeOutcome>> =>
    inProcess(dedupeHandler(settings, o.engine ?? (await loadEngine(settings, o.engineModule)), shared));
  if (o.engine !== undefined) return local();
  const init = { settings, engineModule: o.engineModule, loader: o.workerLoader, tokenCounts };
  const pool = (jobs: number): WorkerPool => {
    // The vocabulary is one per process: it loads here while the workers start, instead of in
    // their first job (where one loads it and the others wait).
    loadTokenizer(settings.tokenizer).catch(() => undefined);
    return new WorkerPool(jobs, init);
  };
  if (o.jobs !== undefined) return o.jobs === 1 ? local() : pool(o.jobs);
  const cpus = defaultJobs();
  if (cpus === 1) return local();
  // Gzip inputs count at a typical compression ratio; stdin's size is unknown.
  const known = files.reduce((sum, f) => sum + (f.gzip ? 4 * f.size : f.size), 0);
  if (known >= WORKER_THRESHOLD_BYTES) return pool(cpus);
  if (!files.some((f) => f.path === '-')) return local();
  return new HybridExecutor(await local(counts), () => pool(cpus), WORKER_THRESHOLD_BYTES);
}

/** Joins a session's verbatim entry the way `JSON.stringify` would write the object. */
function verbatimLine(file: InputFile, o: DedupeOutcome, cross: readonly string[]): string {
  const edits = [o.verbatim, ...cross].filter((e) => e !== undefined && e !== '').join(',');
  const line = o.line === undefined ? '' : `,"line":${o.line}`;
  return `{"file":${JSON.stringify(file.rel)},"session":${JSON.stringify(o.name)}${line},"edits":[${edits}]}\n`;
}

/** The verbatim file's entry for an input skipped with `--on-error skip` (it is in the output as it was). */
function skippedLine(file: InputFile, error: DataError): string {
  const line = error.line === undefined ? '' : `,"line":${error.line}`;
  return `{"file":${JSON.stringify(file.rel)}${line},"skipped":${JSON.stringify(error.reason)}}\n`;
}

/**
 * Runs `ctxdedup dedupe`. Every output path is checked before any work; outputs are written to
 * temporary files and published only when the whole run succeeded: the verbatim file first, then
 * the outputs, then the HTML report.
 * @returns the report, or throws UsageError / DataError / OutputError.
 */
export async function dedupeCommand(o: DedupeCommandOptions, io: CliIO): Promise<DedupeReport> {
  if (o.inputs.length === 0) throw new UsageError('no inputs: give files, directories or - for stdin');
  if (o.dryRun && o.verbatim !== undefined) throw new UsageError('--verbatim has nothing to save with --dry-run');
  if (o.dryRun && o.out !== undefined) throw new UsageError('-o has nothing to write with --dry-run (it only reports)');
  // `restore --verbatim -` reads stdin; here `-` would silently be a file named "-".
  if (o.verbatim === '-') throw new UsageError('--verbatim needs a file path (the output may be on stdout; write the verbatim file to a file)');
  // In the CLI's words (the library names its options).
  if (o.blocks && o.keep !== 'earliest') throw new UsageError('--blocks requires --keep earliest (a reference must point at a copy already sent)');
  if (o.blocks && o.fuzzy) throw new UsageError('--blocks cannot be combined with --near (near-duplicate replacement is lossy and rewrites earlier messages)');
  if (o.blocks && o.recencyWindow > 0) {
    throw new UsageError(`--blocks requires --recency-window 0 (a window would rewrite messages already sent once they leave it), got ${o.recencyWindow}`);
  }
  const { files, directories } = await discover(o.inputs);
  if (files.length === 0) throw new UsageError(`no .json, .jsonl or .ndjson files found in ${o.inputs.join(', ')}`);
  const planned = await planTargets(files, directories, o.out, o.dryRun, io.stdout);
  if (o.json && planned.some((t) => t.kind === 'stream')) {
    throw new UsageError('--json prints the report on stdout: write the output with -o, or use --dry-run');
  }
  const extra: PathUse[] = [];
  if (o.verbatim !== undefined) extra.push({ path: o.verbatim, role: '--verbatim' });
  if (o.report !== undefined) extra.push({ path: o.report, role: '--report' });
  const checked = await checkOutputs(files, [], planned, extra, io);
  const targets = checked.targets;
  const verbatimPath = o.verbatim === undefined ? undefined : checked.extra[0];
  const reportPath = o.report === undefined ? undefined : checked.extra[extra.length - 1];
  const settings: DedupeSettings = {
    keep: o.keep,
    fuzzy: o.fuzzy,
    threshold: o.threshold,
    minChars: o.minChars,
    recencyWindow: o.recencyWindow,
    preserve: o.preserve,
    crossSession: o.crossSession,
    blocks: o.blocks,
    verbatim: o.verbatim !== undefined,
    tokenizer: o.tokenizer,
  };
  try {
    validateSettings(settings);
  } catch (error) {
    if (error instanceof RangeError || error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  }
  const report = new ReportBuilder(new ReplacementMeter(o.tokenizer), o.tokenizer, o.dryRun);
  const verbatim = verbatimPath === undefined ? undefined : await Sink.open({ kind: 'file', path: verbatimPath });
  // Cross-session dedup: the first session#id seen with each tool output, by content key.
  const cross = new Map<string, string>();
  const crossTag = referenceTag(DEFAULT_TEMPLATES);

  // Adds one session up, in input order: its own replacements, then cross-session ones.
  const session = async (file: InputFile, item: SessionResult<DedupeOutcome>, out: Uint8Array): Promise<OutputPatch[] | undefined> => {
    const s = item.outcome;
    let tokensSaved = s.blockTokensSaved;
    for (const rep of s.replacements) tokensSaved += report.record(rep);
    let charsSaved = s.charsSaved;
    let crossCount = 0;
    const patches: OutputPatch[] = [];
    const crossVerbatim: string[] = [];
    s.cross?.forEach((c, k) => {
      const seen = cross.get(c.key);
      if (seen === undefined) {
        cross.set(c.key, c.where);
        return;
      }
      if (c.inWindow) return;
      const after = crossTag({ kind: 'exact', id: c.where, keepId: seen, chars: c.chars });
      if (after.length >= c.chars) return;
      const start = item.spans?.[2 * k] as number;
      const end = item.spans?.[2 * k + 1] as number;
      // The original as the session's parse saw it: the token's bytes are untouched in `out`.
      const literal = Buffer.from(out.buffer, out.byteOffset + start, end - start).toString('utf8');
      const content = JSON.parse(literal) as string;
      // Keep earliest promises net-positive tags, in o200k tokens as well as in characters.
      if (o.keep === 'earliest' && countTokens(after, 'o200k_base') >= countTokens(content, 'o200k_base')) return;
      patches.push({ start, end, bytes: Buffer.from(JSON.stringify(after)) });
      crossCount++;
      charsSaved += c.chars - after.length;
      tokensSaved += report.replaced(content, after);
      if (verbatim !== undefined) crossVerbatim.push(verbatimEntry(c.path, content, after, literal));
    });
    report.session({
      session: s.name,
      format: s.format,
      messages: s.messages,
      replaced: s.replaced + crossCount,
      charsSaved,
      tokensSaved,
      contents: s.contents,
      charsBefore: s.charsBefore,
      exact: s.exact,
      near: s.near,
      blocks: s.blocks,
      blockCharsSaved: s.blockCharsSaved,
      blockTokensSaved: s.blockTokensSaved,
      cross: crossCount,
      keptInWindow: s.keptInWindow,
    });
    if (verbatim !== undefined && s.replaced + crossCount > 0) await verbatim.write(verbatimLine(file, s, crossVerbatim));
    return patches.length > 0 ? patches : undefined;
  };

  const progress: PipelineProgress = { filesDone: 0, sessionsDone: 0, bytesRead: () => 0, bytesParsed: 0, bytesOut: 0 };
  const showProgress = !o.quiet && (o.progress ?? io.stderr.isTTY === true);
  const totalBytes = files.reduce((sum, f) => sum + f.size, 0);
  const bar = showProgress ? new Progress(io.stderr, progress, totalBytes, files.length) : undefined;
  bar?.start();
  let executor: Executor<DedupeOutcome> | undefined;
  let outputs: Outputs | undefined;
  let result: DedupeReport | undefined;
  try {
    if (verbatim !== undefined) await verbatim.write(`${JSON.stringify({ ctxdedup: 'verbatim', version: VERBATIM_VERSION })}\n`);
    executor = await executorFor(o, settings, files);
    outputs = await runPipeline(
      {
        files,
        targets,
        format: o.format,
        onError: o.onError,
        stdin: io.stdin,
        executor,
        inFlight: Math.max(o.concurrency, 4 * (o.jobs ?? defaultJobs())),
        ...(o.batchBytes === undefined ? {} : { batchBytes: o.batchBytes }),
        ...(o.maxLineBytes === undefined ? {} : { maxLineBytes: o.maxLineBytes }),
        session,
        skipped: async (e: DataError, file: InputFile) => {
          report.error(e.file, e.line, e.reason);
          // Restore passes the input through as it is only where the verbatim file says so.
          if (verbatim !== undefined) await verbatim.write(skippedLine(file, e));
        },
        fileFormat: (_file, format) => report.file(format),
      },
      progress,
    );
    result = report.finish(files.length, progress.bytesRead(), progress.bytesParsed, progress.bytesOut);
    // Everything that can fail is written before the commit: the HTML report (published with the
    // outputs) and whatever the caller prints.
    if (reportPath !== undefined) outputs.add(await finishedFile(reportPath, renderHtml(result)));
    bar?.stop();
    await o.beforeCommit?.(result);
    // The outputs are never published without their originals: verbatim file first.
    beginCommit();
    await verbatim?.commit();
    await outputs.publish();
    keepCreatedFolders();
  } catch (error) {
    await verbatim?.discard();
    await outputs?.discard();
    removeCreatedFolders();
    throw error;
  } finally {
    await executor?.close();
    bar?.stop();
  }
  return result;
}
