/**
 * `ctxdedup dedupe`: per-session message dedup over a streamed corpus, optional cross-session
 * dedup of identical tool outputs, a verbatim file for `restore`, and the report.
 * @module
 */
import { resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { dedupeMessagesAsync, DEFAULT_TEMPLATES, type DedupeMessagesOptions, type DedupeMessagesResult, type Message } from '../stages/messages.js';
import { tokenCounter, type TokenEncoding } from '../tokens.js';
import { UsageError, type DataError } from './errors.js';
import type { FormatName } from './formats.js';
import { discover, type InputFile } from './input.js';
import { Sink, type Target } from './output.js';
import { runPipeline, type Edit, type PipelineProgress, type Session } from './pipeline.js';
import { Progress } from './progress.js';
import { contentKey, ReportBuilder, type DedupeReport } from './report.js';

/** The per-session dedup function: the native stage by default (a benchmark may swap in a reference). */
export type DedupeEngine = (messages: Message[], options: DedupeMessagesOptions) => Promise<DedupeMessagesResult<Message>>;

/** Options of {@link dedupeCommand} (already parsed from the command line). */
export interface DedupeCommandOptions {
  inputs: string[];
  format?: FormatName;
  out?: string;
  dryRun: boolean;
  verbatim?: string;
  keep: 'latest' | 'earliest';
  fuzzy: boolean;
  threshold: number;
  minChars: number;
  recencyWindow: number;
  preserve: string[];
  crossSession: boolean;
  onError: 'skip' | 'abort';
  concurrency: number;
  tokenizer: TokenEncoding;
  json: boolean;
  quiet: boolean;
  /** Force the progress display on (default: only when stderr is a TTY). */
  progress?: boolean;
  /** HTML report path. */
  report?: string;
  engine?: DedupeEngine;
}

/** Streams a command works with. */
export interface CliIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
}

/** Where each input's output goes. */
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
  const inputs = new Set(files.map((f) => resolve(f.path)));
  const targets: Target[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    if (isDir && file.path === '-') throw new UsageError('stdin (-) needs -o <file>, not a directory');
    const path = isDir ? resolve(out, file.rel) : resolve(out);
    if (inputs.has(path)) throw new UsageError(`output would overwrite its input: ${file.path}`);
    if (seen.has(path)) throw new UsageError(`two inputs map to the same output: ${path}`);
    seen.add(path);
    targets.push({ kind: 'file', path });
  }
  return targets;
}

interface CrossEntry {
  where: string;
}

/**
 * Runs `ctxdedup dedupe`.
 * @returns the report, or throws UsageError / DataError.
 */
