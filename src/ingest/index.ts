/**
 * Incremental dedup index for high-volume ingestion.
 *
 * Identity is the SHA-256 of a content's UTF-8 bytes. Each namespace remembers, per content, the
 * id of the item that first brought it; a later item with the same content is a `duplicate` of
 * that id, unless it *is* that id (a retried item stays `new`: ingestion is retry-safe).
 *
 * Optionally, per namespace, an item whose content is new but nearly repeats one of the
 * namespace's recent new items (the message stage's near-duplicate line-Jaccard rule) is reported as a
 * `near` duplicate of it; see {@link NearDuplicateOptions}.
 *
 * ```ts
 * const index = await IngestIndex.open({ store: 'sqlite:./ingest.sqlite' });
 * const results = await index.ingest('chunks', [{ id: 'a', content: 'hello' }, { id: 'b', content: 'hello' }]);
 * // [{ status: 'new', id: 'a', sha256: '2cf2…' },
 * //  { status: 'duplicate', match: 'exact', id: 'b', duplicateOf: 'a', sha256: '2cf2…' }]
 * await index.close();
 * ```
 * @module
 */
import { randomUUID } from 'node:crypto';
import { describe, expectArray, expectKnownKeys, expectObject, expectOptions, optionalNumber, rangeError, show, typeError } from '../validation.js';
import { DEFAULT_ASYNC_THRESHOLD, hashBatch, type Hashing } from './hash.js';
import { DEFAULT_NEAR_WINDOW_MAX_CHARS, NearWindows, nearOption, type NearCandidate, type NearDuplicateOptions, type NearSettings } from './near.js';
import type { SqliteStoreOptions } from './sqlite-store.js';
import { openStore, type ClaimRequest, type IngestStore } from './store.js';

export type { ClaimOptions, ClaimRequest, IngestStore, OpenStoreOptions } from './store.js';
export type { SqliteStoreOptions, SqliteSynchronous } from './sqlite-store.js';
export { openStore } from './store.js';
export type { Hashing } from './hash.js';
export type { NearDuplicateOptions } from './near.js';
export { DEFAULT_NEAR_THRESHOLD, DEFAULT_NEAR_WINDOW, DEFAULT_NEAR_WINDOW_MAX_CHARS } from './near.js';

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

/** What every decision carries. */
interface IngestResultBase {
  /** The item's id (the caller's, or the assigned UUID). */
  id: string;
  /** Lowercase hex SHA-256 of the content's UTF-8 bytes. */
  sha256: string;
}

/** The item's id owns its content (it brought it first, or it is a retry of the item that did). */
export interface NewIngestResult extends IngestResultBase {
  status: 'new';
}

/** Another item already brought exactly this content. */
export interface ExactDuplicateResult extends IngestResultBase {
  status: 'duplicate';
  match: 'exact';
  /** Id of the item that owns the content. */
  duplicateOf: string;
}

/**
 * The content is new, but nearly repeats a recent new item of the namespace (near-duplicate
 * mode only). Its content is still recorded under its own id: an exact copy sent later is an
 * `exact` duplicate of this item.
 */
export interface NearDuplicateResult extends IngestResultBase {
  status: 'duplicate';
  match: 'near';
  /** Id of the recent item this one nearly repeats (the most similar; ties: the earliest). */
  duplicateOf: string;
  /** Multiset line Jaccard between the two contents, in [threshold, 1]. */
  similarity: number;
}

/** The decision for one item, in input order. `status` and `match` discriminate. */
export type IngestResult = NewIngestResult | ExactDuplicateResult | NearDuplicateResult;

