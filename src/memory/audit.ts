/**
 * The audit log of the memory deduplicator: every memory it replaced, merged away or overwrote,
 * kept whole (embedding included) so that `undo` can put it back.
 * @module
 */
import type { StoredMemory } from './store.js';
import { copyMemory } from './validate.js';

/** Why a memory left the store (or was overwritten). */
export type AuditAction = 'replaced' | 'merged';

/** One removed or overwritten memory. */
export interface AuditEntry {
  /** Increasing sequence number, unique within one log. */
  seq: number;
  /** When it was recorded, ms since the epoch. */
  at: number;
  action: AuditAction;
  /** The memory exactly as it was stored before. */
  memory: StoredMemory;
  /** Id of the memory that now holds its facts. */
  replacedBy: string;
  /** Similarity that triggered the decision (the cluster's minimum in batch mode). */
  similarity: number | null;
  /** Set once `undo` restored it. */
  undone: boolean;
}

/** What the deduplicator records before it deletes or overwrites anything. */
export type AuditRecord = Omit<AuditEntry, 'seq' | 'undone'>;

/** Storage of audit entries. */
export interface AuditLog {
  /** Durably records an entry; resolves only once it is stored. */
  record(entry: AuditRecord): Promise<AuditEntry>;
  /** All entries, oldest first. */
  list(): Promise<AuditEntry[]>;
  /** Marks entry `seq` as restored. */
  markUndone(seq: number): Promise<void>;
}

/** An {@link AuditLog} in process memory (the default for stores without their own). */
export class InMemoryAuditLog implements AuditLog {
  #entries: AuditEntry[] = [];

  async record(entry: AuditRecord): Promise<AuditEntry> {
    const stored: AuditEntry = { ...entry, memory: copyMemory(entry.memory), seq: this.#entries.length + 1, undone: false };
    this.#entries.push(stored);
    return { ...stored, memory: copyMemory(stored.memory) };
  }

  async list(): Promise<AuditEntry[]> {
    return this.#entries.map((e) => ({ ...e, memory: copyMemory(e.memory) }));
  }

  async markUndone(seq: number): Promise<void> {
    const entry = this.#entries[seq - 1];
    if (entry) entry.undone = true;
  }
}
