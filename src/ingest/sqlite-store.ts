/**
 * Embedded store: one SQLite file (better-sqlite3), the default.
 *
 * Durability: WAL journal with `synchronous=FULL`, so a claim call that returned has been written
 * and fsynced; a crash (even `kill -9` or power loss) cannot lose an acknowledged entry. Each
 * call runs in one `BEGIN IMMEDIATE` transaction: it is recorded entirely or not at all, and
 * several processes may share the file (they serialize on the write lock, waiting up to
 * `busyTimeoutMs`).
 *
 * Group commit: claims that arrive in the same event-loop turn (concurrent batches of a busy
 * server) share one transaction and one fsync. They are applied in arrival order, so later ones
 * see earlier ones; if the transaction fails, every claim of the group fails and none is recorded.
 * @module
 */
import Database from 'better-sqlite3';
import type { ClaimOptions, ClaimRequest, IngestStore } from './store.js';

/** Schema version kept in `PRAGMA user_version`. */
export const SQLITE_SCHEMA_VERSION = 1;

/** Options of {@link SqliteStore}. */
export interface SqliteStoreOptions {
  /** `full` (default): durable on return, also on power loss. `normal`: durable on process crash only. */
  synchronous?: 'full' | 'normal';
  /** How long a writer waits for another process's transaction. Default 5000 ms. */
  busyTimeoutMs?: number;
}

interface PendingClaim {
  namespace: string;
  requests: readonly ClaimRequest[];
  options: ClaimOptions;
  resolve: (owners: (string | null)[]) => void;
  reject: (error: unknown) => void;
}

interface Row {
  id: string;
  expires_ms: number | null;
}

/** The ingestion index in a SQLite file. */
export class SqliteStore implements IngestStore {
  readonly kind = 'sqlite';
  readonly path: string;
  #db: Database.Database;
  #groupTx: (group: readonly PendingClaim[]) => (string | null)[][];
  #claims = 0;
  #pending: PendingClaim[] = [];
  #scheduled = false;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.path = path;
    const db = new Database(path);
    this.#db = db;
    try {
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > SQLITE_SCHEMA_VERSION) {
        throw new Error(`ctxdedup: ${path} has ingest schema ${version}, newer than this version supports (${SQLITE_SCHEMA_VERSION})`);
      }
      db.exec(`
        CREATE TABLE IF NOT EXISTS ctxdedup_ingest (
          namespace  TEXT NOT NULL,
          sha256     TEXT NOT NULL,
          id         TEXT NOT NULL,
          created_ms INTEGER NOT NULL,
          expires_ms INTEGER,
          metadata   TEXT,
          PRIMARY KEY (namespace, sha256)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS ctxdedup_ingest_expiry ON ctxdedup_ingest (expires_ms) WHERE expires_ms IS NOT NULL;
        PRAGMA user_version = ${SQLITE_SCHEMA_VERSION};
      `);
    } catch (error) {
      db.close();
      throw error;
    }
    const select = db.prepare<[string, string], Row>('SELECT id, expires_ms FROM ctxdedup_ingest WHERE namespace = ? AND sha256 = ?');
    const upsert = db.prepare(
      'INSERT OR REPLACE INTO ctxdedup_ingest (namespace, sha256, id, created_ms, expires_ms, metadata) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const sweepExpired = db.prepare(
      'DELETE FROM ctxdedup_ingest WHERE (namespace, sha256) IN (SELECT namespace, sha256 FROM ctxdedup_ingest WHERE expires_ms IS NOT NULL AND expires_ms <= ? LIMIT 1000)',
    );
    const claimOne = (namespace: string, requests: readonly ClaimRequest[], { nowMs, ttlMs }: ClaimOptions): (string | null)[] => {
      if (++this.#claims % 256 === 0) sweepExpired.run(nowMs);
      const expires = ttlMs === undefined ? null : nowMs + ttlMs;
      const owners: (string | null)[] = new Array(requests.length);
      for (let i = 0; i < requests.length; i++) {
        const { sha256, id, metadata } = requests[i]!;
        const row = select.get(namespace, sha256);
        if (row !== undefined && (row.expires_ms === null || row.expires_ms > nowMs)) {
          owners[i] = row.id;
        } else {
          upsert.run(namespace, sha256, id, nowMs, expires, metadata ?? null);
          owners[i] = null;
        }
      }
      return owners;
    };
    const tx = db.transaction((group: readonly PendingClaim[]) => group.map((c) => claimOne(c.namespace, c.requests, c.options)));
    this.#groupTx = (group) => tx.immediate(group);
  }

  claim(namespace: string, requests: readonly ClaimRequest[], options: ClaimOptions): Promise<(string | null)[]> {
    if (!this.#db.open) return Promise.reject(new Error('ctxdedup: the SQLite store is closed'));
    return new Promise((resolve, reject) => {
      this.#pending.push({ namespace, requests, options, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const group = this.#pending;
    this.#pending = [];
    if (group.length === 0) return;
    let results: (string | null)[][];
    try {
      if (!this.#db.open) throw new Error('ctxdedup: the SQLite store is closed');
      results = this.#groupTx(group);
    } catch (error) {
      for (const c of group) c.reject(error);
      return;
    }
    group.forEach((c, i) => c.resolve(results[i]!));
  }

  /** Number of entries (expired ones included until swept), for tests and diagnostics. */
  count(namespace?: string): number {
    const row =
      namespace === undefined
        ? (this.#db.prepare('SELECT count(*) AS n FROM ctxdedup_ingest').get() as { n: number })
        : (this.#db.prepare('SELECT count(*) AS n FROM ctxdedup_ingest WHERE namespace = ?').get(namespace) as { n: number });
    return row.n;
  }

  async close(): Promise<void> {
    if (this.#scheduled) this.#flush();
    if (this.#db.open) this.#db.close();
  }
}