/** Per-namespace settings. */
export interface NamespaceOptions {
  /** Entries older than this are forgotten and their content counts as new again. Default: never. */
  ttlSeconds?: number;
  /**
   * Near-duplicate mode: `{ threshold?, window? }` (or `true` for the defaults) turns it on for
   * this namespace, `false` turns off a default set in {@link IngestIndexOptions.nearDuplicates}.
   *
   * An item whose content is new (not an exact duplicate) is compared with the namespace's
   * `window` most recent new items (default 1,000) and with the earlier new items of its batch,
   * by the message stage's near-duplicate rule: lines split on `\n`, JS `trim()` + `toLowerCase()`, empty
   * ones dropped, at least two lines; first-five-line fingerprints overlapping by at least 3;
   * raw lengths within a 0.7 ratio; multiset line Jaccard `>= threshold` (default 0.85). The most
   * similar one makes it a {@link NearDuplicateResult}. Near duplicates do not enter the window.
   *
   * The window is kept in this process only: per {@link IngestIndex} instance, empty after a
   * restart, not shared through Redis or SQLite (exact identity is). Items older than the
   * namespace's TTL leave it, and all windows together hold at most
   * {@link IngestIndexOptions.nearWindowMaxChars} of content (the least recently used namespaces
   * give up their oldest items first).
   */
  nearDuplicates?: NearDuplicateOptions | boolean;
}

/** Options of {@link IngestIndex.open}. */
/** The option names {@link IngestIndex.open} takes. */
const INDEX_OPTIONS = [
  'store',
  'ttlSeconds',
  'nearDuplicates',
  'nearWindowMaxChars',
  'namespaces',
  'maxBatchItems',
  'asyncThreshold',
  'hashing',
  'redisKeyPrefix',
  'sqlite',
  'now',
] as const satisfies readonly (keyof IngestIndexOptions)[];

/** Options of {@link IngestIndex.open}: the store, TTLs, near-duplicate mode and limits. */
export interface IngestIndexOptions {
  /**
   * `memory`, `sqlite:<path>` (embedded, durable; the default is `sqlite:./ctxdedup-ingest.sqlite`;
   * the path must name a file, not `:memory:`), `redis://host:port[/db]` (shared between
   * instances), or an {@link IngestStore} instance.
   */
  store?: string | IngestStore;
  /** Default TTL for every namespace (see {@link NamespaceOptions.ttlSeconds}). */
  ttlSeconds?: number;
  /** Default near-duplicate mode for every namespace (see {@link NamespaceOptions.nearDuplicates}). Default: off. */
  nearDuplicates?: NearDuplicateOptions | boolean;
  /**
   * Bound on the content held by the near-duplicate windows of all namespaces together, in UTF-16
   * code units. Default 33,554,432 (32 Mi units, about 64 MB).
   */
  nearWindowMaxChars?: number;
  /** Settings by namespace name; they override the defaults above. */
  namespaces?: Record<string, NamespaceOptions>;
  /** Largest accepted batch. Default 100,000 items. */
  maxBatchItems?: number;
  /**
   * Batches of at least this many UTF-16 code units are hashed (and, in near-duplicate mode,
   * compared with the window) off the main thread. Default 262,144.
   */
  asyncThreshold?: number;
  /** @deprecated Batches are always hashed natively; only `'native'` is accepted (the pure-JS baseline moved to bench/). */
  hashing?: Hashing;
  /** Key prefix for the Redis store, a string (validated whatever the store). Default `ctxdedup:ingest:`. */
  redisKeyPrefix?: string;
  /**
   * Settings of the SQLite store: `synchronous: 'full'` (default; acknowledged entries survive
   * power loss) or `'normal'` (they survive process crashes only), `busyTimeoutMs`.
   */
  sqlite?: SqliteStoreOptions;
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
  #defaultNear: NearSettings | undefined;
  #namespaces: Map<string, NamespaceOptions>;
  #near: Map<string, NearSettings | false>;
  #windows: NearWindows;
  #maxBatchItems: number;
  #asyncThreshold: number;
  #now: () => number;
  #closed = false;
  #inFlight = new Set<Promise<unknown>>();

