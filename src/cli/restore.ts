/**
 * `ctxdedup restore`: puts the originals saved by `dedupe --verbatim` back into deduplicated output.
 * @module
 */
import { DataError, jsonErrorLocation, UsageError } from './errors.js';
import { getAt, type FormatName, type PathStep } from './formats.js';
import { discover, lines, openInput } from './input.js';
import type { Handled, Session } from './jobs.js';
import { runPipeline, type PipelineProgress } from './pipeline.js';
import { inProcess } from './pool.js';
import { planTargets, type CliIO } from './dedupe.js';

/** Options of {@link restoreCommand}. */
export interface RestoreCommandOptions {
  inputs: string[];
  verbatim: string;
  out?: string;
  format?: FormatName;
}

/** What `restore` did. */
export interface RestoreSummary {
  files: number;
  sessions: number;
  restored: number;
}

interface VerbatimEntry {
  file: string;
  line?: number;
  edits: { path: PathStep[]; original: string; tag: string }[];
}

async function loadVerbatim(path: string, io: CliIO): Promise<Map<string, VerbatimEntry>> {
  const file = { path, rel: path, size: 0, gzip: path.endsWith('.gz'), container: 'jsonl' as const };
  const entries = new Map<string, VerbatimEntry>();
  let input;
  try {
    input = openInput(file, io.stdin);
    for await (const line of lines(input.stream)) {
      if (line.text.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line.text);
      } catch (error) {
        throw new DataError(path, line.number, jsonErrorLocation(line.text, error).reason);
      }
      const v = value as Partial<VerbatimEntry> & { ctxdedup?: string };
      if (line.number === 1) {
        if (v.ctxdedup !== 'verbatim') throw new DataError(path, 1, 'not a ctxdedup verbatim file');
        continue;
      }
      if (typeof v.file !== 'string' || !Array.isArray(v.edits)) throw new DataError(path, line.number, 'not a verbatim entry');
      entries.set(v.line === undefined ? v.file : `${v.file}:${v.line}`, v as VerbatimEntry);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UsageError(`verbatim file not found: ${path}`);
    throw error;
  } finally {
    input?.close();
  }
  return entries;
}

/** Runs `ctxdedup restore`. */
export async function restoreCommand(o: RestoreCommandOptions, io: CliIO): Promise<RestoreSummary> {
  if (o.inputs.length === 0) throw new UsageError('no inputs: give the deduplicated files or directories');
  const { files, directories } = await discover(o.inputs);
  const targets = await planTargets(files, directories, o.out, false, io.stdout);
  const entries = await loadVerbatim(o.verbatim, io);
  // A single file may have been renamed by -o: then match its sessions by line only.
  const single = files.length === 1 && directories === 0;
  const lookup = (key: string, line: number | undefined): VerbatimEntry | undefined => {
    const hit = entries.get(key);
    if (hit !== undefined || !single) return hit;
    for (const [k, entry] of entries) if (entry.line === line) return entries.get(k);
    return undefined;
  };
  const used = new Set<VerbatimEntry>();
  const summary: RestoreSummary = { files: files.length, sessions: 0, restored: 0 };
  const progress: PipelineProgress = { filesDone: 0, sessionsDone: 0, bytesRead: () => 0, bytesParsed: 0, bytesOut: 0 };
  // What the handler found for one session; checked and counted in input order.
  type Outcome = { entry: VerbatimEntry | undefined; mismatch?: string; file: string; line: number | undefined };
  const handler = {
    handle(session: Session): Handled<Outcome> {
      const entry = lookup(session.key, session.line);
      const outcome: Outcome = { entry, file: session.file.path, line: session.line };
      if (entry === undefined) return { edits: [], outcome };
      for (const e of entry.edits) {
        if (getAt(session.root, e.path) !== e.tag) {
          outcome.mismatch = `content at ${e.path.join('.')} is not the reference tag the verbatim file expects`;
          return { edits: [], outcome };
        }
      }
      return { edits: entry.edits.map((e) => ({ path: e.path, value: e.original })), outcome };
    },
  };
  await runPipeline<Outcome>(
    {
      files,
      targets,
      format: o.format,
      onError: 'abort',
      stdin: io.stdin,
      executor: inProcess(handler),
      inFlight: 2,
      skipped: () => undefined,
      session: (_file, { outcome }) => {
        summary.sessions++;
        if (outcome.mismatch !== undefined) throw new DataError(outcome.file, outcome.line, outcome.mismatch);
        if (outcome.entry !== undefined) {
          used.add(outcome.entry);
          summary.restored += outcome.entry.edits.length;
        }
        return undefined;
      },
    },
    progress,
  );
  const unused = entries.size - used.size;
  if (unused > 0) throw new DataError(o.verbatim, undefined, `${unused} session(s) in the verbatim file matched no input`);
  return summary;
}
