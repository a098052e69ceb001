/**
 * The streaming engine shared by `dedupe` and `restore`. The main thread reads the inputs one
 * after another and cuts them into jobs (batches of whole session lines, or a whole document or
 * agent log, see jobs.ts); an {@link Executor} runs the jobs, on worker threads or in-process;
 * results are taken back in input order, handed to the caller session by session, and written.
 *
 * Memory stays bounded by the jobs in flight (a count and a byte budget), not by the corpus;
 * a job is at least one whole session, so the largest session is the floor.
 * @module
 */
import { constants } from 'node:buffer';
import type { Readable } from 'node:stream';
import { DataError } from './errors.js';
import { containerOf, type Container, type FormatName } from './formats.js';
import { openSource, type ByteSource, type InputFile } from './input.js';
import { isRecord, parseLine, stripBom, type FileRef, type Job, type JobError, type JobResult, type SessionResult } from './jobs.js';
import { Outputs, Sink, type Target } from './output.js';
import { decodeInput } from './utf8.js';
import type { Executor } from './pool.js';

/** Replaces bytes `[start, end)` of a job's output (the pipeline applies these before writing). */
export interface OutputPatch {
  start: number;
  end: number;
  bytes: Uint8Array;
}

/** Options of {@link runPipeline}. */
export interface PipelineOptions<O> {
  files: InputFile[];
  /** Output target per file (same order as `files`). */
  targets: Target[];
  format: FormatName | undefined;
  onError: 'skip' | 'abort';
  stdin: Readable;
  executor: Executor<O>;
  /** Jobs dispatched and not yet written, at most. */
  inFlight: number;
  /** Target size of a batch of session lines (default 2 MiB). */
  batchBytes?: number;
  /** Longest line, document or agent log in bytes (default {@link MAX_RANGE_BYTES}). */
  maxLineBytes?: number;
  /**
   * Called for skipped inputs (with `onError: 'skip'`), in input order, with the input they are
   * in. Throw (a DataError) to stop the run.
   */
  skipped(error: DataError, file: InputFile): void | Promise<void>;
  /** Called once per file with its resolved format, in input order. */
  fileFormat?(file: InputFile, format: FormatName): void;
  /**
   * Called for each session in input order with its job's output bytes; may return patches of
   * that output (strings the session asked to locate). Throw a DataError to stop the run.
   */
  session(file: InputFile, session: SessionResult<O>, out: Uint8Array): OutputPatch[] | undefined | Promise<OutputPatch[] | undefined>;
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

/** Bytes of jobs in flight, at most (a single larger job still goes: it is one session). */
const MAX_BYTES_IN_FLIGHT = 64 << 20;
const DEFAULT_BATCH_BYTES = 2 << 20;

type Item<O> =
  | { kind: 'open'; file: InputFile; target: Target }
  | { kind: 'format'; file: InputFile; format: FormatName }
  | { kind: 'job'; file: InputFile; result: Promise<JobResult<O>>; bytes: number }
  | { kind: 'close'; file: InputFile };

/** A bounded FIFO between the reader and the writer. */
class Queue<T> {
  private readonly items: { item: T; bytes: number }[] = [];
  private wakeConsumer: (() => void) | undefined;
  private wakeProducer: (() => void) | undefined;
  private closed = false;
  failed: unknown = undefined;
  private bytes = 0;

  constructor(
    private readonly maxItems: number,
    private readonly maxBytes: number,
  ) {}

  /** Waits for room for `bytes`, then enqueues `make()` (so work starts only when it fits). */
  async push(make: () => T, bytes: number): Promise<void> {
    while (this.failed === undefined && this.items.length > 0 && (this.items.length >= this.maxItems || this.bytes + bytes > this.maxBytes)) {
      await new Promise<void>((resolve) => (this.wakeProducer = resolve));
    }
    if (this.failed !== undefined) throw this.failed;
    this.items.push({ item: make(), bytes });
    this.bytes += bytes;
    const c = this.wakeConsumer;
    this.wakeConsumer = undefined;
    c?.();
  }

