/**
 * Atomic, back-pressured output. A file is written to a temporary file beside its target (created
 * exclusively, never over an existing file), flushed to disk, and renamed into place only when
 * complete, so a failure (a full disk, a crash) never leaves a half-written output; `.gz` targets
 * are compressed. Every file the CLI writes goes through {@link Sink} (see also
 * {@link finishedFile}); a write failure becomes an {@link OutputError} naming the output.
 * @module
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, rmdirSync, unlinkSync, type WriteStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline, type Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { OutputError } from './errors.js';

/** Where one output goes. */
export type Target = { kind: 'file'; path: string } | { kind: 'stream'; stream: Writable } | { kind: 'none' };

/** Temporary files of open outputs, neither published nor discarded yet. */
const temporaries = new Set<string>();

/**
 * Folders the run created for its outputs: `[deepest, first created]` per output whose folder did
 * not exist. A run that commits nothing removes them again ({@link removeCreatedFolders}).
 */
const createdFolders: [string, string][] = [];

/** Whether the run has started publishing its outputs (see {@link beginCommit}). */
let committing = false;

/**
 * Marks the start of the commit: from here on the run publishes outputs (renames finished files),
 * so a signal must let it finish rather than stop it half-way (see `main.ts`).
 */
export function beginCommit(): void {
  committing = true;
}

/** Whether {@link beginCommit} was called. */
export function isCommitting(): boolean {
  return committing;
}

/**
 * Removes every temporary output file still open, synchronously: for a process that is about to
 * exit on a signal (SIGINT, SIGTERM), which commits nothing either.
 */
export function removeTemporaries(): void {
  for (const path of temporaries) {
    try {
      unlinkSync(path);
    } catch {
      // Already gone, or not ours to remove: nothing more to do on the way out.
    }
  }
  temporaries.clear();
  removeCreatedFolders();
}

/**
 * Removes the folders the run created for outputs it did not commit, deepest first, each only if
 * it is empty (synchronously: also on the way out after a signal). A run that committed keeps
 * them: call {@link keepCreatedFolders}.
 */
export function removeCreatedFolders(): void {
  for (const [deepest, first] of createdFolders.splice(0).reverse()) {
    for (let folder = deepest; ; folder = dirname(folder)) {
      try {
        rmdirSync(folder);
      } catch {
        // Not empty (another output, or something not ours), or already gone: leave it and above.
        break;
      }
      if (folder === first || dirname(folder) === folder) break;
    }
  }
}

/** The run committed: the folders it created hold its outputs. */
export function keepCreatedFolders(): void {
  createdFolders.length = 0;
}

/**
 * A sink with back-pressure. `finish` completes it (a file is flushed to disk under its temporary
 * name), `publish` renames it into place, `commit` does both; `discard` removes every trace.
 */
export class Sink {
  private stream: Writable | undefined;
  private file: WriteStream | undefined;
  private tmp: string | undefined;
  private failure: unknown;
  /** Settles when the destination is done with the last write (stream targets). */
  private lastWrite: Promise<void> = Promise.resolve();
  private done = false;
  private readonly onError = (error: unknown): void => {
    this.failure ??= error;
  };
  /** Bytes handed to the sink (before compression). */
  bytes = 0;

  private constructor(private readonly target: Target) {}

  /** What messages call the output. */
  private get name(): string {
    return this.target.kind === 'file' ? this.target.path : 'stdout';
  }

  /** Opens a sink on `target` (creating parent directories of a file target). */
  static async open(target: Target): Promise<Sink> {
    const sink = new Sink(target);
    if (target.kind === 'file') {
      try {
        const first = await mkdir(dirname(target.path), { recursive: true });
        if (first !== undefined) createdFolders.push([dirname(target.path), first]);
      } catch (error) {
        throw new OutputError(target.path, error);
      }
      // Beside the target (a rename within one folder is atomic), hidden, never over a file.
      sink.tmp = join(dirname(target.path), `.${basename(target.path).slice(0, 200)}.${randomBytes(6).toString('hex')}.ctxdedup.tmp`);
      temporaries.add(sink.tmp);
      const file = createWriteStream(sink.tmp, { flags: 'wx', highWaterMark: 1 << 20 });
      file.on('error', sink.onError);
      sink.file = file;
      if (target.path.endsWith('.gz')) {
        const gzip = createGzip({ level: 6 });
        // A failure on either side destroys both (so a wait for 'drain' ends).
        pipeline(gzip, file, (error) => {
          if (error) sink.onError(error);
        });
        sink.stream = gzip;
      } else {
        sink.stream = file;
      }
    } else if (target.kind === 'stream') {
      sink.stream = target.stream;
      target.stream.on('error', sink.onError);
    }
    return sink;
  }

  /** Throws the failure of the destination, if any. */
  private check(): void {
    if (this.failure !== undefined) throw new OutputError(this.name, this.failure);
  }

  /** One write; for a stream target, also remembered so `finish` can wait for it. */
  private put(stream: Writable, data: string | Uint8Array, flushed?: () => void): boolean {
    if (this.target.kind !== 'stream') return flushed === undefined ? stream.write(data) : stream.write(data, () => flushed());
    let ok = true;
    this.lastWrite = new Promise<void>((resolve) => {
      ok = stream.write(data, (error) => {
        if (error) this.onError(error);
        flushed?.();
        resolve();
      });
    });
    return ok;
  }

