/**
 * `InMemoryIngestStore`: the ingestion index's in-process store (`store: 'memory'`), for tests and
 * single short-lived processes. Nothing survives the process. (Not the memory deduplicator's
 * `MemoryStore`, an interface of `ctxdedup/memory`.)
 * @module
 */
import type { ClaimOptions, ClaimRequest, IngestStore } from './store.js';

interface Entry {
  id: string;
  expiresMs: number;
  metadata?: string | undefined;
}

/** An {@link IngestStore} kept in a JS `Map`; expired entries are dropped when met and by a periodic sweep. */
export class InMemoryIngestStore implements IngestStore {
  readonly kind = 'memory';
  #entries = new Map<string, Entry>();
  #claimsSinceSweep = 0;

  /** Number of entries held, expired ones included until swept. */
  get size(): number {
    return this.#entries.size;
  }

  async claim(namespace: string, requests: readonly ClaimRequest[], { nowMs, ttlMs }: ClaimOptions): Promise<(string | null)[]> {
    if (++this.#claimsSinceSweep >= 1000) this.#sweep(nowMs);
    const expiresMs = ttlMs === undefined ? Infinity : nowMs + ttlMs;
    return requests.map(({ sha256, id, metadata }) => {
      const key = `${namespace}\u0000${sha256}`;
      const entry = this.#entries.get(key);
      if (entry !== undefined && entry.expiresMs > nowMs) return entry.id;
      this.#entries.set(key, { id, expiresMs, metadata });
      return null;
    });
  }

  #sweep(nowMs: number): void {
    this.#claimsSinceSweep = 0;
    for (const [key, entry] of this.#entries) if (entry.expiresMs <= nowMs) this.#entries.delete(key);
  }

  async close(): Promise<void> {}
}
