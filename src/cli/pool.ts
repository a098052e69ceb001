/**
 * Where jobs run: on the main thread, or on a pool of worker threads (`--jobs N`). Either way a
 * job's result is the same bytes and outcomes (jobs.ts depends on nothing else), so the output
 * does not depend on the number of workers.
 * @module
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { DedupeOutcome, DedupeSettings } from './dedupe-session.js';
import { processJob, type Job, type JobResult, type SessionHandler } from './jobs.js';

/** Runs jobs; results may complete out of order (the pipeline restores input order). */
export interface Executor<O> {
  run(job: Job): Promise<JobResult<O>>;
  /** Stops every thread it started. */
  close(): Promise<void>;
}

/** What a worker is started with. */
export interface WorkerInit {
  settings: DedupeSettings;
  /** URL of a module exporting `engine` (default: the native stage). */
  engineModule?: string | undefined;
  /**
   * Only when the CLI runs from its TypeScript sources (tests): URL of a module the worker
   * thread starts with, which makes TypeScript importable and then imports `workerData.entry`.
   */
  loader?: string | undefined;
  /** The run's shared token counts (see shared-counts.ts). */
  tokenCounts?: SharedArrayBuffer | undefined;
}

/** Main thread -> worker. */
export interface WorkerRequest {
  id: number;
  job: Job;
}

/** Worker -> main thread: a result, or the stack of an unexpected error. */
export type WorkerReply = { id: number; result: JobResult<DedupeOutcome> } | { id: number; error: string };

/** Runs jobs on the calling thread. */
export function inProcess<O>(handler: SessionHandler<O>): Executor<O> {
  return { run: (job) => processJob(job, handler), close: async () => undefined };
}

/** The number of worker threads `--jobs` defaults to: one per CPU the process may use. */
export function defaultJobs(): number {
  return availableParallelism();
}

interface Pending {
  resolve(result: JobResult<DedupeOutcome>): void;
  reject(error: Error): void;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
}

function startWorker(init: WorkerInit): Worker {
  const here = import.meta.url;
  // The built CLI runs dist/cli/worker.js; from source the worker is TypeScript and needs the
  // caller's loader in its thread first (the product never loads a TypeScript toolchain).
  if (here.endsWith('.ts')) {
    if (init.loader === undefined) throw new Error('ctxdedup: worker threads of the CLI run from TypeScript sources need a loader (RunHooks.workerLoader)');
    return new Worker(new URL(init.loader), { workerData: { ...init, entry: new URL('./worker.ts', here).href } });
  }
  return new Worker(new URL('./worker.js', here), { workerData: init });
}

/**
 * A fixed pool of worker threads, each running the dedupe handler on one job at a time. A job
 * goes to the worker with the fewest jobs queued; its input bytes are transferred, not copied,
 * and so are its output bytes on the way back.
 */
export class WorkerPool implements Executor<DedupeOutcome> {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private failure: Error | undefined;

  /**
   * Workers start as jobs need them (a new one only while every started one is busy), so a
   * small input never pays for `size` threads.
   * @param size - most worker threads
   * @param init - settings and engine of every worker
   */
  constructor(
    private readonly size: number,
    private readonly init: WorkerInit,
  ) {}

  /** Worker threads started so far. */
  get threads(): number {
    return this.slots.length;
  }

  private start(): Slot {
    const slot: Slot = { worker: startWorker(this.init), pending: new Map() };
    slot.worker.on('message', (reply: WorkerReply) => {
      const pending = slot.pending.get(reply.id);
      if (pending === undefined) return;
      slot.pending.delete(reply.id);
      if ('result' in reply) pending.resolve(reply.result);
      else pending.reject(new Error(`ctxdedup worker: ${reply.error}`));
    });
    slot.worker.on('error', (error: Error) => this.fail(error));
    slot.worker.on('exit', (code) => {
      if (slot.pending.size > 0) this.fail(new Error(`ctxdedup worker exited with code ${code}`));
    });
    this.slots.push(slot);
    return slot;
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const slot of this.slots) {
      for (const pending of slot.pending.values()) pending.reject(this.failure);
      slot.pending.clear();
    }
  }

  run(job: Job): Promise<JobResult<DedupeOutcome>> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    let slot = this.slots[0];
    for (const s of this.slots) if (slot === undefined || s.pending.size < slot.pending.size) slot = s;
    if (slot === undefined || (slot.pending.size > 0 && this.slots.length < this.size)) slot = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      slot.pending.set(id, { resolve, reject });
      const request: WorkerRequest = { id, job };
      slot.worker.postMessage(request, [job.data.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}

/**
 * Runs jobs on the calling thread until `threshold` input bytes have gone by, then on a pool
 * started at that point: small runs never pay for starting workers (and loading the tokenizer
 * in each), large ones get every core.
 */
export class HybridExecutor implements Executor<DedupeOutcome> {
  private pool: Executor<DedupeOutcome> | undefined;
  private sent = 0;

  constructor(
    private readonly local: Executor<DedupeOutcome>,
    private readonly startPool: () => Executor<DedupeOutcome>,
    private readonly threshold: number,
  ) {}

  run(job: Job): Promise<JobResult<DedupeOutcome>> {
    if (this.pool === undefined) {
      this.sent += job.data.byteLength;
      if (this.sent <= this.threshold) return this.local.run(job);
      this.pool = this.startPool();
    }
    return this.pool.run(job);
  }

  async close(): Promise<void> {
    await Promise.all([this.local.close(), this.pool?.close()]);
  }
}
