/**
 * The unit of work of the CLI pipeline: a job is a slice of one input (a batch of whole session
 * lines, a whole agent log, a whole JSON document) as raw bytes. Processing a job parses it,
 * cuts it into sessions, hands each session to a {@link SessionHandler} and writes the output
 * bytes with only the edited strings replaced.
 *
 * This module runs on the main thread (`--jobs 1`, `restore`) and in worker threads alike, so
 * it depends on nothing but the job: no streams, no files, no shared state. That is also why a
 * job's output never depends on where it ran. The output is the input bytes plus patches: the
 * input buffer travels back with the result and nothing is re-serialized.
 * @module
 */
import { jsonErrorLocation } from './errors.js';
import { dialectOf, extractEvents, extractMessages, messagesOf, type FormatName, type PathStep, type Unit } from './formats.js';
import { unusualLiteralsAt, PatchBuilder, spliceStrings, type Patches, type StringEdit } from './splice.js';
import { decodeInput } from './utf8.js';

/** The input a job comes from, as shown in messages and reports. */
export interface FileRef {
  /** Path as given (`-` for stdin): error messages name it. */
  path: string;
  /** Path relative to its input: session names and verbatim keys use it. */
  rel: string;
}

/** A slice of one input, as raw bytes. */
export type Job =
  /** Whole lines of a sessions JSONL file (one `{ session, messages }` record per line). */
  | { kind: 'sessions'; file: FileRef; data: Uint8Array; firstLine: number }
  /** A whole agent session log (one event per line): one session. */
  | { kind: 'agent'; file: FileRef; data: Uint8Array }
  /** A whole JSON document: one session. `format` forces the dialect. */
  | { kind: 'document'; file: FileRef; data: Uint8Array; format: FormatName | undefined };

/** A session cut from a job. */
export interface Session {
  file: FileRef;
  /** Display name: the session record's `session`, the agent `sessionId`, or `file[:line]`. */
  name: string;
  /** Key in the verbatim file: `rel` or `rel:line`. */
  key: string;
  /** 1-based line of a session record in a sessions JSONL file. */
  line: number | undefined;
  format: FormatName;
  /** The parsed value unit paths are relative to. */
  root: unknown;
  units: Unit[];
  messages: number;
  /** The JSON string literals at `paths` (unit paths) as the input writes them, where they may differ from `JSON.stringify`'s (see `unusualLiteralsAt`). */
  literals(paths: readonly (readonly PathStep[])[]): (string | undefined)[];
}

/** What a handler decided for one session. */
export interface Handled<O> {
  /** Strings to replace (paths relative to the session's root). */
  edits: readonly StringEdit[];
  /** Unedited strings whose output position the consumer needs (see {@link SessionResult.spans}). */
  locate?: readonly (readonly PathStep[])[];
  outcome: O;
}

/** Scratch state of one job, shared by its sessions (in order) and dropped with the job. */
export interface JobScope {
  memo: Record<string, unknown>;
}

/** Decides the edits of each session (the dedupe or restore logic). */
export interface SessionHandler<O> {
  handle(session: Session, job: JobScope): Handled<O> | Promise<Handled<O>>;
}

/** One processed session. */
export interface SessionResult<O> {
  outcome: O;
  /** Input byte offsets `[start, end]` of the string tokens the handler asked to locate. */
  spans?: number[];
}

/** A malformed input found by a job. */
export interface JobError {
  line: number | undefined;
  reason: string;
  /** How many sessions of the job came before it (errors and sessions interleave in input order). */
  after: number;
}

/** The result of a job, in input order. */
export interface JobResult<O> {
  /** The job's input bytes, handed back (the output is these with `patches` applied). */
  data: Uint8Array;
  /** The edits, as replacements of input byte ranges. */
  patches: Patches;
  /** Input bytes processed. */
  bytes: number;
  /** The file's format when this job determined it (documents and agent logs). */
  format?: FormatName;
  sessions: SessionResult<O>[];
  errors: JobError[];
}

/** Splits off a leading U+FEFF (a BOM in a decoded text). */
export function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** Whether a value is a plain JSON object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What a parsed line holds. */
type Parsed = { kind: 'blank' } | { kind: 'error'; reason: string } | { kind: 'value'; value: unknown };

