/**
 * The storage contract of the memory deduplicator: what a memory is, and the async interface
 * every store (in-memory, SQLite, ChromaDB) implements.
 * @module
 */

/** One memory as the application sees it. */
export interface Memory {
  /** Unique, non-empty id. */
  id: string;
  /** The remembered fact, as text. */
  content: string;
  /**
   * When the memory was written, in milliseconds since the epoch. Decides which of two memories
   * is the newer one; a memory without a timestamp counts as older than any with one.
   */
  timestamp?: number | undefined;
  /**
   * Free-form metadata, kept verbatim (e.g. `{ speaker, intensity }`): a plain JSON object of
   * JSON values. The deduplicator refuses values JSON would change (NaN, `undefined`, a `Date` or
   * anything with `toJSON`, class instances, holes, cycles) rather than coercing them.
   */
  metadata?: Record<string, unknown> | undefined;
}

/** A memory together with its embedding, as stores hold it. */
export interface StoredMemory extends Memory {
  /**
   * The memory's embedding, finite numbers only (stores reject NaN and infinite components);
   * every memory of one store has the same dimension.
   */
  embedding: Float32Array;
}

/** One result of {@link MemoryStore.nearest}. */
export interface NearestMemory {
  memory: StoredMemory;
  /** Cosine similarity between the query vector and the memory's embedding, in [-1, 1]. */
  similarity: number;
}

/**
 * Where memories live. Every method is async so that remote stores (ChromaDB) and embedded ones
 * (SQLite, in-memory) are interchangeable.
 */
export interface MemoryStore {
  /** `memory`, `sqlite` or `chroma`. */
  readonly kind: string;
  /** Inserts a memory. Rejects if a memory with this id exists. */
  add(memory: StoredMemory): Promise<void>;
  /** Replaces the memory with this id (content, embedding, timestamp, metadata). Rejects if absent. */
  update(memory: StoredMemory): Promise<void>;
  /** Removes the memory with this id; resolves `false` if there was none. */
  delete(id: string): Promise<boolean>;
  /** The memory with this id, or `undefined`. */
  get(id: string): Promise<StoredMemory | undefined>;
  /** Every stored memory (order unspecified). */
  list(): Promise<StoredMemory[]>;
  /**
   * The `k` memories most similar to `vector` by cosine similarity, most similar first. Ties are
   * broken by id so that results are deterministic for embedded stores. `vector` is a
   * `Float32Array` of finite numbers (TypeError / RangeError otherwise); `k` an integer `>= 0`
   * (0 returns nothing; RangeError otherwise).
   */
  nearest(vector: Float32Array, k: number): Promise<NearestMemory[]>;
  /** Releases connections and file handles. Idempotent. */
  close(): Promise<void>;
}
