/**
 * Embedded store: one SQLite file (better-sqlite3), the default.
 *
 * **Threads.** Claims run on a dedicated worker thread with its own connection, so a commit (and
 * the fsync it waits for) never blocks the event loop: a busy server keeps parsing, hashing and
 * answering while the disk works. A second thread copies committed pages from the WAL back into
 * the database file (PASSIVE checkpoints, which never block the writer) every
 * {@link SQLITE_CHECKPOINT_INTERVAL_MS}, so checkpoints stay off the claim path. The constructor
 * also opens a connection on the calling thread, to create or upgrade the schema and for
 * {@link SqliteStore.count}.
 *
 * **Group commit.** Claims that reach the worker while it is committing (or in the same turn)
 * share one `BEGIN IMMEDIATE` transaction and one fsync. They are applied in arrival order, so
 * later ones see earlier ones; if the transaction fails, every claim of the group fails and none
 * is recorded. Under load the groups grow by themselves (the longer a commit takes, the more
 * claims the next one carries), so no timer window is needed and an idle server commits at once.
 *
 * **Durability** (`synchronous`; the journal is always WAL). A claim resolves only after its
 * transaction has committed, so:
 * - `full` (default): the WAL is fsynced before each commit returns. An entry reported new is on
 *   disk: neither a process crash (`kill -9`, OOM kill) nor an operating-system crash or power
 *   loss can lose it.
 * - `normal`: each commit is written to the WAL, i.e. handed to the operating system, before it
 *   returns; the WAL is fsynced at checkpoints. A process crash (`kill -9`, an exception, OOM
 *   kill) loses nothing acknowledged, because the kernel already has the data; an operating-system
 *   crash or power loss may lose the commits since the last checkpoint (at most about
 *   {@link SQLITE_CHECKPOINT_INTERVAL_MS} of them while the checkpoint thread keeps up), and the
 *   file stays consistent. Choose it where the machine, not the process, is the failure you
 *   accept.
 *
 * **Memory.** The claim connection keeps up to {@link SQLITE_CACHE_KIB} KiB of pages cached; the
 * WAL file grows to about {@link SQLITE_AUTOCHECKPOINT_PAGES} pages under sustained load.
 *
 * Several processes may share the file: they serialize on SQLite's write lock, waiting up to
 * `busyTimeoutMs`. Upgrade them together: a file this version has upgraded (schema 2) is refused
 * by older versions.
 * @module
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { describe, rangeError, typeError } from '../validation.js';
import type { ClaimOptions, ClaimRequest, IngestStore } from './store.js';

/**
 * Schema version kept in `PRAGMA user_version`. 1: digests as 64-character hex text. 2: digests
 * as 32-byte blobs (half the key size, so about half the pages to write per commit); a version 1
 * file is converted in place, in one transaction, the first time this version opens it.
 */
export const SQLITE_SCHEMA_VERSION = 2;

const TABLE_V2 = (name: string): string => `
  CREATE TABLE ${name} (
    namespace  TEXT NOT NULL,
    sha256     BLOB NOT NULL,
    id         TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    metadata   TEXT,
    PRIMARY KEY (namespace, sha256)
  ) WITHOUT ROWID;`;
const EXPIRY_INDEX = 'CREATE INDEX ctxdedup_ingest_expiry ON ctxdedup_ingest (expires_ms) WHERE expires_ms IS NOT NULL;';

/** Our own refusal of a file (newer schema): passed on as it is, not wrapped as an open error. */
class SchemaError extends Error {}

/** An error from opening `path`, naming it, with the driver's error as `cause` (and its `code`). */
function openError(path: string, error: unknown): Error {
  if (error instanceof SchemaError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const wrapped = new Error(`ctxdedup: cannot open the SQLite ingest store ${JSON.stringify(path)}: ${message}`, { cause: error });
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? Object.assign(wrapped, { code }) : wrapped;
}

/**
 * Creates the schema, or upgrades an older one, under the write lock (so two processes opening
 * the same file at once do it once).
 * @throws Error if the file's schema is newer than this version supports.
 */
function migrate(db: Database.Database, path: string): void {
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new SchemaError(`ctxdedup: ${path} has ingest schema ${version}, newer than this version supports (${SQLITE_SCHEMA_VERSION})`);
    }
    if (version === SQLITE_SCHEMA_VERSION) return;
    const v1 = version === 1 && db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ctxdedup_ingest'").get() !== undefined;
    if (v1) {
      db.exec(`
        ${TABLE_V2('ctxdedup_ingest_v2')}
        INSERT INTO ctxdedup_ingest_v2 SELECT namespace, unhex(sha256), id, created_ms, expires_ms, metadata FROM ctxdedup_ingest;
        DROP TABLE ctxdedup_ingest;
        ALTER TABLE ctxdedup_ingest_v2 RENAME TO ctxdedup_ingest;
        ${EXPIRY_INDEX}
      `);
    } else {
      db.exec(`${TABLE_V2('ctxdedup_ingest')} ${EXPIRY_INDEX}`);
    }
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  }).immediate();
}

