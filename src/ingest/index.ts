/**
 * Incremental exact-dedup index for high-volume ingestion.
 *
 * Identity is the SHA-256 of a content's UTF-8 bytes. Each namespace remembers, per content, the
 * id of the item that first brought it; a later item with the same content is a `duplicate` of
 * that id, unless it *is* that id (a retried item stays `new`: ingestion is retry-safe).
 *
 * ```ts
 * const index = await IngestIndex.open({ store: 'sqlite:./ingest.sqlite' });
 * const results = await index.ingest('chunks', [{ id: 'a', content: 'hello' }, { id: 'b', content: 'hello' }]);
 * // [{ status: 'new', id: 'a', sha256: '2cf2…' }, { status: 'duplicate', id: 'b', duplicateOf: 'a', sha256: '2cf2…' }]
 * await index.close();
 * ```
 * @module
 */
import { randomUUID } from 'node:crypto';
import { describe, expectArray, expectObject, expectOptions, optionalNumber, rangeError, typeError } from '../errors.js';
import { DEFAULT_ASYNC_THRESHOLD, hashBatch, type Hashing } from './hash.js';
import { openStore, type ClaimRequest, type IngestStore } from './store.js';

export type { ClaimOptions, ClaimRequest, IngestStore } from './store.js';
export { openStore } from './store.js';
export type { Hashing } from './hash.js';

/** One item offered to the index. */
export interface IngestItem {
  /**
   * Caller's id (1–1024 characters). Give one to make retries safe: re-sending an accepted item
   * with the same id and content reports it `new` again. Without it a random UUID is assigned,
   * and a re-sent item is a duplicate of its first copy.
   */
  id?: string;
  /** The content; identity is the SHA-256 of its UTF-8 bytes. Lone surrogates are rejected. */
  content: string;
  /** A JSON object, kept with the entry by the SQLite and memory stores (not by Redis). */
  metadata?: Record<string, unknown>;
}

/** The decision for one item, in input order. */
export interface IngestResult {
  /** `new`: this item's id owns the content. `duplicate`: another id does (`duplicateOf`). */
  status: 'new' | 'duplicate';
  /** The item's id (the caller's, or the assigned UUID). */
  id: string;
  /** Id of the item that owns the content (duplicates only). */
  duplicateOf?: string;
  /** Lowercase hex SHA-256 of the content's UTF-8 bytes. */
  sha256: string;
}

/** Per-namespace settings. */
export interface NamespaceOptions {
  /** Entries older than this are forgotten and their content counts as new again. Default: never. */
  ttlSeconds?: number;
}

/** Options of {@link IngestIndex.open}. */
export interface IngestIndexOptions {
  /**
   * `memory`, `sqlite:<path>` (embedded, durable; the default is `sqlite:./ctxdedup-ingest.sqlite`),
   * `redis://host:port[/db]` (shared between instances), or an {@link IngestStore} instance.
   */
  store?: string | IngestStore;
  /** Default TTL for every namespace (see {@link NamespaceOptions.ttlSeconds}). */
  ttlSeconds?: number;
  /** Settings by namespace name; they override the defaults above. */
  namespaces?: Record<string, NamespaceOptions>;
  /** Largest accepted batch. Default 100,000 items. */
  maxBatchItems?: number;
  /** Batches of at least this many UTF-16 code units are hashed off the main thread. Default 65,536. */
  asyncThreshold?: number;
  /** `native` (default) or `js` (node:crypto + Map; the benchmark baseline). */
  hashing?: Hashing;
  /** Key prefix for the Redis store. Default `ctxdedup:ingest:`. */
  redisKeyPrefix?: string;
  /** Clock in milliseconds since the epoch (tests). Default `Date.now`. */
  now?: () => number;
}

/** Default store spec. */
export const DEFAULT_STORE = 'sqlite:./ctxdedup-ingest.sqlite';

const NAMESPACE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const MAX_ID_LENGTH = 1024;

