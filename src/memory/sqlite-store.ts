/**
 * `SqliteMemoryStore`: the embedded default. Memories and their embeddings (float32 BLOBs) live
 * in one SQLite file (better-sqlite3, WAL, `synchronous=FULL`: a write that resolved survives a
 * crash). Nearest-neighbour search runs natively over an in-process copy of the vectors, loaded
 * when the store opens; so one process should own the file at a time (another process's writes
 * are seen after reopening).
 *
 * The same file holds the deduplicator's audit log ({@link SqliteMemoryStore.audit}), so history
 * and `undo` survive restarts too.
 * @module
 */
import type Database from 'better-sqlite3';
import { describe, typeError } from '../validation.js';
import { requirePeer } from '../optional.js';
import { LONE_SURROGATE, expectNearestK, expectVector } from './validate.js';
import type { AuditEntry, AuditLog, AuditRecord } from './audit.js';
import type { MemoryStore, NearestMemory, StoredMemory } from './store.js';
import { VectorIndex } from './vector-index.js';

/** Schema version of the memory tables. */
export const MEMORY_SCHEMA_VERSION = 1;

interface MemoryRow {
  id: string;
  content: string;
  timestamp_ms: number | null;
  metadata: string | null;
  embedding: Buffer;
}

interface AuditRow extends MemoryRow {
  seq: number;
  at_ms: number;
  action: string;
  replaced_by: string;
  similarity: number | null;
  undone: number;
}

function toBlob(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
}

function fromBlob(blob: Buffer): Float32Array {
  // Copy: the Buffer may be a view into a pool with no float alignment.
  const bytes = new Uint8Array(blob.byteLength);
  bytes.set(blob);
  return new Float32Array(bytes.buffer);
}

function fromRow(row: MemoryRow): StoredMemory {
  const memory: StoredMemory = { id: row.id, content: row.content, embedding: fromBlob(row.embedding) };
  if (row.timestamp_ms !== null) memory.timestamp = row.timestamp_ms;
  if (row.metadata !== null) memory.metadata = JSON.parse(row.metadata) as Record<string, unknown>;
  return memory;
}

/**
 * A memory's columns. SQLite keeps text as UTF-8, so an id or content with a lone surrogate would
 * come back altered (as U+FFFD): refused instead. (Metadata is JSON text, which escapes them.)
 */
function columns(m: StoredMemory): [string, string, number | null, string | null, Buffer] {
  if (!m.id.isWellFormed()) typeError('memory.id', LONE_SURROGATE);
  if (!m.content.isWellFormed()) typeError('memory.content', LONE_SURROGATE);
  return [m.id, m.content, m.timestamp ?? null, m.metadata === undefined ? null : JSON.stringify(m.metadata), toBlob(m.embedding)];
}

/** Our own refusal of a file (newer schema): passed on as it is, not wrapped as an open error. */
class SchemaError extends Error {}