/** `full` (default) or `normal`; see the module documentation for what each guarantees. */
export type SqliteSynchronous = 'full' | 'normal';

/** Options of {@link SqliteStore}. */
export interface SqliteStoreOptions {
  /**
   * `full` (default): an acknowledged entry survives process crashes, OS crashes and power loss.
   * `normal`: it survives process crashes (`kill -9`) only; faster on slow-fsync disks.
   */
  synchronous?: SqliteSynchronous;
  /** How long a writer waits for another process's transaction. Default 5000 ms. */
  busyTimeoutMs?: number;
}

/** One claim call as posted to the worker: flat arrays, cheap to clone. */
interface ClaimMessage {
  type: 'claim';
  seq: number;
  namespace: string;
  /** Concatenated 64-character digests. */
  digests: string;
  ids: string[];
  metadata: (string | null)[];
  nowMs: number;
  ttlMs: number | null;
}

/** What the worker posts back. */
type WorkerReply =
  | { type: 'ready' }
  | { type: 'done'; results: [seq: number, owners: (string | null)[]][] }
  | { type: 'failed'; seqs: number[]; message: string; code: string | undefined };

interface Pending {
  resolve: (owners: (string | null)[]) => void;
  reject: (error: unknown) => void;
}

/** Page cache of the claim connection (KiB): the hot part of the index stays in memory. */
export const SQLITE_CACHE_KIB = 64 * 1024;
/** How often the checkpoint thread copies the WAL back into the database file. */
export const SQLITE_CHECKPOINT_INTERVAL_MS = 100;
/**
 * WAL size (pages, 4 KiB each) at which the claim connection checkpoints by itself. Under
 * continuous writes the checkpoint thread never finds the WAL fully copied between two commits,
 * which it must be for the WAL to start over; at this size the claim connection copies the rest
 * (at most one checkpoint interval of commits) and the WAL restarts. High, so that this short
 * stall of the claim path is rare.
 */
export const SQLITE_AUTOCHECKPOINT_PAGES = 16384;

/**
 * The workers' flags: the process's, with `--input-type=commonjs` in place of any other input
 * type. A worker inherits the flag, from the command line or from `NODE_OPTIONS`, and
 * `--input-type=module` would evaluate the CommonJS program below as a module.
 */
const WORKER_EXEC_ARGV = [
  ...process.execArgv.filter((arg, i, all) => !arg.startsWith('--input-type') && all[i - 1] !== '--input-type'),
  '--input-type=commonjs',
];

/**
 * The workers' program, evaluated as CommonJS (`eval: true`), so that the same code runs from the
 * compiled package, under tsx and under vitest alike. The schema exists before it starts.
 *
 * - role `claims`: executes claims, group-committing what arrives while it is busy.
 * - role `checkpoint`: copies committed WAL pages back into the database file every
 *   `SQLITE_CHECKPOINT_INTERVAL_MS` (a PASSIVE checkpoint, which never blocks the writer), so
 *   the claim thread does not stall on checkpoints.
 */
