/**
 * Input discovery and streaming reads: files, directories (recursive, by extension) and stdin,
 * with gzip decompressed transparently.
 * @module
 */
import { createReadStream, type ReadStream } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { DataError, UsageError } from './errors.js';
import type { Container } from './formats.js';
import { decodeUtf8 } from './utf8.js';

/** Extensions picked up when a directory is given. */
export const EXTENSIONS = ['.json', '.jsonl', '.ndjson'] as const;

/** One input file (or stdin). */
export interface InputFile {
  /** Path to read, or `-` for stdin. */
  path: string;
  /** Path relative to the input it came from: the output layout mirrors it. */
  rel: string;
  /** Size on disk in bytes (compressed size for `.gz`); 0 for stdin. */
  size: number;
  gzip: boolean;
  /** Container suggested by the extension, if any. */
  container: Container | undefined;
}

function stripGz(name: string): string {
  return name.endsWith('.gz') ? name.slice(0, -3) : name;
}

/** The container an extension suggests (`.json` / `.jsonl` / `.ndjson`, with or without `.gz`). */
export function containerFromName(name: string): Container | undefined {
  const plain = stripGz(name.toLowerCase());
  if (plain.endsWith('.json')) return 'json';
  if (plain.endsWith('.jsonl') || plain.endsWith('.ndjson')) return 'jsonl';
  return undefined;
}

function isTranscriptName(name: string): boolean {
  return containerFromName(name) !== undefined;
}

async function walk(dir: string, root: string, out: InputFile[]): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      await walk(full, root, out);
    } else if (entry.isFile() && isTranscriptName(entry.name)) {
      const info = await stat(full);
      out.push({ path: full, rel: relative(root, full), size: info.size, gzip: entry.name.endsWith('.gz'), container: containerFromName(entry.name) });
    }
  }
}

/**
 * Expands the command-line inputs into files, in a stable order (directory entries sorted by name).
 * @throws UsageError for a missing input or `-` given twice.
 */
export async function discover(inputs: readonly string[]): Promise<{ files: InputFile[]; directories: number }> {
  const files: InputFile[] = [];
  let directories = 0;
  let stdin = false;
  for (const input of inputs) {
    if (input === '-') {
      if (stdin) throw new UsageError('stdin (-) given more than once');
      stdin = true;
      files.push({ path: '-', rel: '-', size: 0, gzip: false, container: undefined });
      continue;
    }
    let info;
    try {
      info = await stat(input);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new UsageError(`input not found: ${input}`);
      throw inputError({ path: input }, error);
    }
    if (info.isDirectory()) {
      directories++;
      await walk(input, input, files);
    } else {
      const name = basename(input);
      files.push({ path: input, rel: name, size: info.size, gzip: name.endsWith('.gz'), container: containerFromName(name) });
    }
  }
  return { files, directories };
}

/** What a failed read says, for a message that names the file (zlib's messages say nothing of gzip). */
function readFailure(error: Error & { code?: unknown }): string {
  if (error.code === 'Z_BUF_ERROR') return `${error.message} (truncated gzip data)`;
  if (typeof error.code === 'string' && error.code.startsWith('Z_')) return `not valid gzip data: ${error.message}`;
  return error.message;
}

/**
 * An error met while reading `file`, as a DataError that names it (`file: unexpected end of
 * file`). Errors that are not about the input (bugs, errors already located) pass unchanged.
 */
export function inputError(file: Pick<InputFile, 'path'>, error: unknown): unknown {
  if (error instanceof DataError || error instanceof UsageError || !(error instanceof Error)) return error;
  const code = (error as NodeJS.ErrnoException).code;
  if (typeof code !== 'string' || !/^(E[A-Z]+|Z_[A-Z_]+)$/.test(code)) return error;
  return new DataError(file.path, undefined, readFailure(error));
}

/** An open input: decompressed bytes, and a counter of raw bytes read for progress. */
export interface OpenInput {
  stream: AsyncIterable<Buffer>;
  /** Raw (possibly compressed) bytes consumed so far. */
  bytesRead(): number;
  close(): void;
}

/**
 * Opens a file or stdin for streaming; gzip is detected by extension or magic bytes. `opened`: a
 * stream of the file already open (a pipe must not be opened twice: its writer would be lost).
 */
export function openInput(file: InputFile, stdin: Readable = process.stdin, opened?: ReadStream): OpenInput {
  const raw: Readable = file.path === '-' ? stdin : (opened ?? createReadStream(file.path, { highWaterMark: 1 << 20 }));
  let count = 0;
  if (file.path === '-') raw.on('data', (chunk: Buffer) => (count += chunk.length));
  const bytesRead = (): number => (file.path === '-' ? count : (raw as ReadStream).bytesRead);
  const close = (): void => {
    if (file.path !== '-') raw.on('error', () => undefined).destroy();
  };
  if (file.gzip) {
    const gunzip = createGunzip({ chunkSize: 1 << 20 });
    raw.on('error', (e) => gunzip.destroy(e));
    raw.pipe(gunzip);
    const closeBoth = (): void => {
      close();
      gunzip.on('error', () => undefined).destroy();
    };
    return { stream: gunzip, bytesRead, close: closeBoth };
  }
  return { stream: sniffGzip(raw), bytesRead, close };
}