/** Parses one JSONL line (without its `\n`): blank lines (after a BOM) are kept as they are. */
export function parseLine(text: string): Parsed {
  const body = stripBom(text);
  if (body.trim() === '') return { kind: 'blank' };
  try {
    return { kind: 'value', value: JSON.parse(body) as unknown };
  } catch (error) {
    return { kind: 'error', reason: jsonErrorLocation(body, error).reason };
  }
}

const NOT_A_RECORD = 'not a session record: expected an object with a "messages" array';
const NOT_A_TRANSCRIPT = 'not a transcript: expected an array of messages or an object with a "messages" array';

class Run<O> {
  readonly b: Buffer;
  readonly out = new PatchBuilder();
  readonly result: JobResult<O>;
  readonly scope: JobScope = { memo: {} };

  constructor(
    readonly job: Job,
    readonly handler: SessionHandler<O>,
  ) {
    this.b = Buffer.from(job.data.buffer, job.data.byteOffset, job.data.byteLength);
    this.result = {
      data: job.data,
      patches: { ranges: new Float64Array(0), bytes: new Uint8Array(0), lengths: new Uint32Array(0) },
      bytes: job.data.byteLength,
      sessions: [],
      errors: [],
    };
  }

  error(line: number | undefined, reason: string): void {
    this.result.errors.push({ line, reason, after: this.result.sessions.length });
  }

  /** Runs the handler on the session in `b[start, end)` and records its edits. */
  async emit(session: Session, start: number, end: number): Promise<void> {
    const handled = await this.handler.handle(session, this.scope);
    const item: SessionResult<O> = { outcome: handled.outcome };
    const locate = handled.locate ?? [];
    if (handled.edits.length > 0 || locate.length > 0) {
      const spans = spliceStrings(this.b, start, end, handled.edits, locate, this.out);
      if (locate.length > 0) item.spans = spans;
    }
    this.result.sessions.push(item);
  }

  finish(): JobResult<O> {
    this.result.patches = this.out.finish();
    return this.result;
  }
}

async function sessionsJob<O>(run: Run<O>, job: Extract<Job, { kind: 'sessions' }>): Promise<void> {
  const { b } = run;
  let line = job.firstLine;
  for (let start = 0; start < b.length; line++) {
    const nl = b.indexOf(10, start);
    const end = nl === -1 ? b.length : nl;
    const next = nl === -1 ? b.length : nl + 1;
    const decoded = decodeInput(b, start, end);
    const parsed = 'text' in decoded ? parseLine(decoded.text) : ({ kind: 'error', reason: decoded.problem } as const);
    if (parsed.kind !== 'value') {
      if (parsed.kind === 'error') run.error(line, parsed.reason);
      start = next;
      continue;
    }
    const value = parsed.value;
    const found = isRecord(value) ? messagesOf(value) : undefined;
    if (found === undefined || found.base.length === 0) {
      run.error(line, NOT_A_RECORD);
      start = next;
      continue;
    }
    const record = value as Record<string, unknown>;
    const { units, messages } = extractMessages(found.messages, found.base);
    const own = record['session'] ?? record['id'];
    const name = typeof own === 'string' || typeof own === 'number' ? String(own) : `${job.file.rel}:${line}`;
    const literals = (paths: readonly (readonly PathStep[])[]): (string | undefined)[] => unusualLiteralsAt(b, start, end, paths);
    await run.emit(
      { file: job.file, name, key: `${job.file.rel}:${line}`, line, format: 'sessions-jsonl', root: record, units, messages, literals },
      start,
      end,
    );
    start = next;
  }
}

