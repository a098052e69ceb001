/**
 * `ctxdedup restore`: puts the originals saved by `dedupe --verbatim` back into deduplicated output.
 * Inputs that `dedupe --on-error skip` passed through as they were (the verbatim file lists
 * them) pass through again, so the pair round-trips byte for byte; any other bad input aborts.
 * @module
 */
import { DataError, jsonErrorLocation, UsageError } from './errors.js';
import { getAt, type FormatName, type PathStep } from './formats.js';
import { discover, inputError, lines, openInput, type InputFile } from './input.js';
import type { Handled, Session } from './jobs.js';
import { beginCommit, keepCreatedFolders, type Outputs, removeCreatedFolders } from './output.js';
import { runPipeline, type PipelineProgress } from './pipeline.js';
import { inProcess } from './pool.js';
import { checkOutputs, planTargets, type CliIO } from './dedupe.js';
import { VERBATIM_VERSION } from './dedupe-session.js';

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
  edits: { path: PathStep[]; original: string; tag: string; raw?: string }[];
}

/** An input `dedupe --on-error skip` left as it was: `file`, `line` and why. */
interface SkippedEntry {
  file: string;
  line?: number;
  skipped: string;
}

interface Verbatim {
  /** Sessions to restore, by `file` or `file:line`. */
  entries: Map<string, VerbatimEntry>;
  /** Skipped inputs, by `file` or `file:line`. */
  skipped: Map<string, SkippedEntry>;
}

function keyOf(entry: { file: string; line?: number | undefined }): string {
  return entry.line === undefined ? entry.file : `${entry.file}:${entry.line}`;
}

/** Finds the entry of `file` (and `line`); a single renamed input matches on the line alone. */
function find<E extends { line?: number }>(map: Map<string, E>, file: string, line: number | undefined, single: boolean): E | undefined {
  const hit = map.get(line === undefined ? file : `${file}:${line}`);
  if (hit !== undefined || !single) return hit;
  for (const entry of map.values()) if (entry.line === line) return entry;
  return undefined;
}

/** Whether `raw` is a JSON string literal (nothing around it) whose value is `original`. */
function isLiteralOf(raw: unknown, original: unknown): boolean {
  if (typeof raw !== 'string' || !raw.startsWith('"') || !raw.endsWith('"')) return false;
  try {
    return JSON.parse(raw) === original;
  } catch {
    return false;
  }
}

/** Whether `e` has the shape of one edit of a verbatim entry. */
function isEdit(e: unknown): e is VerbatimEntry['edits'][number] {
  if (typeof e !== 'object' || e === null) return false;
  const { path, original, tag, raw } = e as Record<string, unknown>;
  return (
    Array.isArray(path) &&
    path.every((step) => typeof step === 'string' || Number.isSafeInteger(step)) &&
    typeof original === 'string' &&
    typeof tag === 'string' &&
    (raw === undefined || typeof raw === 'string')
  );
}

async function loadVerbatim(path: string, io: CliIO): Promise<Verbatim> {
  const file = { path, rel: path, size: 0, gzip: path.endsWith('.gz'), container: 'jsonl' as const };
  const entries = new Map<string, VerbatimEntry>();
  const skipped = new Map<string, SkippedEntry>();
  let input;
  let header = false;
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
      const v = value as Partial<VerbatimEntry & SkippedEntry> & { ctxdedup?: string };
      if (line.number === 1) {
        if (v.ctxdedup !== 'verbatim') throw new DataError(path, 1, 'not a ctxdedup verbatim file');
        const version = (value as { version?: unknown }).version;
        if (version !== VERBATIM_VERSION)
          throw new DataError(path, 1, `a verbatim file of version ${JSON.stringify(version)}: this ctxdedup reads version ${VERBATIM_VERSION}`);
        header = true;
        continue;
      }
      const located = typeof v.file === 'string' && (v.line === undefined || Number.isSafeInteger(v.line));
      if (located && Array.isArray(v.edits)) {
        for (const e of v.edits as unknown[]) {
          // Each edit puts a string back at a path: anything else would write a non-string there.
          if (!isEdit(e))
            throw new DataError(path, line.number, 'not a verbatim entry: an edit needs a path (strings and integers), a string original and a string tag');
          // A literal is written into the output as it is: it must be the JSON string of its original.
          if (e.raw !== undefined && !isLiteralOf(e.raw, e.original))
            throw new DataError(path, line.number, 'not a verbatim entry: a raw literal is not the JSON string of its original');
        }
        entries.set(keyOf(v as VerbatimEntry), v as VerbatimEntry);
      } else if (located && typeof v.skipped === 'string') skipped.set(keyOf(v as SkippedEntry), v as SkippedEntry);
      else throw new DataError(path, line.number, 'not a verbatim entry');
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UsageError(`verbatim file not found: ${path}`);
    throw inputError(file, error);
  } finally {
    input?.close();
  }
  // Even a run that replaced nothing writes the header line: an empty file is not one.
  if (!header) throw new DataError(path, undefined, 'not a ctxdedup verbatim file (it has no header line)');
  return { entries, skipped };
}

