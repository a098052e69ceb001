/**
 * `InMemoryStore`: memories in a `Map`, nearest neighbours searched natively. For tests and
 * small apps; nothing survives the process.
 * @module
 */
import type { MemoryStore, NearestMemory, StoredMemory } from './store.js';
import { copyMemory } from './validate.js';
import { VectorIndex } from './vector-index.js';

/** A process-local {@link MemoryStore}. Values are copied in and out, never shared. */
export class InMemoryStore implements MemoryStore {
  readonly kind = 'memory';
  #memories = new Map<string, StoredMemory>();
  #index = new VectorIndex();

  async add(memory: StoredMemory): Promise<void> {
    if (this.#memories.has(memory.id)) throw new Error(`ctxdedup: memory ${JSON.stringify(memory.id)} already exists`);
    this.#index.set(memory.id, memory.embedding);
    this.#memories.set(memory.id, copyMemory(memory));
  }

  async update(memory: StoredMemory): Promise<void> {
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

  async nearest(vector: Float32Array, k: number): Promise<NearestMemory[]> {
    return this.#index.nearest(vector, k).map(({ id, similarity }) => ({ memory: copyMemory(this.#memories.get(id)!), similarity }));
  }

  async close(): Promise<void> {}
}
