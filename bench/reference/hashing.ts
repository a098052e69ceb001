/**
 * The pure-JS baseline of the ingestion index's batch identity (src/ingest/hash.ts): node:crypto
 * SHA-256 per content, then a `Map` from digest to first index. Same results as the native path.
 *
 * `hashBatch` has the signature of src/ingest/hash.ts's, so a whole server can run on this
 * baseline: bench/reference/js-hashing.mjs (`node --import tsx --import ./bench/reference/js-hashing.mjs
 * src/server/main.ts ...`) resolves the product's hash module to this one. The product itself has no
 * switch for it.
 * @module
 */
import { createHash } from 'node:crypto';
import type { BatchIdentity } from '../../src/ingest/hash.js';

/** Digests and first occurrences of a batch, with node:crypto and a JS `Map`. */
export function hashBatchJs(contents: readonly string[]): BatchIdentity {
  const first = new Uint32Array(contents.length);
  const seen = new Map<string, number>();
  const digests: string[] = new Array(contents.length);
  contents.forEach((content, i) => {
    const digest = createHash('sha256').update(content, 'utf8').digest('hex');
    digests[i] = digest;
    const earlier = seen.get(digest);
    if (earlier === undefined) seen.set(digest, i);
    first[i] = earlier ?? i;
  });
  return { hex: digests.join(''), first };
}

/** Stands in for src/ingest/hash.ts's `hashBatch` (always inline: the baseline has no worker path). */
export async function hashBatch(contents: string[]): Promise<BatchIdentity> {
  return hashBatchJs(contents);
}

// The product's threshold (the ingestion index uses it for its near-duplicate window too).
export { DEFAULT_ASYNC_THRESHOLD } from '../../src/ingest/hash.js';
