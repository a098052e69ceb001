/**
 * Batch identity: SHA-256 per content and in-batch first occurrences, natively in one call (off
 * the main thread for large batches). The pure-JS baseline the benchmarks compare against lives
 * in bench/reference/hashing.ts.
 * @module
 */
import { native } from '../native.js';

/** Digests and first occurrences of a batch. */
export interface BatchIdentity {
  /** 64 lowercase hex characters per content, concatenated in batch order. */
  hex: string;
  /** For each content, the index of the first content with the same digest (itself if first). */
  first: Uint32Array;
}

/**
 * How a batch is hashed: natively, the only mode.
 * @deprecated The `js` mode (node:crypto + Map) was the benchmarks' baseline and moved to
 *   bench/reference/hashing.ts; options of this type accept only `'native'`.
 */
export type Hashing = 'native';

/**
 * Default total size (UTF-16 code units) from which native hashing runs on a worker thread:
 * 256 Ki units, about 0.6 ms of hashing. Below it the batch is hashed inline, which is cheaper
 * than the hop: the copy into an owned buffer plus a wait for the libuv pool, which under CPU
 * contention was the slowest 1% of a server's requests (p99 9 ms for 100 × 1 KB instead of 1 ms).
 */
export const DEFAULT_ASYNC_THRESHOLD = 256 * 1024;

/**
 * Hashes and groups well-formed contents (the caller has validated them).
 *
 * @param asyncThreshold batches whose total length reaches this many UTF-16 code units are hashed
 *   off the main thread.
 */
export async function hashBatch(contents: string[], totalUnits: number, asyncThreshold = DEFAULT_ASYNC_THRESHOLD): Promise<BatchIdentity> {
  const batch = totalUnits >= asyncThreshold ? await native.ingestHashBatchAsync(contents) : native.ingestHashBatch(contents);
  return { hex: batch.sha256, first: batch.first };
}