/** Runs `ctxdedup restore`. */
export async function restoreCommand(o: RestoreCommandOptions, io: CliIO): Promise<RestoreSummary> {
  if (o.inputs.length === 0) throw new UsageError('no inputs: give the deduplicated files or directories');
  const { files, directories } = await discover(o.inputs);
  const planned = await planTargets(files, directories, o.out, false, io.stdout);
  // The verbatim file is read too: no output may overwrite it.
  const { targets } = await checkOutputs(files, [{ path: o.verbatim, role: '--verbatim' }], planned, [], io);
  const { entries, skipped } = await loadVerbatim(o.verbatim, io);
  // A single file may have been renamed by -o: then match its sessions by line only.
  const single = files.length === 1 && directories === 0;
  const lookup = (session: Session): VerbatimEntry | undefined => find(entries, session.file.rel, session.line, single);
  const used = new Set<VerbatimEntry | SkippedEntry>();
  const summary: RestoreSummary = { files: files.length, sessions: 0, restored: 0 };
  const progress: PipelineProgress = { filesDone: 0, sessionsDone: 0, bytesRead: () => 0, bytesParsed: 0, bytesOut: 0 };
  // What the handler found for one session; checked and counted in input order.
  type Outcome = { entry: VerbatimEntry | undefined; mismatch?: string; file: string; line: number | undefined };
  const handler = {
    handle(session: Session): Handled<Outcome> {
      const entry = lookup(session);
      const outcome: Outcome = { entry, file: session.file.path, line: session.line };
      if (entry === undefined) return { edits: [], outcome };
      for (const e of entry.edits) {
        if (getAt(session.root, e.path) !== e.tag) {
          outcome.mismatch = `content at ${e.path.join('.')} is not the reference tag the verbatim file expects`;
          return { edits: [], outcome };
        }
      }
      return {
        edits: entry.edits.map((e) => (e.raw === undefined ? { path: e.path, value: e.original } : { path: e.path, value: e.original, raw: e.raw })),
        outcome,
      };
    },
  };
  // Bad input passes through only where dedupe skipped it (same place, same reason).
  const passThrough = (error: DataError, file: InputFile): void => {
    const entry = find(skipped, file.rel, error.line, single);
    if (entry === undefined || entry.skipped !== error.reason) throw error;
    used.add(entry);
  };
  let outputs: Outputs | undefined;
  try {
    outputs = await runPipeline<Outcome>(
      {
        files,
        targets,
        format: o.format,
        onError: 'skip',
        stdin: io.stdin,
        executor: inProcess(handler),
        inFlight: 2,
        skipped: passThrough,
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
    const unused = entries.size + skipped.size - used.size;
    if (unused > 0) throw new DataError(o.verbatim, undefined, `${unused} entr${unused === 1 ? 'y' : 'ies'} in the verbatim file matched no input`);
    beginCommit();
    await outputs.publish();
    keepCreatedFolders();
  } catch (error) {
    await outputs?.discard();
    removeCreatedFolders();
    throw error;
  }
  return summary;
}