/** An error from opening `path`, naming it, with the driver's error as `cause` (and its `code`). */
function openError(path: string, error: unknown): Error {
  if (error instanceof SchemaError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const wrapped = new Error(`ctxdedup: cannot open the SQLite memory store ${JSON.stringify(path)}: ${message}`, { cause: error });
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? Object.assign(wrapped, { code }) : wrapped;
}

/** The embedded {@link MemoryStore}. */
export class SqliteMemoryStore implements MemoryStore {
  readonly kind = 'sqlite';
  /** The database file. */
  readonly path: string;
  /** The audit log kept in the same file. */
  readonly audit: AuditLog;
  #db: Database.Database;
  #index = new VectorIndex();
  #stmt: {
    insert: Database.Statement<[string, string, number | null, string | null, Buffer]>;
    update: Database.Statement<[string, number | null, string | null, Buffer, string]>;
    delete: Database.Statement<[string]>;
    get: Database.Statement<[string], MemoryRow>;
    all: Database.Statement<[], MemoryRow>;
  };

  /**
   * Opens (creating if needed) the store in the SQLite file at `path`. `':memory:'` opens a
   * database that lives only as long as the store (only when asked for by that name: a missing or
   * empty path is an error, never a silent temporary database).
   * @throws TypeError if `path` is not a non-empty string.
   * @throws Error naming the file (the driver's error as `cause`) if it cannot be opened or is not
   *   a database, or if its memory schema is newer than this version supports.
   * @throws Error if the optional package better-sqlite3 is not installed.
   */
  constructor(path: string) {
    if (typeof path !== 'string' || path === '') {
      typeError('path', `must be a file path (or ':memory:' for a database that is never saved), got ${path === '' ? 'an empty string' : describe(path)}`);
    }
    const Driver = requirePeer<typeof Database>('better-sqlite3', 'SqliteMemoryStore');
    this.path = path;
    let db: Database.Database;
    try {
      db = new Driver(path);
    } catch (error) {
      throw openError(path, error);
    }
    this.#db = db;
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('busy_timeout = 5000');
      db.exec(`
        CREATE TABLE IF NOT EXISTS ctxdedup_memory_schema (version INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS ctxdedup_memories (
          id           TEXT PRIMARY KEY,
          content      TEXT NOT NULL,
          timestamp_ms REAL,
          metadata     TEXT,
          embedding    BLOB NOT NULL
        );
        CREATE TABLE IF NOT EXISTS ctxdedup_memory_audit (
          seq          INTEGER PRIMARY KEY AUTOINCREMENT,
          at_ms        REAL NOT NULL,
          action       TEXT NOT NULL,
          id           TEXT NOT NULL,
          content      TEXT NOT NULL,
          timestamp_ms REAL,
          metadata     TEXT,
          embedding    BLOB NOT NULL,
          replaced_by  TEXT NOT NULL,
          similarity   REAL,
          undone       INTEGER NOT NULL DEFAULT 0
        );
      `);
      const version = db.prepare('SELECT max(version) AS v FROM ctxdedup_memory_schema').get() as { v: number | null };
      if (version.v === null) db.prepare('INSERT INTO ctxdedup_memory_schema (version) VALUES (?)').run(MEMORY_SCHEMA_VERSION);
      else if (version.v > MEMORY_SCHEMA_VERSION) {
        throw new SchemaError(`ctxdedup: ${path} has memory schema ${version.v}, newer than this version supports (${MEMORY_SCHEMA_VERSION})`);
      }
      this.#stmt = {
        insert: db.prepare('INSERT INTO ctxdedup_memories (id, content, timestamp_ms, metadata, embedding) VALUES (?, ?, ?, ?, ?)'),
        update: db.prepare('UPDATE ctxdedup_memories SET content = ?, timestamp_ms = ?, metadata = ?, embedding = ? WHERE id = ?'),
        delete: db.prepare('DELETE FROM ctxdedup_memories WHERE id = ?'),
        get: db.prepare('SELECT * FROM ctxdedup_memories WHERE id = ?'),
        all: db.prepare('SELECT * FROM ctxdedup_memories ORDER BY rowid'),
      };
      for (const row of this.#stmt.all.iterate()) this.#index.set(row.id, fromBlob(row.embedding));
    } catch (error) {
      db.close();
      throw openError(path, error);
    }
    this.audit = new SqliteAuditLog(db);
  }

  #open(): void {
    if (!this.#db.open) throw new Error(`ctxdedup: the SQLite memory store ${this.path} is closed`);
  }

  /**
   * @throws RangeError (before anything is written) if the embedding has a non-finite component or
   *   another dimension than the stored ones; TypeError if it is not a `Float32Array`.
   */
  async add(memory: StoredMemory): Promise<void> {
    this.#open();
    expectVector(memory.embedding, 'memory.embedding');
    this.#index.check(memory.embedding, 'embedding');
    const row = columns(memory);
    if (this.#stmt.get.get(memory.id) !== undefined) throw new Error(`ctxdedup: memory ${JSON.stringify(memory.id)} already exists`);
    this.#stmt.insert.run(...row);
    this.#index.set(memory.id, memory.embedding);
  }

  /** Validates the embedding as {@link SqliteMemoryStore.add} does. */
  async update(memory: StoredMemory): Promise<void> {
    this.#open();
    expectVector(memory.embedding, 'memory.embedding');
    this.#index.check(memory.embedding, 'embedding');
    const [id, content, timestamp, metadata, embedding] = columns(memory);
    if (this.#stmt.update.run(content, timestamp, metadata, embedding, id).changes === 0) {
      throw new Error(`ctxdedup: memory ${JSON.stringify(memory.id)} does not exist`);
    }
    this.#index.set(memory.id, memory.embedding);
  }

  async delete(id: string): Promise<boolean> {
    this.#open();
    const removed = this.#stmt.delete.run(id).changes > 0;
    this.#index.delete(id);
    return removed;
  }

  async get(id: string): Promise<StoredMemory | undefined> {
    this.#open();
    const row = this.#stmt.get.get(id);
    return row && fromRow(row);
  }

  async list(): Promise<StoredMemory[]> {
    this.#open();
    return this.#stmt.all.all().map(fromRow);
  }

  /**
   * @throws TypeError if `vector` is not a `Float32Array` or `k` not a number; RangeError if a
   *   component of `vector` is not finite or `k` is not a non-negative integer.
   */
  async nearest(vector: Float32Array, k: number): Promise<NearestMemory[]> {
    this.#open();
    expectVector(vector, 'vector');
    expectNearestK(k);
    return this.#index.nearest(vector, k).map(({ id, similarity }) => ({ memory: fromRow(this.#stmt.get.get(id)!), similarity }));
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}

/** The audit log in the memory store's SQLite file. */
class SqliteAuditLog implements AuditLog {
  #insert: Database.Statement<[number, string, string, string, number | null, string | null, Buffer, string, number | null]>;
  #all: Database.Statement<[], AuditRow>;
  #undo: Database.Statement<[number]>;

  constructor(db: Database.Database) {
    this.#insert = db.prepare(
      'INSERT INTO ctxdedup_memory_audit (at_ms, action, id, content, timestamp_ms, metadata, embedding, replaced_by, similarity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#all = db.prepare('SELECT * FROM ctxdedup_memory_audit ORDER BY seq');
    this.#undo = db.prepare('UPDATE ctxdedup_memory_audit SET undone = 1 WHERE seq = ?');
  }

  async record(entry: AuditRecord): Promise<AuditEntry> {
    const [id, content, timestamp, metadata, embedding] = columns(entry.memory);
    const { lastInsertRowid } = this.#insert.run(entry.at, entry.action, id, content, timestamp, metadata, embedding, entry.replacedBy, entry.similarity);
    return { ...entry, seq: Number(lastInsertRowid), undone: false };
  }

  async list(): Promise<AuditEntry[]> {
    return this.#all.all().map((row) => ({
      seq: row.seq,
      at: row.at_ms,
      action: row.action as AuditEntry['action'],
      memory: fromRow(row),
      replacedBy: row.replaced_by,
      similarity: row.similarity,
      undone: row.undone !== 0,
    }));
  }

  async markUndone(seq: number): Promise<void> {
    this.#undo.run(seq);
  }
}