  private constructor(store: IngestStore, options: IngestIndexOptions) {
    this.store = store;
    this.#defaultTtl = options.ttlSeconds;
    this.#namespaces = new Map(Object.entries(options.namespaces ?? {}));
    this.#defaultNear = nearOption(options.nearDuplicates, 'options.nearDuplicates') || undefined;
    this.#near = new Map();
    for (const [name, ns] of this.#namespaces) {
      const near = nearOption(ns.nearDuplicates, `options.namespaces[${JSON.stringify(name)}].nearDuplicates`);
      if (near !== undefined) this.#near.set(name, near);
    }
    this.#maxBatchItems = options.maxBatchItems ?? 100_000;
    this.#asyncThreshold = options.asyncThreshold ?? DEFAULT_ASYNC_THRESHOLD;
    this.#now = options.now ?? Date.now;
    this.#windows = new NearWindows(options.nearWindowMaxChars ?? DEFAULT_NEAR_WINDOW_MAX_CHARS, this.#asyncThreshold);
  }

  /**
   * Validates the options and opens the store.
   * @throws TypeError / RangeError naming the bad option; Error if the store cannot be opened
   *   (for `sqlite:<path>`, naming the file, with SQLite's own error as `cause`).
   */
  static async open(options: IngestIndexOptions = {}): Promise<IngestIndex> {
    expectOptions(options);
    expectKnownKeys(options as Record<string, unknown>, 'options', INDEX_OPTIONS);
    ttlOption(options.ttlSeconds, 'options.ttlSeconds');
    nearOption(options.nearDuplicates, 'options.nearDuplicates');
    optionalNumber(options.nearWindowMaxChars, 'options.nearWindowMaxChars', 0, { min: 0, integer: true });
    if (options.namespaces !== undefined) {
      expectObject(options.namespaces, 'options.namespaces');
      for (const [name, ns] of Object.entries(options.namespaces)) {
        const path = `options.namespaces[${JSON.stringify(name)}]`;
        if (!NAMESPACE.test(name)) typeError(path, 'is not a valid namespace name (letters, digits, . _ -; at most 128)');
        expectObject(ns, path);
        expectKnownKeys(ns as Record<string, unknown>, path, ['ttlSeconds', 'nearDuplicates']);
        ttlOption(ns.ttlSeconds, `${path}.ttlSeconds`);
        nearOption(ns.nearDuplicates, `${path}.nearDuplicates`);
      }
    }
    optionalNumber(options.maxBatchItems, 'options.maxBatchItems', 0, { min: 1, integer: true });
    optionalNumber(options.asyncThreshold, 'options.asyncThreshold', 0, { min: 0 });
    if (options.hashing !== undefined && options.hashing !== 'native') {
      const moved = options.hashing === 'js' ? ' (the pure-JS baseline moved to the benchmarks, bench/reference/hashing.ts)' : '';
      typeError('options.hashing', `must be 'native'${moved}, got ${show(options.hashing)}`);
    }
    if (options.sqlite !== undefined) {
      expectObject(options.sqlite, 'options.sqlite');
      expectKnownKeys(options.sqlite as Record<string, unknown>, 'options.sqlite', ['synchronous', 'busyTimeoutMs']);
      const { synchronous } = options.sqlite;
      if (synchronous !== undefined && synchronous !== 'full' && synchronous !== 'normal') {
        typeError('options.sqlite.synchronous', `must be 'full' or 'normal', got ${describe(synchronous)}`);
      }
      optionalNumber(options.sqlite.busyTimeoutMs, 'options.sqlite.busyTimeoutMs', 0, { min: 0, max: 2 ** 31 - 1, integer: true });
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      typeError('options.now', `must be a function, got ${describe(options.now)}`);
    }
    if (options.redisKeyPrefix !== undefined && typeof options.redisKeyPrefix !== 'string') {
      typeError('options.redisKeyPrefix', `must be a string, got ${describe(options.redisKeyPrefix)}`);
    }
    const spec = options.store ?? DEFAULT_STORE;
    let store: IngestStore;
    if (typeof spec === 'string') {
      store = await openStore(spec, {
        ...(options.redisKeyPrefix === undefined ? {} : { redisKeyPrefix: options.redisKeyPrefix }),
        ...(options.sqlite === undefined ? {} : { sqlite: options.sqlite }),
      });
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

  /** Near-duplicate settings of a namespace, or `undefined` if the mode is off for it. */
  nearDuplicates(namespace: string): Readonly<Required<NearDuplicateOptions>> | undefined {
    const own = this.#near.get(namespace);
    return own === false ? undefined : (own ?? this.#defaultNear);
  }

  /** Items in a namespace's near-duplicate window (0 when the mode is off), for diagnostics. */
  nearWindowSize(namespace: string): number {
    return this.#windows.size(namespace);
  }

  /**
   * Records a batch and reports, per item in order, whether its content is new to the namespace.
   *
   * The batch is validated entirely before anything is written, then recorded atomically: it is
   * either fully recorded or not at all. Items reported `new` are durable (for the SQLite store)
   * when the promise resolves. Duplicates inside the batch are detected too (the first is new).
   * In near-duplicate mode, the contents the batch brought are then compared with the
   * namespace's window (see {@link NamespaceOptions.nearDuplicates}); that step only reads and
   * updates the in-process window, after the store has recorded the batch.
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
    const { hex, first } = await hashBatch(contents, totalUnits, this.#asyncThreshold);
    const requests: ClaimRequest[] = [];
    const requestOf = new Int32Array(contents.length).fill(-1);
    for (let i = 0; i < contents.length; i++) {
      if (first[i] === i) {
        requestOf[i] = requests.length;
        requests.push({ sha256: hex.slice(i * 64, i * 64 + 64), id: ids[i]!, metadata: metadata[i] });
      }
    }
    const ttl = this.ttlSeconds(namespace);
    const nowMs = this.#now();
    const ttlMs = ttl === undefined ? undefined : ttl * 1000;
    const owners = await this.store.claim(namespace, requests, { nowMs, ttlMs });
    if (owners.length !== requests.length) throw new Error('ctxdedup: the store returned a malformed claim result');
    const results: IngestResult[] = contents.map((_, i) => {
      const head = first[i]!;
      const request = requests[requestOf[head]!]!;
      const owner = owners[requestOf[head]!] ?? request.id;
      const id = ids[i]!;
      return id === owner
        ? { status: 'new', id, sha256: request.sha256 }
        : { status: 'duplicate', match: 'exact', id, duplicateOf: owner, sha256: request.sha256 };
    });
    const near = this.nearDuplicates(namespace);
    if (near === undefined) return results;

    // Near-duplicate mode: the contents this batch brought (or re-sent) against the recent ones.
    // One candidate per content: its first item that is `new` (its owner), which need not be the
    // content's first item in the batch (an exact duplicate under another id may come first).
    const heads: number[] = [];
    const candidates: NearCandidate[] = [];
    const candidateOf = new Map<number, number>();
    for (let i = 0; i < contents.length; i++) {
      if (results[i]!.status === 'new' && !candidateOf.has(first[i]!)) {
        candidateOf.set(first[i]!, i);
        heads.push(i);
        candidates.push({ id: ids[i]!, content: contents[i]! });
      }
    }
    const hits = await this.#windows.decide(namespace, near, candidates, nowMs, ttlMs);
    const hitOf = new Map<number, { duplicateOf: string; similarity: number }>();
    heads.forEach((head, k) => {
      const hit = hits[k];
      if (hit !== undefined) hitOf.set(head, hit);
    });
    if (hitOf.size === 0) return results;
    return results.map((result, i) => {
      // A repeat inside the batch with the candidate's id shares the candidate's decision.
      const hit = result.status === 'new' ? hitOf.get(candidateOf.get(first[i]!)!) : undefined;
      return hit === undefined
        ? result
        : { status: 'duplicate', match: 'near', id: result.id, duplicateOf: hit.duplicateOf, similarity: hit.similarity, sha256: result.sha256 };
    });
  }

  /** Waits for in-flight batches, then closes the store. Later `ingest` calls fail. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
    // The windows' native memory is freed now, not whenever the index is collected.
    this.#windows.clear();
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
        const overflow = error instanceof RangeError && error.message === 'Maximum call stack size exceeded';
        return typeError(`${path}.metadata`, overflow ? 'nests too deeply to be stored as JSON' : `is not serializable as JSON: ${(error as Error).message}`);
      }
      metadata[i] = json;
    }
    contents[i] = content;
    totalUnits += content.length;
  }
  return { contents, ids, metadata, totalUnits };
}
