/**
 * Worker thread of `ctxdedup dedupe --jobs N`: parses, deduplicates and re-emits the jobs the
 * main thread sends (see pool.ts), one at a time, in arrival order.
 * @module
 */
import { parentPort, workerData } from 'node:worker_threads';
import { dedupeHandler, loadEngine, type DedupeOutcome } from './dedupe-session.js';
import { processJob, type Job, type JobResult } from './jobs.js';
import type { WorkerInit, WorkerReply, WorkerRequest } from './pool.js';
import { SharedCounts } from './shared-counts.js';

const port = parentPort;
if (port === null) throw new Error('ctxdedup: worker.js must run as a worker thread');
const init = workerData as WorkerInit;
const counts = init.tokenCounts === undefined ? undefined : new SharedCounts(init.tokenCounts);
const handler = dedupeHandler(init.settings, await loadEngine(init.settings, init.engineModule), counts);

// Jobs run strictly one after another: a worker is one core's worth of work, and the main
// thread bounds how many jobs wait here.
let chain: Promise<void> = Promise.resolve();
port.on('message', (request: WorkerRequest) => {
  chain = chain.then(async () => {
    let reply: WorkerReply;
    let transfer: ArrayBuffer[] = [];
    try {
      const result: JobResult<DedupeOutcome> = await processJob(request.job as Job, handler);
      reply = { id: request.id, result };
      const { ranges, bytes, lengths } = result.patches;
      transfer = [result.data.buffer as ArrayBuffer, ranges.buffer as ArrayBuffer, bytes.buffer as ArrayBuffer, lengths.buffer as ArrayBuffer];
    } catch (error) {
      reply = { id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
    port.postMessage(reply, transfer);
  });
});