  close(): void {
    this.closed = true;
    const c = this.wakeConsumer;
    this.wakeConsumer = undefined;
    c?.();
  }

  fail(error: unknown): void {
    if (this.failed === undefined) this.failed = error;
    this.wakeProducers();
    this.close();
  }

  private wakeProducers(): void {
    const p = this.wakeProducer;
    this.wakeProducer = undefined;
    p?.();
  }

  /** The next item; its bytes count until {@link done} is called with them. */
  async shift(): Promise<{ item: T; bytes: number } | undefined> {
    while (this.items.length === 0) {
      if (this.closed) return undefined;
      await new Promise<void>((resolve) => (this.wakeConsumer = resolve));
    }
    return this.items.shift();
  }

  done(bytes: number): void {
    this.bytes -= bytes;
    this.wakeProducers();
  }
}

/**
 * Recycles the batch buffers: a buffer goes to a job, comes back with the result and returns
 * here once its output is written. Reusing a handful of buffers avoids a fresh allocation (and
 * its page faults) per batch. Only buffers of the standard size are kept.
 */
class BufferPool {
  private readonly free: ArrayBuffer[] = [];

  constructor(
    readonly size: number,
    private readonly max: number,
  ) {}

  /** A buffer of at least `min` bytes (never a slice of Node's shared pool: it may be transferred). */
  take(min = this.size): Buffer {
    const recycled = min <= this.size ? this.free.pop() : undefined;
    return recycled !== undefined ? Buffer.from(recycled) : Buffer.allocUnsafeSlow(Math.max(min, this.size));
  }

  give(buffer: ArrayBufferLike): void {
    if (buffer.byteLength === this.size && this.free.length < this.max && buffer instanceof ArrayBuffer) this.free.push(buffer);
  }
}

/** The most bytes one line, document or agent log may take (see `Reader.grow`). */
const MAX_RANGE_BYTES = Math.min(3 * constants.MAX_STRING_LENGTH, constants.MAX_LENGTH);

/** Thrown by `Reader.grow` past {@link MAX_RANGE_BYTES}; reported as a data error of its file. */
class InputTooLong extends Error {}

function countNewlines(b: Buffer, start: number, end: number): number {
  let n = 0;
  for (let i = b.indexOf(10, start); i !== -1 && i < end; i = b.indexOf(10, i + 1)) n++;
  return n;
}

/**
 * Reads one input into pooled buffers: `buf[0, len)` holds bytes read and not yet handed on.
 */
class Reader {
  buf: Buffer;
  len = 0;
  eof = false;

  constructor(
    private readonly source: ByteSource,
    private readonly pool: BufferPool,
    private readonly maxBytes: number,
  ) {
    this.buf = pool.take();
  }

  /** Reads until the buffer is full or the input ends. */
  async fill(): Promise<void> {
    while (!this.eof && this.len < this.buf.length) {
      const n = await this.source.read(this.buf, this.len, this.buf.length - this.len);
      if (n === 0) this.eof = true;
      else this.len += n;
    }
  }

  /** Doubles the buffer (a line or document larger than it). */
  grow(): void {
    // A line (or a document, or an agent log) is decoded into one string, so it can never be
    // longer than 3 bytes per unit of the longest string: reading more would only exhaust memory.
    if (this.buf.length >= this.maxBytes) throw new InputTooLong();
    const bigger = this.pool.take(Math.max(this.buf.length + 1, Math.min(this.buf.length * 2, this.maxBytes)));
    this.buf.copy(bigger, 0, 0, this.len);
    this.pool.give(this.buf.buffer);
    this.buf = bigger;
  }

