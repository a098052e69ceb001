/**
 * An in-process matrix of embeddings keyed by memory id, searched natively. The embedded stores
 * (in-memory and SQLite) keep one so that `nearest` never leaves the process.
 * @internal
 * @module
 */
import { native } from '../native.js';
import { rangeError } from '../validation.js';

const INITIAL_ROWS = 64;

/** Growable row-major `Float32Array` with swap-remove, so deletes stay O(dim). */
export class VectorIndex {
  #ids: string[] = [];
  #slot = new Map<string, number>();
  #data = new Float32Array(0);
  #dim: number | undefined;

  /** Components per vector, fixed by the first vector stored (undefined while empty). */
  get dim(): number | undefined {
    return this.#dim;
  }

  get size(): number {
    return this.#ids.length;
  }

  /** Throws a RangeError if `vector` cannot live in this index. */
  check(vector: Float32Array, path: string): void {
    if (this.#dim !== undefined && this.#ids.length > 0 && vector.length !== this.#dim) {
      rangeError(path, `has ${vector.length} dimensions, the store holds ${this.#dim}-dimensional embeddings`);
    }
  }

  /** Adds or replaces the vector of `id`. */
  set(id: string, vector: Float32Array): void {
    this.check(vector, 'embedding');
    if (this.#ids.length === 0) this.#dim = vector.length;
    const dim = vector.length;
    let slot = this.#slot.get(id);
    if (slot === undefined) {
      slot = this.#ids.length;
      if ((slot + 1) * dim > this.#data.length) {
        const grown = new Float32Array(Math.max(INITIAL_ROWS, (slot + 1) * 2) * dim);
        grown.set(this.#data.subarray(0, slot * dim));
        this.#data = grown;
      }
      this.#ids.push(id);
      this.#slot.set(id, slot);
    }
    this.#data.set(vector, slot * dim);
  }

  /** Removes `id`'s vector; the last row moves into its slot. */
  delete(id: string): void {
    const slot = this.#slot.get(id);
    if (slot === undefined) return;
    const last = this.#ids.length - 1;
    const dim = this.#dim!;
    if (slot !== last) {
      const moved = this.#ids[last]!;
      this.#data.copyWithin(slot * dim, last * dim, (last + 1) * dim);
      this.#ids[slot] = moved;
      this.#slot.set(moved, slot);
    }
    this.#ids.pop();
    this.#slot.delete(id);
  }

  /** The `k` nearest ids by exact cosine similarity, most similar first, ties by id. */
  nearest(vector: Float32Array, k: number): { id: string; similarity: number }[] {
    const n = this.#ids.length;
    if (n === 0 || k <= 0) return [];
    this.check(vector, 'query vector');
    const dim = this.#dim!;
    const data = this.#data.subarray(0, n * dim);
    k = Math.min(k, n);
    // The native search breaks ties by slot, not id: one more than `k` shows whether a tie crosses
    // the k-th place, and the search widens until the last one found is below the k-th.
    let want = Math.min(n, k + 1);
    let found = native.cosineNearest(data, dim, vector, want);
    while (want < n && found.similarities[want - 1] === found.similarities[k - 1]) {
      want = Math.min(n, want * 2);
      found = native.cosineNearest(data, dim, vector, want);
    }
    const hits = Array.from(found.indices, (slot, i) => ({ id: this.#ids[slot]!, similarity: found.similarities[i]! }));
    hits.sort((a, b) => b.similarity - a.similarity || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return hits.slice(0, k);
  }
}