  /** Waits until `stream` can take more, or fails. */
  private async drain(stream: Writable): Promise<void> {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        stream.off('drain', done).off('close', done).off('error', done);
        resolve();
      };
      stream.on('drain', done).on('close', done).on('error', done);
    });
    this.check();
  }

  /**
   * Writes text or bytes, waiting when the destination is full. `flushed` is called once the
   * destination is done with `data` (so its buffer may be reused).
   */
  async write(data: string | Uint8Array, flushed?: () => void): Promise<void> {
    this.check();
    this.bytes += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    const stream = this.stream;
    if (stream === undefined || data.length === 0) {
      flushed?.();
      return;
    }
    if (!this.put(stream, data, flushed)) await this.drain(stream);
  }

  /**
   * Writes several pieces as one output chunk: one `writev` for a file (corked), one buffer for
   * gzip or a stream (zlib compresses each written chunk on its own, so many small ones are slow).
   */
  async writeAll(pieces: readonly Uint8Array[], flushed?: () => void): Promise<void> {
    this.check();
    const stream = this.stream;
    if (stream === undefined || pieces.length === 0) {
      for (const piece of pieces) this.bytes += piece.length;
      flushed?.();
      return;
    }
    if (pieces.length === 1) return this.write(pieces[0] as Uint8Array, flushed);
    if (stream !== this.file) {
      const one = Buffer.concat(pieces);
      flushed?.(); // copied
      return this.write(one);
    }
    let ok = true;
    stream.cork();
    pieces.forEach((piece, i) => {
      this.bytes += piece.length;
      ok = (i === pieces.length - 1 && flushed !== undefined ? stream.write(piece, () => flushed()) : stream.write(piece)) && ok;
    });
    stream.uncork();
    if (!ok) await this.drain(stream);
  }

  /**
   * Completes the output without publishing it: a file is flushed and synced to disk under its
   * temporary name; for a stream, every write has been taken.
   * @throws OutputError when the destination failed
   */
  async finish(): Promise<void> {
    if (this.done) return;
    this.check();
    if (this.target.kind === 'stream') {
      await this.lastWrite;
      this.target.stream.off('error', this.onError);
      this.check();
    } else if (this.file !== undefined && this.stream !== undefined) {
      this.stream.end();
      try {
        await finished(this.file);
        const handle = await open(this.tmp as string, 'r');
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
      } catch (error) {
        this.onError(error);
      }
      this.check();
    }
    this.done = true;
  }

  /** Renames a finished file into place (nothing to do for other targets). */
  async publish(): Promise<void> {
    if (this.target.kind !== 'file' || this.tmp === undefined) return;
    try {
      await rename(this.tmp, this.target.path);
      temporaries.delete(this.tmp);
    } catch (error) {
      throw new OutputError(this.target.path, error);
    }
    this.tmp = undefined;
  }

  /** Flushes and publishes the output (rename into place for files). */
  async commit(): Promise<void> {
    await this.finish();
    await this.publish();
  }

  /** Drops an output that will not be completed (a file's temporary file is removed). */
  async discard(): Promise<void> {
    if (this.target.kind === 'stream') {
      this.target.stream.off('error', this.onError);
      return;
    }
    if (this.target.kind !== 'file') return;
    const ignore = (): void => undefined;
    this.stream?.on('error', ignore).destroy();
    this.file?.on('error', ignore).destroy();
    if (this.file !== undefined && !this.file.closed) await new Promise<void>((resolve) => (this.file as WriteStream).once('close', () => resolve()));
    if (this.tmp !== undefined) {
      await rm(this.tmp, { force: true });
      temporaries.delete(this.tmp);
    }
    this.tmp = undefined;
  }
}

/**
 * Writes `text` on stdout and waits until it is taken.
 * @throws OutputError when stdout fails (full, closed)
 */
export function print(stdout: Writable, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    stdout.write(text, (error) => (error ? reject(new OutputError('stdout', error)) : resolve()));
  });
}

/**
 * A file of `data` written under its temporary name and synced, to publish later with the other
 * outputs ({@link Outputs}); nothing is left on failure.
 * @throws OutputError naming `path`
 */
export async function finishedFile(path: string, data: string | Uint8Array): Promise<Sink> {
  const sink = await Sink.open({ kind: 'file', path });
  try {
    await sink.write(data);
    await sink.finish();
    return sink;
  } catch (error) {
    await sink.discard();
    throw error;
  }
}

/**
 * Finished sinks published together: `publish` renames each into place in the order they were
 * added, `discard` removes every one not published yet.
 */
export class Outputs {
  private readonly sinks: Sink[] = [];

  /** Adds a finished sink. */
  add(sink: Sink): void {
    this.sinks.push(sink);
  }

  /** Renames every sink into place, in order. */
  async publish(): Promise<void> {
    while (this.sinks.length > 0) {
      await (this.sinks[0] as Sink).publish();
      this.sinks.shift();
    }
  }

  /** Removes the temporary files of every sink not published. */
  async discard(): Promise<void> {
    const sinks = this.sinks.splice(0);
    await Promise.all(sinks.map((s) => s.discard()));
  }
}
