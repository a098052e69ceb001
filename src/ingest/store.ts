/**
 * The storage contract of the ingestion index, and store selection from a spec string.
 * @module
 */
import { importPeer } from '../optional.js';
import { expectKnownKeys, expectOptions } from '../validation.js';
import type { SqliteStoreOptions } from './sqlite-store.js';

/** One distinct content of a batch, offered to the store for a claim. */
export interface ClaimRequest {
  /** Lowercase hex SHA-256 of the content's UTF-8 bytes. */
  sha256: string;
  /** Id of the first item of the batch with this content. */
  id: string;
  /** The item's metadata as JSON text, if any (stores may keep it for audit; none return it). */
  metadata?: string | undefined;
}

/** Clock and expiry of one claim call. */
export interface ClaimOptions {
  /** Current time, milliseconds since the epoch (stores with their own clock may ignore it). */
  nowMs: number;
  /** Entries written by this call are forgotten after this many milliseconds; none if absent. */
  ttlMs?: number | undefined;
}

/**
 * A persistent (or shared) map from (namespace, content SHA-256) to the id that first claimed it.
 *
 * Implementations must apply a whole `claim` call atomically (all entries recorded, or none, and
 * an error thrown), and must make a content claimed by one caller visible to every later caller,
 * including other processes sharing the store.
 */
export interface IngestStore {
  /** `memory`, `sqlite` or `redis`. */
  readonly kind: string;
  /**
   * For each request, in order: `null` if this call recorded it (the content was unknown or its
   * entry had expired), or the id already recorded for the content (possibly the request's own id,
   * when a batch is retried).
   */
  claim(namespace: string, requests: readonly ClaimRequest[], options: ClaimOptions): Promise<(string | null)[]>;
  /** Releases connections and file handles. Idempotent. */
  close(): Promise<void>;
}

/** Store-specific settings of {@link openStore}. */
export interface OpenStoreOptions {
  /** Key prefix for the Redis store. Default `ctxdedup:ingest:`. */
  redisKeyPrefix?: string;
  /** Settings of the SQLite store (durability mode, busy timeout). */
  sqlite?: SqliteStoreOptions;
}

/**
 * Opens a store from a spec: `memory`, `sqlite:<path>` (embedded, durable) or
 * `redis://host:port[/db]` / `rediss://…` (shared by any number of instances).
 *
 * @throws TypeError for an unknown spec.
 * @throws Error if the store's optional package (better-sqlite3 for `sqlite:`, ioredis for
 *   `redis://`) is not installed.
 */
export async function openStore(spec: string, options: OpenStoreOptions = {}): Promise<IngestStore> {
  expectOptions(options);
  expectKnownKeys(options as Record<string, unknown>, 'options', ['redisKeyPrefix', 'sqlite']);
  if (spec === 'memory') {
    const { InMemoryIngestStore } = await import('./in-memory-store.js');
    return new InMemoryIngestStore();
  }
  if (spec.startsWith('sqlite:')) {
    const path = spec.slice('sqlite:'.length);
    if (path === '') throw new TypeError('store sqlite: needs a file path, e.g. sqlite:./ctxdedup.sqlite');
    const { SqliteStore } = await importPeer('better-sqlite3', 'the SQLite ingestion store (sqlite:<path>)', () => import('./sqlite-store.js'));
    return SqliteStore.open(path, options.sqlite);
  }
  if (spec.startsWith('redis://') || spec.startsWith('rediss://')) {
    const { RedisStore } = await importPeer('ioredis', 'the Redis ingestion store (redis://)', () => import('./redis-store.js'));
    return RedisStore.connect(spec, options.redisKeyPrefix);
  }
  throw new TypeError(`store must be 'memory', 'sqlite:<path>' or 'redis://host:port', got ${JSON.stringify(spec)}`);
}