function ttlOption(value: unknown, path: string): number | undefined {
  if (value === undefined) return undefined;
  return optionalNumber(value, path, 0, { min: 0.001, max: 100 * 365 * 86400 });
}

/** An incremental dedup index over one store. Safe to share between concurrent callers. */
export class IngestIndex {
  /** The store behind the index. */
  readonly store: IngestStore;
  #defaultTtl: number | undefined;
  #namespaces: Map<string, NamespaceOptions>;
  #maxBatchItems: number;
  #asyncThreshold: number;
  #hashing: Hashing;
  #now: () => number;
  #closed = false;
  #inFlight = new Set<Promise<unknown>>();

  private constructor(store: IngestStore, options: IngestIndexOptions) {
    this.store = store;
    this.#defaultTtl = options.ttlSeconds;
    this.#namespaces = new Map(Object.entries(options.namespaces ?? {}));
    this.#maxBatchItems = options.maxBatchItems ?? 100_000;
    this.#asyncThreshold = options.asyncThreshold ?? DEFAULT_ASYNC_THRESHOLD;
    this.#hashing = options.hashing ?? 'native';
    this.#now = options.now ?? Date.now;
  }

  /**
   * Validates the options and opens the store.
   * @throws TypeError / RangeError naming the bad option; Error if the store cannot be opened.
   */
  static async open(options: IngestIndexOptions = {}): Promise<IngestIndex> {
    expectOptions(options);
    ttlOption(options.ttlSeconds, 'options.ttlSeconds');
    if (options.namespaces !== undefined) {
      expectObject(options.namespaces, 'options.namespaces');
      for (const [name, ns] of Object.entries(options.namespaces)) {
        const path = `options.namespaces[${JSON.stringify(name)}]`;
        if (!NAMESPACE.test(name)) typeError(path, 'is not a valid namespace name (letters, digits, . _ -; at most 128)');
        expectObject(ns, path);
        ttlOption(ns.ttlSeconds, `${path}.ttlSeconds`);
      }
    }
    optionalNumber(options.maxBatchItems, 'options.maxBatchItems', 0, { min: 1, integer: true });
    optionalNumber(options.asyncThreshold, 'options.asyncThreshold', 0, { min: 0 });
    if (options.hashing !== undefined && options.hashing !== 'native' && options.hashing !== 'js') {
      typeError('options.hashing', `must be 'native' or 'js', got ${JSON.stringify(options.hashing)}`);
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      typeError('options.now', `must be a function, got ${describe(options.now)}`);
    }
    const spec = options.store ?? DEFAULT_STORE;
    let store: IngestStore;
    if (typeof spec === 'string') {
      store = await openStore(spec, options.redisKeyPrefix === undefined ? {} : { redisKeyPrefix: options.redisKeyPrefix });
    } else if (typeof spec === 'object' && spec !== null && typeof spec.claim === 'function') {
      store = spec;
    } else {
      return typeError('options.store', `must be a store spec string or an IngestStore, got ${describe(spec)}`);
    }
    return new IngestIndex(store, options);
  }

  /** TTL of a namespace in seconds, if it has one. */
  ttlSeconds(namespace: string): number | undefined {
    return this.#namespaces.get(namespace)?.ttlSeconds ?? this.#defaultTtl;
  }

