/**
 * The streaming engine shared by `dedupe` and `restore`: reads inputs one after another, cuts
 * them into sessions, runs a per-session transform with a bounded number of sessions in flight
 * (so parsing the next session overlaps the native analysis of the previous ones), and writes
 * results in input order. Memory is bounded by a few sessions, not by the corpus.
 * @module
 */
import type { Readable } from 'node:stream';
import { DataError, jsonErrorLocation } from './errors.js';
import {
  containerOf,
  dialectOf,
  extractEvents,
  extractMessages,
  messagesOf,
  serializeDocument,
  setAt,
  type Container,
  type FormatName,
  type PathStep,
  type Unit,
} from './formats.js';
import { lines, openInput, readAll, type InputFile, type OpenInput } from './input.js';
import { Sink, type Target } from './output.js';

/** One replacement of the string at `path` inside a session's root value. */
export interface Edit {
  path: PathStep[];
  /** The string that was there. */
  before: string;
  /** The string put there. */
  after: string;
}

/** A session cut from an input. */
export interface Session {
  file: InputFile;
  /** Display name: the session record's `session`, the agent `sessionId`, or `file[:line]`. */
  name: string;
  /** Key in the verbatim file: `rel` or `rel:line`. */
  key: string;
  /** 1-based line of a session record in a sessions JSONL file. */
  line: number | undefined;
  format: FormatName;
  /** The value unit paths are relative to. */
  root: unknown;
  units: Unit[];
  messages: number;
  /** Uncompressed bytes of the session's text. */
  bytes: number;
}

/** What a run does with each session. */
export interface Transform<R> {
  /** Starts work on a session (may run off the main thread); called in input order. */
  start(session: Session): Promise<R>;
  /** Turns the finished work into edits; called in input order, one at a time. */
  finish(session: Session, work: R): Edit[] | Promise<Edit[]>;
}

/** Options of {@link runPipeline}. */
export interface PipelineOptions<R> {
  files: InputFile[];
  /** Output target per file (same order as `files`). */
  targets: Target[];
  format: FormatName | undefined;
  onError: 'skip' | 'abort';
  transform: Transform<R>;
  stdin: Readable;
  /** Sessions in flight at once. */
  concurrency: number;
  /** Called for skipped inputs (with `onError: 'skip'`). */
  skipped(error: DataError): void;
  /** Called once per file with its resolved format. */
  fileFormat?(file: InputFile, format: FormatName): void;
}

/** Progress counters, readable while a run goes on. */
export interface PipelineProgress {
  filesDone: number;
  sessionsDone: number;
  /** Raw bytes of finished files plus bytes read of the current one. */
  bytesRead(): number;
  bytesParsed: number;
  bytesOut: number;
}

type Item<R> =
  | { kind: 'open'; file: InputFile; target: Target }
  | { kind: 'raw'; text: string; eol: boolean }
  | { kind: 'session'; session: Session; work: Promise<R>; emit: Emit }
  | { kind: 'close'; file: InputFile };

/** Writes a finished session; `edited` lists the edits that were applied. */
type Emit = (sink: Sink, edits: readonly Edit[]) => Promise<void>;

/** A bounded FIFO between the reader and the writer. */
class Queue<T> {
  private readonly items: T[] = [];
  private wakeConsumer: (() => void) | undefined;
  private wakeProducer: (() => void) | undefined;
  private closed = false;
  failed: unknown = undefined;
  bytes = 0;

  constructor(
    private readonly maxItems: number,
    private readonly maxBytes: number,
  ) {}

  async push(item: T, bytes: number): Promise<void> {
    while (this.failed === undefined && this.items.length > 0 && (this.items.length >= this.maxItems || this.bytes + bytes > this.maxBytes)) {
      await new Promise<void>((resolve) => (this.wakeProducer = resolve));
    }
    if (this.failed !== undefined) throw this.failed;
    this.items.push(item);
    this.bytes += bytes;
    this.wake();
  }

  private wake(): void {
    const c = this.wakeConsumer;
    this.wakeConsumer = undefined;
    c?.();
  }

  close(): void {
    this.closed = true;
    this.wake();
  }

  fail(error: unknown): void {
    if (this.failed === undefined) this.failed = error;
    const p = this.wakeProducer;
    this.wakeProducer = undefined;
    p?.();
    this.close();
  }

  async shift(): Promise<T | undefined> {
    while (this.items.length === 0) {
      if (this.closed) return undefined;
      await new Promise<void>((resolve) => (this.wakeConsumer = resolve));
    }
    const item = this.items.shift() as T;
    const p = this.wakeProducer;
    this.wakeProducer = undefined;
    p?.();
    return item;
  }

  release(bytes: number): void {
    this.bytes -= bytes;
  }
}