/** Passes bytes through, switching to gunzip if the stream starts with the gzip magic bytes. */
async function* sniffGzip(raw: Readable): AsyncGenerator<Buffer> {
  const iterator = raw[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first = await iterator.next();
  if (first.done) return;
  const head = first.value;
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) {
    const gunzip = createGunzip({ chunkSize: 1 << 20 });
    const feed = (async () => {
      try {
        if (gunzip.destroyed) return;
        if (!gunzip.write(head)) await new Promise((r) => gunzip.once('drain', r));
        for (let next = await iterator.next(); !next.done && !gunzip.destroyed; next = await iterator.next()) {
          if (!gunzip.write(next.value)) await new Promise((r) => gunzip.once('drain', r));
        }
        if (!gunzip.destroyed) gunzip.end();
      } catch (error) {
        gunzip.destroy(error as Error);
      }
    })();
    yield* gunzip as AsyncIterable<Buffer>;
    await feed;
    return;
  }
  yield head;
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
}

/** Reads a whole stream into one buffer. */
export async function readAll(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/** One line of a stream: its text without the `\n` (a trailing `\r` is kept) and 1-based number. */
export interface Line {
  text: string;
  number: number;
  /** Whether a `\n` ended the line (false only for a last line without one). */
  eol: boolean;
  /** UTF-8 bytes of the line including its `\n`. */
  bytes: number;
}

/** Splits a byte stream into UTF-8 lines without holding more than one line at a time. */
export async function* lines(stream: AsyncIterable<Buffer>): AsyncGenerator<Line> {
  let pending: Buffer[] = [];
  let number = 0;
  for await (const chunk of stream) {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      let text: string;
      let bytes = piece.length + 1;
      if (pending.length === 0) text = decodeUtf8(piece);
      else {
        const whole = Buffer.concat([...pending, piece]);
        bytes = whole.length + 1;
        text = decodeUtf8(whole);
      }
      pending = [];
      yield { text, number: ++number, eol: true, bytes };
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
  if (pending.length > 0) {
    const whole = Buffer.concat(pending);
    yield { text: decodeUtf8(whole), number: ++number, eol: false, bytes: whole.length };
  }
}

/**
 * Raw bytes of an input, read into buffers the caller provides (so a run reuses a few buffers
 * instead of allocating, and page-faulting, a fresh one per chunk).
 */
export interface ByteSource {
  /** Reads up to `length` bytes into `into` at `offset`; 0 at the end. */
  read(into: Buffer, offset: number, length: number): Promise<number>;
  /** Raw (possibly compressed) bytes consumed so far. */
  bytesRead(): number;
  close(): Promise<void>;
}

/** A source over a stream: chunks are copied into the caller's buffers. */
function streamSource(file: InputFile, input: OpenInput): ByteSource {
  const iterator = input.stream[Symbol.asyncIterator]();
  let left: Buffer | undefined;
  let ended = false;
  return {
    async read(into, offset, length) {
      while (left === undefined || left.length === 0) {
        if (ended) return 0;
        let next: IteratorResult<Buffer>;
        try {
          next = await iterator.next();
        } catch (error) {
          throw inputError(file, error);
        }
        if (next.done) {
          ended = true;
          return 0;
        }
        left = next.value;
      }
      const n = Math.min(length, left.length);
      left.copy(into, offset, 0, n);
      left = left.subarray(n);
      return n;
    },
    bytesRead: input.bytesRead,
    async close() {
      input.close();
    },
  };
}

/**
 * Opens an input for reading: a regular file that is not gzip (by extension or magic bytes) is
 * read straight into the caller's buffers; stdin, pipes and gzip go through a stream.
 * @throws DataError naming the file when it cannot be opened or read (see {@link inputError})
 */
export async function openSource(file: InputFile, stdin: Readable = process.stdin): Promise<ByteSource> {
  try {
    return await openSourceUnnamed(file, stdin);
  } catch (error) {
    throw inputError(file, error);
  }
}

async function openSourceUnnamed(file: InputFile, stdin: Readable): Promise<ByteSource> {
  if (file.path !== '-' && !file.gzip) {
    const handle = await open(file.path, 'r');
    let direct = false;
    let regular = false;
    try {
      regular = (await handle.stat()).isFile();
      if (regular) {
        const head = Buffer.alloc(2);
        const { bytesRead } = await handle.read(head, 0, 2, 0);
        direct = !(bytesRead === 2 && head[0] === 0x1f && head[1] === 0x8b);
      }
    } finally {
      if (!direct && regular) await handle.close();
    }
    // A pipe or a device (a FIFO, `<(cmd)`): streamed from this open, never opened again.
    if (!regular) return streamSource(file, openInput(file, stdin, handle.createReadStream({ highWaterMark: 1 << 20 })));
    if (direct) {
      let position = 0;
      return {
        async read(into, offset, length) {
          let bytesRead: number;
          try {
            ({ bytesRead } = await handle.read(into, offset, length, position));
          } catch (error) {
            throw inputError(file, error);
          }
          position += bytesRead;
          return bytesRead;
        },
        bytesRead: () => position,
        close: () => handle.close(),
      };
    }
  }
  return streamSource(file, openInput(file, stdin));
}
