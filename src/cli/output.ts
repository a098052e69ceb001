/**
 * Atomic, back-pressured output: a file is written to a temporary name beside its target and
 * renamed on success, so an aborted run never leaves a half-written file; `.gz` targets are
 * compressed.
 * @module
 */
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

/** Where one output goes. */
export type Target = { kind: 'file'; path: string } | { kind: 'stream'; stream: Writable } | { kind: 'none' };

/** A sink with back-pressure; `commit` publishes it, `discard` removes every trace. */
export class Sink {
  private stream: Writable | undefined;
  private file: Writable | undefined;
  private tmp: string | undefined;
  /** Bytes handed to the sink (before compression). */
  bytes = 0;

  private constructor(private readonly target: Target) {}

  /** Opens a sink on `target` (creating parent directories of a file target). */
  static async open(target: Target): Promise<Sink> {
    const sink = new Sink(target);
    if (target.kind === 'file') {
      await mkdir(dirname(target.path), { recursive: true });
      sink.tmp = `${target.path}.ctxdedup-${process.pid}.tmp`;
      sink.file = createWriteStream(sink.tmp, { highWaterMark: 1 << 20 });
      if (target.path.endsWith('.gz')) {
        const gzip = createGzip({ level: 6 });
        gzip.pipe(sink.file);
        sink.stream = gzip;
      } else {
        sink.stream = sink.file;
      }
    } else if (target.kind === 'stream') {
      sink.stream = target.stream;
    }
    return sink;
  }

  /**
   * Writes text or bytes, waiting when the destination is full. `flushed` is called once the
   * destination is done with `data` (so its buffer may be reused).
   */
  async write(data: string | Uint8Array, flushed?: () => void): Promise<void> {
    this.bytes += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    if (this.stream === undefined || data.length === 0) {
      flushed?.();
      return;
    }
    const ok = flushed === undefined ? this.stream.write(data) : this.stream.write(data, () => flushed());
    if (!ok) await once(this.stream, 'drain');
  }

  /**
   * Writes several pieces as one output chunk: one `writev` for a file or pipe (corked), one
   * buffer for gzip (zlib compresses each written chunk on its own, so many small ones are slow).
   */
  async writeAll(pieces: readonly Uint8Array[], flushed?: () => void): Promise<void> {
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
    if (!ok) await once(stream, 'drain');
  }

  /** Flushes and publishes the output (rename into place for files). */
  async commit(): Promise<void> {
    if (this.target.kind !== 'file' || this.stream === undefined || this.file === undefined) return;
    this.stream.end();
    await finished(this.file);
    await rename(this.tmp as string, this.target.path);
  }

  /** Drops a file output that will not be completed. */
  async discard(): Promise<void> {
    if (this.target.kind !== 'file') return;
    const ignore = (): void => undefined;
    this.stream?.on('error', ignore).destroy();
    this.file?.on('error', ignore).destroy();
    if (this.tmp !== undefined) await rm(this.tmp, { force: true });
  }
}