  /**
   * Records a batch and reports, per item in order, whether its content is new to the namespace.
   *
   * The batch is validated entirely before anything is written, then recorded atomically: it is
   * either fully recorded or not at all. Items reported `new` are durable (for the SQLite store)
   * when the promise resolves. Duplicates inside the batch are detected too (the first is new).
   *
   * @throws TypeError / RangeError naming the bad item (`items[3].content must be a string`).
   * @throws Error if the store fails (nothing of the batch is recorded).
   */
  async ingest(namespace: string, items: readonly IngestItem[]): Promise<IngestResult[]> {
    if (this.#closed) throw new Error('ctxdedup: the ingest index is closed');
    const work = this.#ingest(namespace, items);
    this.#inFlight.add(work);
    try {
      return await work;
    } finally {
      this.#inFlight.delete(work);
    }
  }

  async #ingest(namespace: string, items: readonly IngestItem[]): Promise<IngestResult[]> {
    const { contents, ids, metadata, totalUnits } = validateBatch(namespace, items, this.#maxBatchItems);
    const { hex, first } = await hashBatch(contents, totalUnits, this.#hashing, this.#asyncThreshold);
    const requests: ClaimRequest[] = [];
    const requestOf = new Int32Array(contents.length).fill(-1);
    for (let i = 0; i < contents.length; i++) {
      if (first[i] === i) {
        requestOf[i] = requests.length;
        requests.push({ sha256: hex.slice(i * 64, i * 64 + 64), id: ids[i]!, metadata: metadata[i] });
      }
    }
    const ttl = this.ttlSeconds(namespace);
    const owners = await this.store.claim(namespace, requests, {
      nowMs: this.#now(),
      ttlMs: ttl === undefined ? undefined : ttl * 1000,
    });
    if (owners.length !== requests.length) throw new Error('ctxdedup: the store returned a malformed claim result');
    return contents.map((_, i) => {
      const head = first[i]!;
      const request = requests[requestOf[head]!]!;
      const owner = owners[requestOf[head]!] ?? request.id;
      const id = ids[i]!;
      return id === owner
        ? { status: 'new', id, sha256: request.sha256 }
        : { status: 'duplicate', id, duplicateOf: owner, sha256: request.sha256 };
    });
  }

  /** Waits for in-flight batches, then closes the store. Later `ingest` calls fail. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
    await this.store.close();
  }
}

interface ValidBatch {
  contents: string[];
  ids: string[];
  metadata: (string | undefined)[];
  totalUnits: number;
}

/** Validates a whole batch before any work, assigning ids to items without one. */
function validateBatch(namespace: unknown, items: unknown, maxItems: number): ValidBatch {
  if (typeof namespace !== 'string') typeError('namespace', `must be a string, got ${describe(namespace)}`);
  if (!NAMESPACE.test(namespace)) {
    typeError('namespace', `${JSON.stringify(namespace.slice(0, 140))} is not valid (letters, digits, . _ -; 1 to 128, not starting with . _ -)`);
  }
  expectArray(items, 'items');
  if (items.length > maxItems) rangeError('items', `has ${items.length} items, more than the limit of ${maxItems}`);
  const contents: string[] = new Array(items.length);
  const ids: string[] = new Array(items.length);
  const metadata: (string | undefined)[] = new Array(items.length);
  let totalUnits = 0;
  for (let i = 0; i < items.length; i++) {
    const item: unknown = items[i];
    const path = `items[${i}]`;
    expectObject(item, path);
    const { content, id } = item;
    if (typeof content !== 'string') typeError(`${path}.content`, `must be a string, got ${describe(content)}`);
    if (!content.isWellFormed()) typeError(`${path}.content`, 'contains a lone surrogate and has no UTF-8 encoding to checksum');
    if (id === undefined) {
      ids[i] = randomUUID();
    } else {
      if (typeof id !== 'string') typeError(`${path}.id`, `must be a string, got ${describe(id)}`);
      if (id.length === 0 || id.length > MAX_ID_LENGTH) rangeError(`${path}.id`, `must have 1 to ${MAX_ID_LENGTH} characters, got ${id.length}`);
      if (!id.isWellFormed()) typeError(`${path}.id`, 'contains a lone surrogate');
      ids[i] = id;
    }
    if (item.metadata !== undefined) {
      expectObject(item.metadata, `${path}.metadata`);
      let json: string;
      try {
        json = JSON.stringify(item.metadata);
      } catch (error) {
        return typeError(`${path}.metadata`, `is not serializable as JSON: ${(error as Error).message}`);
      }
      metadata[i] = json;
    }
    contents[i] = content;
    totalUnits += content.length;
  }
  return { contents, ids, metadata, totalUnits };
}