function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads chunks until the first newline (or 1 MB) to guess the container, without consuming. */
async function sniff(input: OpenInput): Promise<{ container: Container; stream: AsyncIterable<Buffer> }> {
  const iterator = input.stream[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let size = 0;
  let done = false;
  let newline = false;
  while (!newline && size < 1 << 20) {
    const next = await iterator.next();
    if (next.done) {
      done = true;
      break;
    }
    head.push(next.value);
    newline = next.value.indexOf(10) !== -1;
    size += next.value.length;
  }
  const all = Buffer.concat(head);
  let container: Container = 'json';
  const nl = all.indexOf(10);
  if (nl !== -1) {
    const first = stripBom(all.subarray(0, nl).toString('utf8')).trim();
    const rest = all.subarray(nl + 1).toString('utf8').trim();
    if (first.startsWith('{') && (rest.length > 0 || !done)) {
      try {
        if (isRecord(JSON.parse(first))) container = 'jsonl';
      } catch {
        container = 'json';
      }
    }
  }
  async function* replay(): AsyncGenerator<Buffer> {
    yield* head;
    if (done) return;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
  }
  return { container, stream: replay() };
}

/**
 * Runs the pipeline over every file.
 * @throws DataError on the first bad input when `onError` is `'abort'` (the file being written
 *   is discarded; files already finished stay).
 */
export async function runPipeline<R>(options: PipelineOptions<R>, progress: PipelineProgress): Promise<void> {
  const queue = new Queue<Item<R>>(Math.max(2, options.concurrency * 2), 256 << 20);
  let finishedBytes = 0;
  let current: OpenInput | undefined;
  progress.bytesRead = () => finishedBytes + (current?.bytesRead() ?? 0);

  const pushSession = async (session: Session, emit: Emit): Promise<void> => {
    const work = options.transform.start(session);
    work.catch(() => undefined); // observed by the writer
    await queue.push({ kind: 'session', session, work, emit }, session.bytes);
  };

  const fail = (error: DataError): void => {
    if (options.onError === 'abort') throw error;
    options.skipped(error);
  };

  const readFile = async (file: InputFile, target: Target): Promise<void> => {
    const input = openInput(file, options.stdin);
    current = input;
    try {
      let container = options.format !== undefined ? containerOf(options.format) : file.container;
      let stream = input.stream;
      if (container === undefined) ({ container, stream } = await sniff({ ...input, stream }));
      await queue.push({ kind: 'open', file, target }, 0);
      if (container === 'json') await readDocument(file, stream);
      else await readJsonl(file, stream);
      await queue.push({ kind: 'close', file }, 0);
    } finally {
      finishedBytes += input.bytesRead();
      current = undefined;
      input.close();
    }
  };

  const readDocument = async (file: InputFile, stream: AsyncIterable<Buffer>): Promise<void> => {
    const text = (await readAll(stream)).toString('utf8');
    progress.bytesParsed += Buffer.byteLength(text);
    const passthrough = async (): Promise<void> => queue.push({ kind: 'raw', text, eol: false }, text.length);
    let doc: unknown;
    try {
      doc = JSON.parse(stripBom(text));
    } catch (error) {
      const { line, reason } = jsonErrorLocation(stripBom(text), error);
      fail(new DataError(file.rel === '-' ? '-' : file.path, line, reason));
      return passthrough();
    }
    const found = messagesOf(doc);
    if (found === undefined) {
      fail(new DataError(file.path, undefined, 'not a transcript: expected an array of messages or an object with a "messages" array'));
      return passthrough();
    }
    const format = options.format ?? dialectOf(found.messages);
    options.fileFormat?.(file, format);
    const { units, messages } = extractMessages(found.messages, found.base);
    const session: Session = { file, name: file.rel, key: file.rel, line: undefined, format, root: doc, units, messages, bytes: text.length };
    await pushSession(session, async (sink, edits) => {
      await sink.write(edits.length === 0 ? text : (text.charCodeAt(0) === 0xfeff ? '\uFEFF' : '') + serializeDocument(doc, stripBom(text)));
    });
  };

  const readJsonl = async (file: InputFile, stream: AsyncIterable<Buffer>): Promise<void> => {
    let mode: 'sessions' | 'agent' | undefined =
      options.format === 'sessions-jsonl' ? 'sessions' : options.format === 'agent-jsonl' ? 'agent' : undefined;
    // Agent mode keeps every line of the file (one session); sessions mode streams line by line.
    const raws: { text: string; eol: boolean }[] = [];
    const events: unknown[] = [];
    let bytes = 0;
    const where = file.rel === '-' ? '-' : file.path;
    for await (const line of lines(stream)) {
      progress.bytesParsed += line.bytes;
      const body = stripBom(line.text);
      if (body.trim() === '') {
        if (mode === 'sessions') await queue.push({ kind: 'raw', text: line.text, eol: line.eol }, line.text.length);
        else (raws.push(line), events.push(undefined));
        continue;
      }
      let value: unknown;
      try {
        value = JSON.parse(body);
      } catch (error) {
        fail(new DataError(where, line.number, jsonErrorLocation(body, error).reason));
        if (mode === 'sessions') await queue.push({ kind: 'raw', text: line.text, eol: line.eol }, line.text.length);
        else (raws.push(line), events.push(undefined));
        continue;
      }
      if (mode === undefined) {
        mode = isRecord(value) && Array.isArray(value['messages']) ? 'sessions' : 'agent';
        if (mode === 'sessions') {
          for (const raw of raws) await queue.push({ kind: 'raw', text: raw.text, eol: raw.eol }, raw.text.length);
          raws.length = 0;
          events.length = 0;
          options.fileFormat?.(file, 'sessions-jsonl');
        }
      }
      if (mode === 'agent') {
        raws.push(line);
        events.push(value);
        bytes += line.text.length;
        continue;
      }
      const found = isRecord(value) ? messagesOf(value) : undefined;
      if (found === undefined || found.base.length === 0) {
        fail(new DataError(where, line.number, 'not a session record: expected an object with a "messages" array'));
        await queue.push({ kind: 'raw', text: line.text, eol: line.eol }, line.text.length);
        continue;
      }
      const record = value as Record<string, unknown>;
      const { units, messages } = extractMessages(found.messages, found.base);
      const own = record['session'] ?? record['id'];
      const name = typeof own === 'string' || typeof own === 'number' ? String(own) : `${file.rel}:${line.number}`;
      const session: Session = {
        file,
        name,
        key: `${file.rel}:${line.number}`,
        line: line.number,
        format: 'sessions-jsonl',
        root: record,
        units,
        messages,
        bytes: line.text.length,
      };
      const { text, eol } = line;
      await pushSession(session, async (sink, edits) => {
        const out = edits.length === 0 ? text : JSON.stringify(record) + (text.endsWith('\r') ? '\r' : '');
        await sink.write(eol ? `${out}\n` : out);
      });
    }
    if (mode === 'sessions') return;
    // Agent session log: the whole file is one session.
    options.fileFormat?.(file, 'agent-jsonl');
    const { units, messages } = extractEvents(events);
    const first = events.find((e) => isRecord(e) && typeof e['sessionId'] === 'string') as Record<string, unknown> | undefined;
    const session: Session = {
      file,
      name: first ? `${file.rel} (${String(first['sessionId'])})` : file.rel,
      key: file.rel,
      line: undefined,
      format: 'agent-jsonl',
      root: events,
      units,
      messages,
      bytes,
    };
    await pushSession(session, async (sink, edits) => {
      const changed = new Set(edits.map((e) => e.path[0] as number));
      const parts: string[] = [];
      let size = 0;
      for (let i = 0; i < raws.length; i++) {
        const raw = raws[i] as { text: string; eol: boolean };
        const text = changed.has(i) ? JSON.stringify(events[i]) + (raw.text.endsWith('\r') ? '\r' : '') : raw.text;
        parts.push(raw.eol ? `${text}\n` : text);
        size += text.length;
        if (size > 1 << 20) {
          await sink.write(parts.join(''));
          parts.length = 0;
          size = 0;
        }
      }
      await sink.write(parts.join(''));
    });
  };

  const reader = async (): Promise<void> => {
    try {
      for (let i = 0; i < options.files.length; i++) {
        await readFile(options.files[i] as InputFile, options.targets[i] as Target);
      }
      queue.close();
    } catch (error) {
      queue.fail(error);
    }
  };

  const writer = async (): Promise<void> => {
    let sink: Sink | undefined;
    try {
      for (let item = await queue.shift(); item !== undefined; item = await queue.shift()) {
        if (item.kind === 'open') {
          sink = await Sink.open(item.target);
        } else if (item.kind === 'raw') {
          queue.release(item.text.length);
          await (sink as Sink).write(item.eol ? `${item.text}\n` : item.text);
        } else if (item.kind === 'session') {
          const work = await item.work;
          const edits = await options.transform.finish(item.session, work);
          for (const edit of edits) setAt(item.session.root, edit.path, edit.after);
          await item.emit(sink as Sink, edits);
          queue.release(item.session.bytes);
          progress.sessionsDone++;
        } else {
          await (sink as Sink).commit();
          progress.bytesOut += (sink as Sink).bytes;
          sink = undefined;
          progress.filesDone++;
        }
      }
      if (queue.failed !== undefined) throw queue.failed;
    } catch (error) {
      queue.fail(error);
      await sink?.discard();
      throw error;
    }
  };

  const [, written] = await Promise.allSettled([reader(), writer()]);
  if (written.status === 'rejected') throw written.reason;
}