async function agentJob<O>(run: Run<O>, job: Extract<Job, { kind: 'agent' }>): Promise<void> {
  const { b } = run;
  const events: unknown[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  for (let start = 0, line = 1; start < b.length; line++) {
    const nl = b.indexOf(10, start);
    const end = nl === -1 ? b.length : nl;
    const decoded = decodeInput(b, start, end);
    const parsed = 'text' in decoded ? parseLine(decoded.text) : ({ kind: 'error', reason: decoded.problem } as const);
    if (parsed.kind === 'error') run.error(line, parsed.reason);
    events.push(parsed.kind === 'value' ? parsed.value : undefined);
    starts.push(start);
    ends.push(end);
    start = nl === -1 ? b.length : nl + 1;
  }
  run.result.format = 'agent-jsonl';
  const { units, messages } = extractEvents(events);
  const first = events.find((e) => isRecord(e) && typeof e['sessionId'] === 'string') as Record<string, unknown> | undefined;
  const name = first ? `${job.file.rel} (${String(first['sessionId'])})` : job.file.rel;
  // Unit paths start with the line index.
  const literals = (paths: readonly (readonly PathStep[])[]): (string | undefined)[] =>
    paths.map((path) => unusualLiteralsAt(b, starts[path[0] as number] as number, ends[path[0] as number] as number, [path.slice(1)])[0]);
  const session: Session = { file: job.file, name, key: job.file.rel, line: undefined, format: 'agent-jsonl', root: events, units, messages, literals };
  const handled = await run.handler.handle(session, run.scope);
  // Unit paths start with the line index; each line is spliced on its own.
  const byLine = new Map<number, { edits: StringEdit[]; locate: PathStep[][]; slots: number[] }>();
  const at = (path: readonly PathStep[]): { edits: StringEdit[]; locate: PathStep[][]; slots: number[] } => {
    const line = path[0] as number;
    let entry = byLine.get(line);
    if (entry === undefined) byLine.set(line, (entry = { edits: [], locate: [], slots: [] }));
    return entry;
  };
  for (const edit of handled.edits) at(edit.path).edits.push({ ...edit, path: edit.path.slice(1) });
  const locate = handled.locate ?? [];
  locate.forEach((path, k) => {
    const entry = at(path);
    entry.locate.push(path.slice(1));
    entry.slots.push(k);
  });
  const spans: number[] = new Array<number>(locate.length * 2).fill(-1);
  for (const [i, entry] of [...byLine].sort((x, y) => x[0] - y[0])) {
    const located = spliceStrings(b, starts[i] as number, ends[i] as number, entry.edits, entry.locate, run.out);
    entry.slots.forEach((slot, k) => {
      spans[2 * slot] = located[2 * k] as number;
      spans[2 * slot + 1] = located[2 * k + 1] as number;
    });
  }
  const item: SessionResult<O> = { outcome: handled.outcome };
  if (locate.length > 0) item.spans = spans;
  run.result.sessions.push(item);
}

async function documentJob<O>(run: Run<O>, job: Extract<Job, { kind: 'document' }>): Promise<void> {
  const { b } = run;
  const decoded = decodeInput(b);
  if (!('text' in decoded)) {
    run.error(undefined, decoded.problem);
    return;
  }
  const body = stripBom(decoded.text);
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (error) {
    const { line, reason } = jsonErrorLocation(body, error);
    run.error(line, reason);
    return;
  }
  const found = messagesOf(doc);
  if (found === undefined) {
    run.error(undefined, NOT_A_TRANSCRIPT);
    return;
  }
  const format = job.format ?? dialectOf(found.messages);
  run.result.format = format;
  const { units, messages } = extractMessages(found.messages, found.base);
  const literals = (paths: readonly (readonly PathStep[])[]): (string | undefined)[] => unusualLiteralsAt(b, 0, b.length, paths);
  await run.emit({ file: job.file, name: job.file.rel, key: job.file.rel, line: undefined, format, root: doc, units, messages, literals }, 0, b.length);
}

/**
 * Processes one job: parses it, runs `handler` on each session in input order and splices the
 * edits into the output. Malformed input is reported in `errors` (never thrown), so the caller
 * decides between skipping and aborting in input order.
 */
export async function processJob<O>(job: Job, handler: SessionHandler<O>): Promise<JobResult<O>> {
  const run = new Run(job, handler);
  if (job.kind === 'sessions') await sessionsJob(run, job);
  else if (job.kind === 'agent') await agentJob(run, job);
  else await documentJob(run, job);
  return run.finish();
}