const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
db.pragma('synchronous = ' + workerData.synchronous);
if (workerData.role === 'checkpoint') {
  const timer = setInterval(() => {
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // Busy or failing: the claim connection's own autocheckpoint is the safety net.
    }
  }, workerData.checkpointIntervalMs);
  parentPort.on('message', () => {
    clearInterval(timer);
    db.close();
    parentPort.close();
  });
} else {
  db.pragma('cache_size = -' + workerData.cacheKib);
  db.pragma('wal_autocheckpoint = ' + workerData.autocheckpointPages);
  db.pragma('journal_size_limit = ' + 64 * 1024 * 1024);
  // One statement claims an unknown or expired content; only a content already held needs a
  // second one, to read its owner.
  const claim = db.prepare(
    'INSERT INTO ctxdedup_ingest (namespace, sha256, id, created_ms, expires_ms, metadata) VALUES (?, ?, ?, ?, ?, ?) ' +
      'ON CONFLICT (namespace, sha256) DO UPDATE SET id = excluded.id, created_ms = excluded.created_ms, ' +
      'expires_ms = excluded.expires_ms, metadata = excluded.metadata ' +
      'WHERE ctxdedup_ingest.expires_ms IS NOT NULL AND ctxdedup_ingest.expires_ms <= excluded.created_ms',
  );
  const owner = db.prepare('SELECT id FROM ctxdedup_ingest WHERE namespace = ? AND sha256 = ?').pluck();
  const sweepExpired = db.prepare(
    'DELETE FROM ctxdedup_ingest WHERE (namespace, sha256) IN (SELECT namespace, sha256 FROM ctxdedup_ingest WHERE expires_ms IS NOT NULL AND expires_ms <= ? LIMIT 1000)',
  );
  let claims = 0;
  const claimOne = (c) => {
    if (++claims % 256 === 0) sweepExpired.run(c.nowMs);
    const expires = c.ttlMs === null ? null : c.nowMs + c.ttlMs;
    const owners = new Array(c.ids.length);
    const digests = Buffer.from(c.digests, 'hex');
    for (let i = 0; i < c.ids.length; i++) {
      const sha256 = digests.subarray(i * 32, i * 32 + 32);
      const claimed = claim.run(c.namespace, sha256, c.ids[i], c.nowMs, expires, c.metadata[i]).changes > 0;
      owners[i] = claimed ? null : owner.get(c.namespace, sha256);
    }
    return owners;
  };
  const transaction = db.transaction((group) => group.map(claimOne));
  let queue = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const group = queue;
    queue = [];
    if (group.length === 0) return;
    let owners;
    try {
      owners = transaction.immediate(group);
    } catch (error) {
      parentPort.postMessage({ type: 'failed', seqs: group.map((c) => c.seq), message: String((error && error.message) || error), code: error && error.code });
      return;
    }
    parentPort.postMessage({ type: 'done', results: group.map((c, i) => [c.seq, owners[i]]) });
  };
  parentPort.on('message', (message) => {
    if (message.type === 'close') {
      flush();
      db.close();
      parentPort.close();
      return;
    }
    queue.push(message);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
}
parentPort.postMessage({ type: 'ready' });
`;

/** The ingestion index in a SQLite file. */
export class SqliteStore implements IngestStore {
  readonly kind = 'sqlite';
  readonly path: string;
  /** The durability mode in effect. */
  readonly synchronous: SqliteSynchronous;
  #db: Database.Database;
  #worker: Worker;
  #checkpointer: Worker;
  #ready: Promise<void>;
  #pending = new Map<number, Pending>();
  #seq = 0;
  /** Set once the worker is gone (closed or crashed): every later claim fails with it. */
  #failure: Error | undefined;
  #closing: Promise<void> | undefined;
  /** Callers of close() waiting for the in-flight claims. */
  #idle: (() => void)[] = [];

  /**
   * Opens (creating if needed) the file and starts the claim worker. Prefer
   * {@link SqliteStore.open}, which also waits until the worker has opened the file.
   * @throws TypeError if `path` is not a non-empty string; RangeError for `':memory:'` (the worker
   *   threads need a file they can open too: use the `memory` store instead).
   * @throws Error naming the file (the driver's error as `cause`) if it cannot be opened or is not
   *   a database, or if it has a newer schema.
   */
  constructor(path: string, options: SqliteStoreOptions = {}) {
    if (typeof path !== 'string' || path === '') {
      typeError('path', `must be a file path, got ${path === '' ? 'an empty string' : describe(path)}`);
    }
    if (path === ':memory:')
      rangeError('path', "must be a file: an in-memory database (':memory:') cannot be shared with the claim worker; use the 'memory' store");
    this.path = path;
    this.synchronous = options.synchronous ?? 'full';
    const busyTimeoutMs = Math.trunc(options.busyTimeoutMs ?? 5000);
    let db: Database.Database;
    try {
      db = new Database(path);
    } catch (error) {
      throw openError(path, error);
    }
    this.#db = db;
    try {
      db.pragma('journal_mode = WAL');
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      migrate(db, path);
    } catch (error) {
      db.close();
      throw openError(path, error);
    }
    const workerData = {
      driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      path,
      busyTimeoutMs,
      synchronous: this.synchronous === 'normal' ? 'NORMAL' : 'FULL',
      cacheKib: SQLITE_CACHE_KIB,
      autocheckpointPages: SQLITE_AUTOCHECKPOINT_PAGES,
      checkpointIntervalMs: SQLITE_CHECKPOINT_INTERVAL_MS,
    };
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: WORKER_EXEC_ARGV, workerData: { ...workerData, role: 'claims' } });
    this.#worker = worker;
    worker.unref();
    this.#checkpointer = new Worker(WORKER_SOURCE, { eval: true, execArgv: WORKER_EXEC_ARGV, workerData: { ...workerData, role: 'checkpoint' } });
    this.#checkpointer.unref();
    // A failing checkpoint thread only costs speed: the claim connection checkpoints by itself.
    this.#checkpointer.on('error', () => {});
    this.#ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (reply: WorkerReply) => {
        if (reply.type === 'ready') resolve();
        else this.#settle(reply);
      });
      worker.once('error', (error: Error) => {
        const failure = new Error(`ctxdedup: the SQLite ingest store ${JSON.stringify(path)}: its worker failed: ${error.message}`, { cause: error });
        this.#fail(failure);
        reject(failure);
      });
      worker.once('exit', () => {
        const failure = this.#failure ?? new Error('ctxdedup: the SQLite store is closed');
        this.#fail(failure);
        reject(failure);
      });
    });
    // An unobserved open failure is reported by open() or by the next claim, not as unhandled.
    this.#ready.catch(() => {});
  }

  /**
   * Opens the store and waits until it can take claims.
   * @throws Error if the file cannot be opened, has a newer schema, or the worker cannot start.
   */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    const store = new SqliteStore(path, options);
    try {
      await store.#ready;
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  claim(namespace: string, requests: readonly ClaimRequest[], { nowMs, ttlMs }: ClaimOptions): Promise<(string | null)[]> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#closing !== undefined) return Promise.reject(new Error('ctxdedup: the SQLite store is closed'));
    if (requests.length === 0) return Promise.resolve([]);
    const seq = ++this.#seq;
    const ids = new Array<string>(requests.length);
    const metadata = new Array<string | null>(requests.length);
    let digests = '';
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i]!;
      digests += request.sha256;
      ids[i] = request.id;
      metadata[i] = request.metadata ?? null;
    }
    const message: ClaimMessage = { type: 'claim', seq, namespace, digests, ids, metadata, nowMs, ttlMs: ttlMs ?? null };
    return new Promise((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject });
      // Keep the process alive while a claim is in flight, and only then.
      if (this.#pending.size === 1) this.#worker.ref();
      this.#worker.postMessage(message);
    });
  }

  #settle(reply: Exclude<WorkerReply, { type: 'ready' }>): void {
    if (reply.type === 'done') {
      for (const [seq, owners] of reply.results) this.#take(seq)?.resolve(owners);
    } else {
      const error = Object.assign(new Error(`ctxdedup: SQLite: ${reply.message}`), reply.code === undefined ? {} : { code: reply.code });
      for (const seq of reply.seqs) this.#take(seq)?.reject(error);
    }
  }

  #take(seq: number): Pending | undefined {
    const pending = this.#pending.get(seq);
    this.#pending.delete(seq);
    if (this.#pending.size === 0) this.#wakeIdle();
    return pending;
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(this.#failure);
    this.#wakeIdle();
  }

  #wakeIdle(): void {
    this.#worker.unref();
    const waiters = this.#idle;
    this.#idle = [];
    for (const wake of waiters) wake();
  }

  /** Number of entries (expired ones included until swept), for tests and diagnostics. */
  count(namespace?: string): number {
    const row =
      namespace === undefined
        ? (this.#db.prepare('SELECT count(*) AS n FROM ctxdedup_ingest').get() as { n: number })
        : (this.#db.prepare('SELECT count(*) AS n FROM ctxdedup_ingest WHERE namespace = ?').get(namespace) as { n: number });
    return row.n;
  }

  /** Finishes the claims already posted, stops the worker and closes the file. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      // Let every claim already posted be answered before the worker goes.
      while (this.#pending.size > 0 && this.#failure === undefined) await new Promise<void>((resolve) => this.#idle.push(resolve));
      const stop = async (worker: Worker, running: boolean): Promise<void> => {
        if (!running) return;
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        worker.ref();
        worker.postMessage({ type: 'close' });
        await exited;
      };
      const checkpointerRunning = this.#checkpointer.threadId !== -1;
      await Promise.all([stop(this.#worker, this.#failure === undefined), stop(this.#checkpointer, checkpointerRunning)]);
      if (this.#db.open) this.#db.close();
    })();
    return this.#closing;
  }
}
