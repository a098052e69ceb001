/**
 * `InMemoryStore`: memories in a `Map`, nearest neighbours searched natively. For tests and
 * small apps; nothing survives the process.
 * @module
 */
import type { MemoryStore, NearestMemory, StoredMemory } from './store.js';
import { copyMemory, expectNearestK, expectVector } from './validate.js';
import { VectorIndex } from './vector-index.js';

/** A process-local {@link MemoryStore}. Values are copied in and out, never shared. */
export class InMemoryStore implements MemoryStore {
  readonly kind = 'memory';
  #memories = new Map<string, StoredMemory>();
  #index = new VectorIndex();

  /**
   * @throws RangeError (before anything changes) if the embedding has a non-finite component or
   *   another dimension than the stored ones; TypeError if it is not a `Float32Array`.
   */
  async add(memory: StoredMemory): Promise<void> {
    expectVector(memory.embedding, 'memory.embedding');
    if (this.#memories.has(memory.id)) throw new Error(`ctxdedup: memory ${JSON.stringify(memory.id)} already exists`);
    this.#index.set(memory.id, memory.embedding);
    this.#memories.set(memory.id, copyMemory(memory));
  }

  /** Validates the embedding as {@link InMemoryStore.add} does. */
  async update(memory: StoredMemory): Promise<void> {
    expectVector(memory.embedding, 'memory.embedding');
    if (!this.#memories.has(memory.id)) throw new Error(`ctxdedup: memory ${JSON.stringify(memory.id)} does not exist`);
    this.#index.set(memory.id, memory.embedding);
    this.#memories.set(memory.id, copyMemory(memory));
  }

  async delete(id: string): Promise<boolean> {
    this.#index.delete(id);
    return this.#memories.delete(id);
  }

  async get(id: string): Promise<StoredMemory | undefined> {
    const memory = this.#memories.get(id);
    return memory && copyMemory(memory);
  }

  async list(): Promise<StoredMemory[]> {
    return Array.from(this.#memories.values(), copyMemory);
  }

  /**
   * @throws TypeError if `vector` is not a `Float32Array` or `k` not a number; RangeError if a
   *   component of `vector` is not finite or `k` is not a non-negative integer.
   */
  async nearest(vector: Float32Array, k: number): Promise<NearestMemory[]> {
    expectVector(vector, 'vector');
    expectNearestK(k);
    return this.#index.nearest(vector, k).map(({ id, similarity }) => ({ memory: copyMemory(this.#memories.get(id)!), similarity }));
  }

  async close(): Promise<void> {}
}
