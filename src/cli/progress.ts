/**
 * A one-line progress display on stderr: bytes and sessions done, rate and ETA.
 * @module
 */
import type { Writable } from 'node:stream';
import type { PipelineProgress } from './pipeline.js';
import { formatBytes } from './report.js';

function clock(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const mm = String(m).padStart(h > 0 ? 2 : 1, '0');
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

/** Redraws a status line every 200 ms until stopped. */
export class Progress {
  private timer: NodeJS.Timeout | undefined;
  private readonly started = Date.now();
  private drawn = false;
  private stopped = false;

  /**
   * @param out - the stream to draw on (stderr)
   * @param state - counters updated by the pipeline
   * @param totalBytes - raw bytes of all inputs (0 when unknown, e.g. stdin)
   * @param totalFiles - number of input files
   */
  constructor(
    private readonly out: Writable & { columns?: number },
    private readonly state: PipelineProgress,
    private readonly totalBytes: number,
    private readonly totalFiles: number,
  ) {}

  /** The current status line. */
  line(): string {
    const elapsed = (Date.now() - this.started) / 1000;
    const done = this.state.bytesRead();
    const rate = elapsed > 0 ? done / elapsed : 0;
    const parts = [`ctxdedup ${formatBytes(done)}`];
    if (this.totalBytes > 0) {
      const fraction = Math.min(1, done / this.totalBytes);
      const width = 20;
      const filled = Math.round(fraction * width);
      parts[0] = `ctxdedup [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${formatBytes(done)}/${formatBytes(this.totalBytes)}`;
    }
    parts.push(`${this.state.sessionsDone.toLocaleString('en-US')} sessions`);
    parts.push(`files ${this.state.filesDone}/${this.totalFiles}`);
    parts.push(`${formatBytes(rate)}/s`);
    if (this.totalBytes > 0 && rate > 0) parts.push(`ETA ${clock((this.totalBytes - done) / rate)}`);
    const text = parts.join('  ');
    const columns = this.out.columns ?? 120;
    return text.length >= columns ? text.slice(0, columns - 1) : text;
  }

  private draw(): void {
    this.out.write(`\r\x1b[2K${this.line()}`);
    this.drawn = true;
  }

  /** Starts redrawing. */
  start(): void {
    this.timer = setInterval(() => this.draw(), 200);
    this.timer.unref();
  }

  /** Draws the final state and ends the line. */
  /** Draws the final state and ends the line (once; later calls do nothing). */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.draw();
    if (this.drawn) this.out.write('\n');
  }
}