export async function dedupeCommand(o: DedupeCommandOptions, io: CliIO): Promise<DedupeReport> {
  if (o.inputs.length === 0) throw new UsageError('no inputs: give files, directories or - for stdin');
  if (o.dryRun && o.verbatim !== undefined) throw new UsageError('--verbatim has nothing to save with --dry-run');
  const { files, directories } = await discover(o.inputs);
  if (files.length === 0) throw new UsageError(`no .json, .jsonl or .ndjson files found in ${o.inputs.join(', ')}`);
  const targets = await planTargets(files, directories, o.out, o.dryRun, io.stdout);
  if (o.json && targets.some((t) => t.kind === 'stream')) {
    throw new UsageError('--json prints the report on stdout: write the output with -o, or use --dry-run');
  }
  const count = tokenCounter(o.tokenizer);
  const report = new ReportBuilder(count, o.tokenizer, o.dryRun);
  const engine: DedupeEngine = o.engine ?? ((m, opts) => dedupeMessagesAsync(m, opts));
  const stageOptions: DedupeMessagesOptions = {
    keep: o.keep,
    fuzzy: o.fuzzy,
    threshold: o.threshold,
    minChars: o.minChars,
    recencyWindow: o.recencyWindow,
    preserve: o.preserve,
  };
  const verbatim = o.verbatim === undefined ? undefined : await Sink.open({ kind: 'file', path: resolve(o.verbatim) });
  if (verbatim !== undefined) await verbatim.write(JSON.stringify({ ctxdedup: 'verbatim', version: 1 }) + '\n');
  const cross = new Map<string, CrossEntry>();
  const preserved = new Set(o.preserve);

  const finish = async (session: Session, result: DedupeMessagesResult<Message>): Promise<Edit[]> => {
    const edits: Edit[] = [];
    let tokensSaved = 0;
    let charsSaved = 0;
    const replacedIdx = new Set<number>();
    for (const d of result.decisions) {
      const unit = session.units[d.index];
      const after = result.messages[d.index]?.content;
      if (unit === undefined || typeof after !== 'string') continue;
      const before = unit.message.content as string;
      replacedIdx.add(d.index);
      edits.push({ path: unit.path, before, after });
      charsSaved += d.charsSaved;
      tokensSaved += report.replaced(before, after);
    }
    let crossCount = 0;
    if (o.crossSession) {
      const n = session.units.length;
      const windowStart = o.recencyWindow > 0 ? n - o.recencyWindow : n;
      session.units.forEach((unit, i) => {
        const m = unit.message;
        const content = m.content as string;
        if (replacedIdx.has(i) || m.role !== 'tool' || m.tool_calls !== undefined || preserved.has('tool')) return;
        if (content.length < o.minChars || content.length === 0) return;
        const { key } = contentKey(content);
        const seen = cross.get(key);
        if (seen === undefined) {
          cross.set(key, { where: `${session.name}#${m.id}` });
          return;
        }
        if (i >= windowStart) return;
        const after = DEFAULT_TEMPLATES.exact.replace('{keepId}', seen.where).replace('{chars}', String(content.length));
        if (after.length >= content.length) return;
        edits.push({ path: unit.path, before: content, after });
        crossCount++;
        charsSaved += content.length - after.length;
        tokensSaved += report.replaced(content, after);
      });
    }
    const charsBefore = session.units.reduce((sum, u) => sum + (u.message.content as string).length, 0);
    report.session({
      session: session.name,
      format: session.format,
      messages: session.messages,
      replaced: edits.length,
      charsSaved,
      tokensSaved,
      contents: session.units.length,
      charsBefore,
      exact: result.stats.exactDuplicates,
      near: result.stats.nearDuplicates,
      cross: crossCount,
      keptInWindow: result.stats.keptInWindow,
    });
    if (verbatim !== undefined && edits.length > 0) {
      const entry: Record<string, unknown> = { file: session.file.rel, session: session.name };
      if (session.line !== undefined) entry['line'] = session.line;
      entry['edits'] = edits.map((e) => ({ path: e.path, original: e.before, tag: e.after }));
      await verbatim.write(JSON.stringify(entry) + '\n');
    }
    return edits;
  };

  // Texts the stage would skip anyway (too short, preserved role, tool calls) cross the native
  // boundary as '' so they are not copied there; decisions and tags are unchanged.
  const slim = (m: Message): Message => {
    const content = m.content as string;
    if (content.length === 0 || (content.length >= o.minChars && m.tool_calls === undefined && !(typeof m.role === 'string' && preserved.has(m.role)))) return m;
    return { ...m, content: '' };
  };
  const progress: PipelineProgress = { filesDone: 0, sessionsDone: 0, bytesRead: () => 0, bytesParsed: 0, bytesOut: 0 };
  const showProgress = !o.quiet && (o.progress ?? io.stderr.isTTY === true);
  const totalBytes = files.reduce((sum, f) => sum + f.size, 0);
  const bar = showProgress ? new Progress(io.stderr, progress, totalBytes, files.length) : undefined;
  bar?.start();
  try {
    await runPipeline(
      {
        files,
        targets,
        format: o.format,
        onError: o.onError,
        stdin: io.stdin,
        concurrency: o.concurrency,
        transform: { start: (s) => engine(s.units.map((u) => slim(u.message)), stageOptions), finish },
        skipped: (e: DataError) => report.error(e.file, e.line, e.reason),
        fileFormat: (_file, format) => report.file(format),
      },
      progress,
    );
    await verbatim?.commit();
  } catch (error) {
    await verbatim?.discard();
    throw error;
  } finally {
    bar?.stop();
  }
  return report.finish(files.length, progress.bytesRead(), progress.bytesParsed, progress.bytesOut);
}
