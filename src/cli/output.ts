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

  /** Writes text or bytes, waiting when the destination is full. */
  async write(data: string | Buffer): Promise<void> {
    this.bytes += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    if (this.stream === undefined) return;
    if (!this.stream.write(data)) await once(this.stream, 'drain');
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