  /** Hands `buf[0, end)` on and keeps the rest in a fresh buffer. */
  take(end: number): Buffer {
    const out = this.buf.subarray(0, end);
    const rest = this.len - end;
    const next = this.pool.take(rest);
    this.buf.copy(next, 0, end, this.len);
    this.buf = next;
    this.len = rest;
    return out;
  }

  /** Reads the whole input. */
  async all(): Promise<Buffer> {
    for (;;) {
      await this.fill();
      if (this.eof) return this.take(this.len);
      this.grow();
    }
  }
}

/**
 * Offset of the first byte of `b[from, len)` that is not JSON whitespace (or, at the start, a
 * BOM): `len` if none.
 */
function firstNonBlank(b: Buffer, len: number, from = 0): number {
  let i = from === 0 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? 3 : from;
  while (i < len && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  return i;
}

/**
 * Whether the JSONL line `b[start, end)` (without its newline) decides the file's mode, and
 * which: a record with a `messages` array is a session record; one with a `message`, or a
 * `role` and a `content`, is an agent event. Other lines (a header record, a line that cannot be
 * decoded or parsed) decide nothing: their job reports them if they are errors.
 */
function modeOf(b: Buffer, start: number, end: number): 'sessions' | 'agent' | undefined {
  const decoded = decodeInput(b, start, end);
  if (!('text' in decoded)) return undefined;
  const parsed = parseLine(decoded.text);
  if (parsed.kind !== 'value' || !isRecord(parsed.value)) return undefined;
  const v = parsed.value;
  if (Array.isArray(v['messages'])) return 'sessions';
  return isRecord(v['message']) || ('role' in v && 'content' in v) ? 'agent' : undefined;
}

/**
 * Runs the pipeline over every file. File outputs are finished under temporary names and
 * returned unpublished: the caller publishes them (after its own outputs, such as the verbatim
 * file) or discards them, so a failed run commits nothing.
 * @throws DataError on the first bad input when `onError` is `'abort'`, OutputError when an
 *   output cannot be written (every output file is discarded then)
 */
export async function runPipeline<O>(options: PipelineOptions<O>, progress: PipelineProgress): Promise<Outputs> {
  const queue = new Queue<Item<O>>(Math.max(2, options.inFlight + 2), MAX_BYTES_IN_FLIGHT);
  const pool = new BufferPool(options.batchBytes ?? DEFAULT_BATCH_BYTES, options.inFlight + 4);
  const maxLineBytes = options.maxLineBytes ?? MAX_RANGE_BYTES;
  let finishedBytes = 0;
  let current: ByteSource | undefined;
  progress.bytesRead = () => finishedBytes + (current?.bytesRead() ?? 0);
  let jobsInFlight = 0;
  let jobDone: (() => void) | undefined;

  const push = (item: Item<O>): Promise<void> => queue.push(() => item, 0);

  const dispatch = async (file: InputFile, job: Job): Promise<void> => {
    // The count bound keeps a few jobs per worker queued; the byte bound keeps big ones few.
    while (jobsInFlight >= options.inFlight && queue.failed === undefined) await new Promise<void>((resolve) => (jobDone = resolve));
    const bytes = job.data.byteLength;
    await queue.push(() => {
      jobsInFlight++;
      const result = options.executor.run(job);
      result.catch(() => undefined); // observed by the writer
      return { kind: 'job', file, result, bytes };
    }, bytes);
  };

  /**
   * The next non-blank line of `reader` at or after byte `from`, read whole (the reader fills
   * until its newline, the end, or the line limit): its `[start, end)`, whether it ended with a
   * newline, or `undefined` when only blanks are left.
   */
  const nextLine = async (reader: Reader, from: number): Promise<{ start: number; end: number; whole: boolean } | undefined> => {
    for (;;) {
      const start = firstNonBlank(reader.buf, reader.len, from);
      const nl = start < reader.len ? reader.buf.subarray(0, reader.len).indexOf(10, start) : -1;
      if (nl !== -1) return { start, end: nl, whole: true };
      if (reader.eof || reader.len >= maxLineBytes) return start < reader.len ? { start, end: reader.len, whole: false } : undefined;
      reader.grow();
      await reader.fill();
    }
  };

  /** Whether `b[start, end)` is a JSON object (a JSONL record or event). */
  const isRecordLine = (b: Buffer, start: number, end: number): boolean => {
    const text = stripBom(b.toString('utf8', start, end)).trim();
    if (!text.startsWith('{')) return false;
    try {
      return isRecord(JSON.parse(text));
    } catch {
      return false;
    }
  };

  /**
   * Guesses the container of an input without a telling extension from its first non-blank
   * line, read whole however long: a line that parses as a JSON object makes it JSONL; an empty
   * input is an empty JSONL file. A first line that starts like an object but does not parse is
   * a corrupt JSONL line or the first line of a JSON document written over several lines: the
   * next line tells (a record: JSONL).
   */
  const sniff = async (reader: Reader): Promise<Container> => {
    const first = await nextLine(reader, 0);
    if (first === undefined) return 'jsonl';
    if (!first.whole) return 'json';
    if (isRecordLine(reader.buf, first.start, first.end)) return 'jsonl';
    if (reader.buf[first.start] !== 0x7b) return 'json';
    const second = await nextLine(reader, first.end + 1);
    return second?.whole === true && isRecordLine(reader.buf, second.start, second.end) ? 'jsonl' : 'json';
  };

  const readJsonl = async (file: InputFile, ref: FileRef, reader: Reader): Promise<void> => {
    let mode: 'sessions' | 'agent' | undefined = options.format === 'sessions-jsonl' ? 'sessions' : options.format === 'agent-jsonl' ? 'agent' : undefined;
    let announced = false;
    let line = 1;
    // Offset up to which lines were tried for mode detection.
    let scanned = 0;
    for (;;) {
      await reader.fill();
      const { buf, len, eof } = reader;
      // The first line that parses decides: session records, or one agent log.
      while (mode === undefined && scanned < len) {
        const nl = buf.indexOf(10, scanned);
        if (nl === -1 || nl >= len) {
          if (eof) mode = modeOf(buf, scanned, len);
          break;
        }
        mode = modeOf(buf, scanned, nl);
        scanned = nl + 1;
      }
      if (mode !== 'sessions') {
        // An agent log (or nothing parsed at all) is one session: keep the file whole.
        if (eof) break;
        reader.grow();
        continue;
      }
      if (!announced) {
        announced = true;
        await push({ kind: 'format', file, format: 'sessions-jsonl' });
      }
      if (len === 0) return;
      const end = eof ? len : buf.lastIndexOf(10, len - 1) + 1;
      if (end === 0) {
        reader.grow(); // one line longer than the buffer
        continue;
      }
      const data = reader.take(end);
      const firstLine = line;
      line += countNewlines(data, 0, data.length);
      await dispatch(file, { kind: 'sessions', file: ref, data, firstLine });
      if (eof && reader.len === 0) return;
    }
    await dispatch(file, { kind: 'agent', file: ref, data: reader.take(reader.len) });
  };

  const readFile = async (file: InputFile, target: Target): Promise<void> => {
    const source = await openSource(file, options.stdin);
    current = source;
    try {
      const reader = new Reader(source, pool, maxLineBytes);
      let container = options.format !== undefined ? containerOf(options.format) : file.container;
      if (container === undefined) {
        // However long the first lines are, a JSONL file is read line by line and a JSON
        // document whole anyway: reading them whole here costs no memory beyond that.
        await reader.fill();
        container = await sniff(reader);
      }
      await push({ kind: 'open', file, target });
      const ref: FileRef = { path: file.path, rel: file.rel };
      if (container === 'json') {
        await dispatch(file, { kind: 'document', file: ref, data: await reader.all(), format: options.format });
      } else {
        await readJsonl(file, ref, reader);
      }
      await push({ kind: 'close', file });
      pool.give(reader.buf.buffer);
    } catch (error) {
      if (error instanceof InputTooLong) {
        throw new DataError(file.path, undefined, `has a line (or document) longer than ${maxLineBytes} bytes, more than one string can hold`);
      }
      throw error;
    } finally {
      finishedBytes += source.bytesRead();
      current = undefined;
      await source.close();
    }
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

  const failOn = async (file: InputFile, e: JobError): Promise<void> => {
    const error = new DataError(file.path, e.line, e.reason);
    if (options.onError === 'abort') throw error;
    await options.skipped(error, file);
  };

  const writeJob = async (sink: Sink, file: InputFile, result: JobResult<O>): Promise<void> => {
    if (result.format !== undefined) options.fileFormat?.(file, result.format);
    const { data } = result;
    const extra: OutputPatch[] = [];
    let e = 0;
    for (let i = 0; i < result.sessions.length; i++) {
      for (; e < result.errors.length && (result.errors[e] as JobError).after <= i; e++) await failOn(file, result.errors[e] as JobError);
      const more = await options.session(file, result.sessions[i] as SessionResult<O>, data);
      if (more !== undefined) for (const patch of more) extra.push(patch);
      progress.sessionsDone++;
    }
    for (; e < result.errors.length; e++) await failOn(file, result.errors[e] as JobError);
    progress.bytesParsed += result.bytes;
    // The output: the input with the job's patches and the caller's (disjoint) patches applied.
    extra.sort((a, b) => a.start - b.start);
    const { ranges, bytes, lengths } = result.patches;
    const pieces: Uint8Array[] = [];
    let at = 0;
    let from = 0;
    let k = 0;
    let x = 0;
    while (k < lengths.length || x < extra.length) {
      const own = k < lengths.length ? (ranges[2 * k] as number) : Infinity;
      const theirs = x < extra.length ? (extra[x] as OutputPatch).start : Infinity;
      let end: number;
      if (own <= theirs) {
        const n = lengths[k] as number;
        pieces.push(data.subarray(at, own), bytes.subarray(from, from + n));
        from += n;
        end = ranges[2 * k + 1] as number;
        k++;
      } else {
        const p = extra[x] as OutputPatch;
        pieces.push(data.subarray(at, p.start), p.bytes);
        end = p.end;
        x++;
      }
      at = end;
    }
    pieces.push(data.subarray(at));
    await sink.writeAll(
      pieces.filter((p) => p.length > 0),
      () => pool.give(data.buffer),
    );
  };

  const outputs = new Outputs();
  const writer = async (): Promise<void> => {
    let sink: Sink | undefined;
    try {
      for (let next = await queue.shift(); next !== undefined; next = await queue.shift()) {
        const { item, bytes } = next;
        if (item.kind === 'open') {
          sink = await Sink.open(item.target);
        } else if (item.kind === 'format') {
          options.fileFormat?.(item.file, item.format);
        } else if (item.kind === 'job') {
          const result = await item.result;
          jobsInFlight--;
          const wake = jobDone;
          jobDone = undefined;
          wake?.();
          await writeJob(sink as Sink, item.file, result);
        } else {
          await (sink as Sink).finish();
          outputs.add(sink as Sink);
          progress.bytesOut += (sink as Sink).bytes;
          sink = undefined;
          progress.filesDone++;
        }
        queue.done(bytes);
      }
      if (queue.failed !== undefined) throw queue.failed;
    } catch (error) {
      queue.fail(error);
      const wake = jobDone;
      jobDone = undefined;
      wake?.();
      await sink?.discard();
      await outputs.discard();
      throw error;
    }
  };

  const [, written] = await Promise.allSettled([reader(), writer()]);
  if (written.status === 'rejected') throw written.reason;
  return outputs;
}
