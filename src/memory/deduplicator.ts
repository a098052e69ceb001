/**
 * `MemoryDeduplicator`: write-time check-and-merge and batch clustering of agent memories by
 * embedding cosine similarity. Similarity at or above `upperThreshold` means the same fact (the
 * newer memory replaces the older); between the bounds, a caller-supplied `merge` (usually an LLM
 * call) combines them; below `lowerThreshold` a memory is new.
 *
 * Nothing is ever lost: every memory that does not survive verbatim (a stored memory that is
 * deleted or overwritten, and an incoming memory that is merged or replaced instead of stored as
 * it is) is first recorded in the audit log, before the store is changed; the surviving (newer or
 * merged) memory is written before anything is deleted; and `undo(id)` puts a recorded memory back.
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { isDeepStrictEqual } from 'node:util';
import { describe, expectKnownKeys, expectObject, expectOptions, optionalBoolean, rangeError, show, typeError } from '../validation.js';
import { native } from '../native.js';
import { deprecatedAlias } from '../deprecated.js';
import { Pacer } from '../pacing.js';
import { type AuditEntry, type AuditLog, InMemoryAuditLog } from './audit.js';
import { type EmbedFunction, type RecommendedThresholds, hashedEmbedding } from './embedding.js';
import { buildMergePrompt, oldestFirst } from './prompt.js';
import type { Memory, MemoryStore, StoredMemory } from './store.js';
import { copyMemory, validateEmbeddings, validateMemories, validateThreshold } from './validate.js';

/**
 * How close to a threshold a similarity must come to count as reaching it. Embeddings are stored
 * as float32, so a pair whose cosine is exactly a threshold in the caller's float64 vectors scores
 * a little lower once stored (0.9 becomes 0.89999999…): rounding each component to float32 moves a
 * cosine by at most about 1.2e-7 (twice float32's relative precision, 2^-24), and a store that
 * normalizes vectors (ChromaDB) adds about as much. So "similarity ≥ threshold" is decided as
 * `similarity >= threshold - SIMILARITY_TOLERANCE`, at both bounds, at write time and in
 * {@link MemoryDeduplicator.dedupeAll}.
 */
export const SIMILARITY_TOLERANCE = 1e-6;

/** Whether `similarity` reaches `threshold`, within {@link SIMILARITY_TOLERANCE}. */
function reaches(similarity: number, threshold: number): boolean {
  return similarity >= threshold - SIMILARITY_TOLERANCE;
}

/** The mark of the write the current async context was started in (see `#serialized`). */
const insideWrite = new AsyncLocalStorage<object>();

/** What `merge` gets: the memories oldest to newest, and a ready prompt for an LLM. */
export interface MergeContext {
  /** All memories to merge, oldest first (two at write time; a whole cluster in batch mode). */
  memories: Memory[];
  /** {@link buildMergePrompt} of `memories`. */
  prompt: string;
}

/**
 * Combines near-duplicate memories into one: returns the merged text (or an object with
 * `content`). Throwing, or returning an empty text, makes the deduplicator fall back to keeping
 * the newest memory.
 */
export type MergeFunction = (older: Memory, newer: Memory, context: MergeContext) => Promise<string | { content: string }>;

/** Structured log events. */
export type MemoryDedupEvent =
  | {
      event: 'dedup_check';
      id: string;
      /** Id of the most similar stored memory, if any. */
      closestId: string | null;
      similarity: number | null;
      decision: WriteDecision;
      reason: string;
    }
  | { event: 'dedup_merge'; ids: string[]; count: number; resultId: string }
  | { event: 'dedup_fail'; ids: string[]; failed: 'store_query' | 'merge' | 'embed_merged'; error: string; fallback: 'insert' | 'keep_newest' };

/** Receives log events: a function, or a logger object with `info` and `warn` (pino, console). */
export type MemoryLogger =
  | ((event: MemoryDedupEvent, level: 'info' | 'warn') => void)
  | { info(event: MemoryDedupEvent): void; warn(event: MemoryDedupEvent): void };

/** Options of {@link MemoryDeduplicator}. */
export interface MemoryDeduplicatorOptions {
  /** Where memories live: `InMemoryStore`, `SqliteMemoryStore`, `ChromaMemoryStore`, or your own {@link MemoryStore}. */
  store: MemoryStore;
  /**
   * Embeds memory texts. Default: the built-in {@link hashedEmbedding} (offline, lexical), whose
   * calibrated thresholds then become the defaults. Production should pass a neural embedder.
   */
  embed?: EmbedFunction;
  /** Merges memories whose similarity is in [lower, upper). Without it they are kept apart. */
  merge?: MergeFunction;
  /**
   * Default 0.95, or the embedder's `recommendedThresholds.upper`. Inclusive, within
   * {@link SIMILARITY_TOLERANCE} (so that float32 storage cannot move a pair below it).
   */
  upperThreshold?: number;
  /**
   * Default 0.90, or the embedder's `recommendedThresholds.lower`. Inclusive, within
   * {@link SIMILARITY_TOLERANCE}.
   */
  lowerThreshold?: number;
  /** When false, every memory is inserted as is. Default true. */
  enabled?: boolean;
  /** Receives one event per decision and failure (a function of `(event, level)`, or a pino-style logger). Default: none. */
  logger?: MemoryLogger;
  /**
   * Where replaced memories are kept: an object with `record`, `list` and `markUndone`. Default:
   * the store's own (`store.audit`), else in memory.
   */
  audit?: AuditLog;
  /** Clock for audit entries, ms since the epoch (tests). A function; default `Date.now`. */
  now?: () => number;
}

/** What happened to one written memory. */
export type WriteDecision = 'insert' | 'replace' | 'merge';

/** Result of {@link MemoryDeduplicator.checkAndMerge}, one per memory. */
export interface WriteResult {
  /** The memory's id. */
  id: string;
  decision: WriteDecision;
  /** The memory that now holds this memory's facts (itself, the merged memory, or the newer one). */
  stored: Memory;
  /** Ids of memories removed or overwritten by this write (their previous versions are audited). */
  replaced: string[];
  /** Similarity to the most similar stored memory, or null when there was none or the query failed. */
  similarity: number | null;
  closestId: string | null;
  /** Set when a failure forced a fallback: what failed. */
  failure?: 'store_query' | 'merge' | 'embed_merged';
  /** Human-readable explanation of the decision. */
  reason: string;
}

/** Options of {@link MemoryDeduplicator.dedupeAll}. */
export interface DedupeAllOptions {
  /** Report what would happen, change nothing. Default false. */
  dryRun?: boolean;
  /**
   * `single` (default): connected components of pairs ≥ lower (A~B and B~C join A, B, C even if A
   * and C are unrelated; see each cluster's `minSimilarity`). `complete`: every pair in a cluster
   * is ≥ lower (built greedily, most similar pairs first).
   */
  linkage?: 'single' | 'complete';
}

/** @deprecated Use {@link DedupeAllOptions}. */
export type DeduplicateAllOptions = DedupeAllOptions;

/** What batch mode does to one cluster. */
export type ClusterAction =
  /** Every pair ≥ upper: the newest member stays, the others are removed. */
  | 'keep_newest'
  /** Some pair < upper: the members are merged into one (stored under the newest member's id). */
  | 'merge'
  /** Some pair < upper and no merge function: nothing is changed. */
  | 'skip';

/** One cluster in the batch report. */
export interface ClusterReport {
  /** Members oldest to newest. */
  members: { id: string; timestamp?: number; content: string }[];
  /** Lowest and highest similarity over all member pairs. */
  minSimilarity: number;
  maxSimilarity: number;
  action: ClusterAction;
  /** Id of the memory that holds the cluster's facts afterwards (the newest member). */
  resultId: string;
  /** Ids removed (or, for the result id under `merge`, overwritten). */
  removedIds: string[];
  /**
   * @deprecated Use `removedIds` (`removed` is a count everywhere else, as in
   * {@link BatchReport.removed}). Not enumerable: absent from JSON.
   */
  readonly removed: string[];
  /** Set when the merge failed and the cluster fell back to `keep_newest` (not in dry runs). */
  failure?: 'merge' | 'embed_merged';
  /** Merged content (real runs with action `merge` only). */
  mergedContent?: string;
}

/** Result of {@link MemoryDeduplicator.dedupeAll}. */
export interface BatchReport {
  dryRun: boolean;
  linkage: 'single' | 'complete';
  upperThreshold: number;
  lowerThreshold: number;
  /** Memories in the store before the run. */
  memories: number;
  clusters: ClusterReport[];
  /** Memories removed (or that would be). */
  removed: number;
  /** Memories after the run (or that there would be). */
  remaining: number;
}

function isNewer(a: Memory, b: Memory): boolean {
  return (a.timestamp ?? -Infinity) > (b.timestamp ?? -Infinity);
}

function mergedContent(value: unknown): string | undefined {
  const text = typeof value === 'string' ? value : typeof value === 'object' && value !== null ? (value as { content?: unknown }).content : undefined;
  return typeof text === 'string' && text.trim() !== '' ? text : undefined;
}

/** Newest member's metadata, with `intensity` the maximum numeric intensity of all members. */
function mergedMetadata(members: readonly Memory[], newest: Memory): Record<string, unknown> | undefined {
  const intensities = members.map((m) => m.metadata?.['intensity']).filter((v): v is number => typeof v === 'number' && !Number.isNaN(v));
  if (newest.metadata === undefined && intensities.length === 0) return undefined;
  const metadata = structuredClone(newest.metadata ?? {});
  if (intensities.length > 0) metadata['intensity'] = Math.max(...intensities);
  return metadata;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The memory deduplicator. */
export class MemoryDeduplicator {
  /** The store it reads and writes. */
  readonly store: MemoryStore;
  /** Similarity from which a new memory replaces the stored one (resolved from the options and the embedder). */
  readonly upperThreshold: number;
  /** Similarity from which the two are merged, when a `merge` function is given. */
  readonly lowerThreshold: number;
  /** Whether deduplication is on (`false`: every memory is inserted as is). */
  readonly enabled: boolean;
  #embed: EmbedFunction;
  #merge: MergeFunction | undefined;
  #log: (event: MemoryDedupEvent, level: 'info' | 'warn') => void;
  #audit: AuditLog;
  #now: () => number;
  /** The mark of the write running now (see `#serialized`). */
  #running: object | undefined;
  /** Tail of the chain of writes: they run one at a time, in call order. */
  #queue: Promise<unknown> = Promise.resolve();

  /**
   * @throws TypeError / RangeError naming the bad option (`options.audit.list must be a function`).
   */
  constructor(options: MemoryDeduplicatorOptions) {
    expectObject(options, 'options');
    expectKnownKeys(options, 'options', ['store', 'embed', 'merge', 'upperThreshold', 'lowerThreshold', 'enabled', 'logger', 'audit', 'now']);
    const { store, embed, merge, logger } = options;
    expectObject(store, 'options.store');
    for (const method of ['add', 'update', 'delete', 'get', 'list', 'nearest'] as const) {
      if (typeof store[method] !== 'function') typeError(`options.store.${method}`, 'must be a function');
    }
    if (embed !== undefined && typeof embed !== 'function') typeError('options.embed', `must be a function, got ${describe(embed)}`);
    if (merge !== undefined && typeof merge !== 'function') typeError('options.merge', `must be a function, got ${describe(merge)}`);
    this.store = store;
    this.#embed = embed ?? hashedEmbedding();
    this.#merge = merge;
    const recommended = (this.#embed as Partial<{ recommendedThresholds: RecommendedThresholds }>).recommendedThresholds;
    this.upperThreshold = validateThreshold(options.upperThreshold, 'options.upperThreshold', recommended?.upper ?? 0.95);
    this.lowerThreshold = validateThreshold(options.lowerThreshold, 'options.lowerThreshold', recommended?.lower ?? 0.9);
    if (this.lowerThreshold > this.upperThreshold) {
      rangeError('options.lowerThreshold', `must not exceed upperThreshold (${this.upperThreshold}), got ${this.lowerThreshold}`);
    }
    this.enabled = optionalBoolean(options.enabled, 'options.enabled', true);
    this.#log = toLogFunction(logger);
    if (options.audit !== undefined) {
      expectObject(options.audit, 'options.audit');
      for (const method of ['record', 'list', 'markUndone'] as const) {
        if (typeof options.audit[method] !== 'function') typeError(`options.audit.${method}`, 'must be a function');
      }
    }
    if (options.now !== undefined && typeof options.now !== 'function') typeError('options.now', `must be a function, got ${describe(options.now)}`);
    const storeAudit = (store as Partial<{ audit: AuditLog }>).audit;
    this.#audit = options.audit ?? storeAudit ?? new InMemoryAuditLog();
    this.#now = options.now ?? Date.now;
  }

  /**
   * Runs `task` after every write queued before it (and before every one queued after it), so
   * that each decision sees the store as the previous write left it.
   */
  #serialized<T>(task: () => Promise<T>): Promise<T> {
    // A write called from inside this deduplicator's own write (its merge function calling back)
    // would wait for itself forever: refuse it instead.
    // The mark is this deduplicator's running write: a write started from its context once it has
    // settled (a timer the merge set) is no longer inside it, and queues as any other.
    const mark = insideWrite.getStore();
    if (mark !== undefined && mark === this.#running) {
      return Promise.reject(
        new Error(
          'MemoryDeduplicator: a write was called from inside one of its own writes (a merge function calling back into it), which would wait for itself',
        ),
      );
    }
    const run = this.#queue.then(() => {
      const mark = {};
      this.#running = mark;
      return insideWrite.run(mark, task).finally(() => {
        if (this.#running === mark) this.#running = undefined;
      });
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Writes one memory, deduplicating it against the most similar stored memory.
   * Rejects (writing nothing) on invalid input (including an id the store already holds) or when
   * `embed` fails.
   */
  async checkAndMerge(memory: Memory): Promise<WriteResult> {
    return (await this.addBatch([memory]))[0]!;
  }

  /**
   * Writes several memories in order, each checked against the store, which by then holds the
   * earlier memories of the batch: so the new memories are compared with each other too. The
   * whole batch is validated (each memory, holes included; ids unique within the batch and not
   * already in the store; metadata plain JSON) and embedded (one `embed` call) before the first
   * write, so bad input writes nothing and records nothing in the audit log.
   *
   * Writes through one deduplicator (`addBatch`, `checkAndMerge`, `dedupeAll`, `undo`) run one at
   * a time, in call order, so concurrent calls never decide on a stale store: a memory merged by
   * one call is seen (and audited when overwritten) by the next. Embedding runs before a call
   * takes its turn, so concurrent calls still embed in parallel. A large batch lets the event loop
   * run every few milliseconds while it writes.
   * @throws TypeError / RangeError naming the offending memory (`memories[2].id "x" is already in
   *   the store`). A store that fails part-way rejects with its error; the memories written before
   *   it stay written (and audited as usual).
   */
  async addBatch(memories: readonly Memory[]): Promise<WriteResult[]> {
    const clean = validateMemories(memories, 'memories');
    const seen = new Set<string>();
    for (let i = 0; i < clean.length; i++) {
      const id = clean[i]!.id;
      if (seen.has(id)) rangeError(`memories[${i}].id`, `repeats ${JSON.stringify(id)} from earlier in the batch`);
      seen.add(id);
    }
    if (clean.length === 0) return [];
    const texts = clean.map((m) => m.content);
    const embedded = (async () => this.#embed(texts))();
    // Awaited (and its error reported) once the batch's turn comes; not an unhandled rejection meanwhile.
    embedded.catch(() => undefined);
    return this.#serialized(async () => {
      // An id the store holds would make its `add` fail after the earlier memories were written.
      for (let i = 0; i < clean.length; i++) {
        const id = clean[i]!.id;
        if ((await this.store.get(id)) !== undefined) rangeError(`memories[${i}].id`, `${JSON.stringify(id)} is already in the store`);
      }
      const vectors = validateEmbeddings(await embedded, clean.length, undefined);
      const results: WriteResult[] = [];
      const pacer = new Pacer();
      for (let i = 0; i < clean.length; i++) {
        results.push(await this.#write({ ...clean[i]!, embedding: vectors[i]! }));
        if (i + 1 < clean.length) await pacer.pause();
      }
      return results;
    });
  }

  async #write(incoming: StoredMemory): Promise<WriteResult> {
    const base = { id: incoming.id, stored: stripEmbedding(incoming), replaced: [] as string[] };
    if (!this.enabled) {
      await this.store.add(incoming);
      return { ...base, decision: 'insert', similarity: null, closestId: null, reason: 'deduplication is disabled' };
    }
    let closest: { memory: StoredMemory; similarity: number } | undefined;
    try {
      [closest] = await this.store.nearest(incoming.embedding, 1);
    } catch (error) {
      this.#log({ event: 'dedup_fail', ids: [incoming.id], failed: 'store_query', error: errorText(error), fallback: 'insert' }, 'warn');
      await this.store.add(incoming);
      return {
        ...base,
        decision: 'insert',
        similarity: null,
        closestId: null,
        failure: 'store_query',
        reason: 'the store query failed; inserted anyway (fail open)',
      };
    }
    const similarity = closest?.similarity ?? null;
    const closestId = closest?.memory.id ?? null;
    const check = (decision: WriteDecision, reason: string): void =>
      this.#log({ event: 'dedup_check', id: incoming.id, closestId, similarity, decision, reason }, 'info');

    if (closest === undefined || !reaches(closest.similarity, this.lowerThreshold)) {
      const reason = closest === undefined ? 'the store is empty' : `closest similarity ${closest.similarity} is below ${this.lowerThreshold}`;
      check('insert', reason);
      await this.store.add(incoming);
      return { ...base, decision: 'insert', similarity, closestId, reason };
    }
    const stored = closest.memory;
    if (!reaches(closest.similarity, this.upperThreshold) && this.#merge === undefined) {
      const reason = `similarity ${closest.similarity} is in [${this.lowerThreshold}, ${this.upperThreshold}) but no merge function was given; kept apart`;
      check('insert', reason);
      await this.store.add(incoming);
      return { ...base, decision: 'insert', similarity, closestId, reason };
    }
    const [older, newer] = isNewer(stored, incoming) ? [incoming, stored] : [stored, incoming];
    if (reaches(closest.similarity, this.upperThreshold)) {
      const reason = `similarity ${closest.similarity} reaches ${this.upperThreshold}: the newer memory replaces the older`;
      check('replace', reason);
      const result = await this.#keepNewer(incoming, older, newer, closest.similarity);
      return { ...base, ...result, decision: 'replace', similarity, closestId, reason };
    }
    const reason = `similarity ${closest.similarity} is in [${this.lowerThreshold}, ${this.upperThreshold}): merged`;
    check('merge', reason);
    const merged = await this.#mergeMembers([older, newer]);
    if (merged.failure !== undefined) {
      const result = await this.#keepNewer(incoming, older, newer, closest.similarity);
      return {
        ...base,
        ...result,
        decision: 'replace',
        similarity,
        closestId,
        failure: merged.failure,
        reason: `${reason}; the merge failed, so the newer memory replaced the older`,
      };
    }
    const result = merged.memory;
    // Audit first (both inputs: neither survives verbatim), then write the merged memory, then
    // delete: a crash at any point loses nothing.
    const replaced: string[] = [];
    if (newer === incoming) {
      await this.#record('merged', older, newer.id, closest.similarity);
      // The merged memory is stored under the incoming id: the incoming text itself is kept only
      // here (`undo(incoming.id)` writes it back over the merged version).
      await this.#record('merged', incoming, newer.id, closest.similarity);
      await this.store.add(result);
      await this.store.delete(older.id);
      replaced.push(older.id);
    } else {
      // The stored memory is the newer one: the merge overwrites it, and the (older) incoming
      // memory is never stored on its own; both go to the audit log.
      await this.#record('merged', incoming, newer.id, closest.similarity);
      await this.#record('merged', stored, newer.id, closest.similarity);
      await this.store.update(result);
      replaced.push(stored.id);
    }
    this.#log({ event: 'dedup_merge', ids: [older.id, newer.id], count: 2, resultId: result.id }, 'info');
    return { ...base, stored: stripEmbedding(result), replaced, decision: 'merge', similarity, closestId, reason };
  }

  /** ≥ upper, or a failed merge: the newer of the two stays. */
  async #keepNewer(incoming: StoredMemory, older: StoredMemory, newer: StoredMemory, similarity: number): Promise<Pick<WriteResult, 'stored' | 'replaced'>> {
    await this.#record('replaced', older, newer.id, similarity);
    if (newer === incoming) {
      await this.store.add(incoming);
      await this.store.delete(older.id);
      return { stored: stripEmbedding(incoming), replaced: [older.id] };
    }
    // The incoming memory is older than its stored duplicate: it is audited, never stored.
    return { stored: stripEmbedding(newer), replaced: [] };
  }

  /** Calls `merge` and embeds the result; on any failure reports it (the caller falls back). */
  async #mergeMembers(members: StoredMemory[]): Promise<{ memory: StoredMemory; failure?: undefined } | { failure: 'merge' | 'embed_merged' }> {
    const ordered = oldestFirst(members);
    const newest = ordered[ordered.length - 1]!;
    const plain = ordered.map(stripEmbedding);
    const ids = ordered.map((m) => m.id);
    let content: string | undefined;
    try {
      const answer = await this.#merge!(plain[0]!, plain[plain.length - 1]!, { memories: plain, prompt: buildMergePrompt(plain) });
      content = mergedContent(answer);
      if (content === undefined) throw new Error('merge returned an empty memory');
    } catch (error) {
      this.#log({ event: 'dedup_fail', ids, failed: 'merge', error: errorText(error), fallback: 'keep_newest' }, 'warn');
      return { failure: 'merge' };
    }
    let embedding: Float32Array;
    try {
      [embedding] = validateEmbeddings(await this.#embed([content]), 1, newest.embedding.length) as [Float32Array];
    } catch (error) {
      this.#log({ event: 'dedup_fail', ids, failed: 'embed_merged', error: errorText(error), fallback: 'keep_newest' }, 'warn');
      return { failure: 'embed_merged' };
    }
    const memory: StoredMemory = { id: newest.id, content, embedding };
    if (newest.timestamp !== undefined) memory.timestamp = newest.timestamp;
    const metadata = mergedMetadata(ordered, newest);
    if (metadata !== undefined) memory.metadata = metadata;
    return { memory };
  }

  async #record(action: AuditEntry['action'], memory: StoredMemory, replacedBy: string, similarity: number | null): Promise<void> {
    const at: unknown = this.#now();
    if (typeof at !== 'number' || !Number.isFinite(at)) typeError('options.now()', `must return a finite number (ms since the epoch), got ${show(at)}`);
    await this.#audit.record({ at, action, memory: copyMemory(memory), replacedBy, similarity });
  }

  /**
   * Clusters every stored memory whose similarity reaches `lowerThreshold` (natively, off the
   * main thread) and deduplicates each cluster: all pairs ≥ upper keeps the newest member;
   * otherwise the members are merged (or left alone without a merge function). Both bounds are
   * decided within {@link SIMILARITY_TOLERANCE}, as at write time. `dryRun` reports exactly the
   * clusters and actions a real run would take, and changes nothing. Runs in turn with the other
   * writes of this deduplicator (see {@link MemoryDeduplicator.addBatch}).
   */
  async dedupeAll(options: DedupeAllOptions = {}): Promise<BatchReport> {
    expectOptions(options);
    expectKnownKeys(options as Record<string, unknown>, 'options', ['dryRun', 'linkage']);
    const dryRun = optionalBoolean(options.dryRun, 'options.dryRun', false);
    const linkage = options.linkage ?? 'single';
    if (typeof linkage !== 'string') typeError('options.linkage', `must be 'single' or 'complete', got ${show(linkage)}`);
    if (linkage !== 'single' && linkage !== 'complete') rangeError('options.linkage', `must be 'single' or 'complete', got ${show(linkage)}`);
    return this.#serialized(() => this.#dedupeAll(dryRun, linkage));
  }

  async #dedupeAll(dryRun: boolean, linkage: 'single' | 'complete'): Promise<BatchReport> {
    const all = (await this.store.list()).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const report: BatchReport = {
      dryRun,
      linkage,
      upperThreshold: this.upperThreshold,
      lowerThreshold: this.lowerThreshold,
      memories: all.length,
      clusters: [],
      removed: 0,
      remaining: all.length,
    };
    if (all.length < 2) return report;
    const dim = all[0]!.embedding.length;
    const matrix = new Float32Array(all.length * dim);
    all.forEach((m, i) => {
      if (m.embedding.length !== dim) rangeError(`store memory ${JSON.stringify(m.id)}`, `has ${m.embedding.length} dimensions, others have ${dim}`);
      matrix.set(m.embedding, i * dim);
    });
    const found = await native.cosineClustersAsync(matrix, dim, this.lowerThreshold - SIMILARITY_TOLERANCE, linkage);
    const pacer = new Pacer();
    for (let c = 0; c + 1 < found.offsets.length; c++) {
      if (c > 0) await pacer.pause();
      const members = oldestFirst(Array.from(found.members.subarray(found.offsets[c]!, found.offsets[c + 1]!), (i) => all[i]!));
      const minSimilarity = found.minSimilarity[c]!;
      const newest = members[members.length - 1]!;
      const others = members.slice(0, -1).map((m) => m.id);
      const action: ClusterAction = reaches(minSimilarity, this.upperThreshold) ? 'keep_newest' : this.#merge ? 'merge' : 'skip';
      const removedIds = action === 'skip' ? [] : others;
      const fields: Omit<ClusterReport, 'removed'> = {
        members: members.map((m) => ({ id: m.id, content: m.content, ...(m.timestamp === undefined ? {} : { timestamp: m.timestamp }) })),
        minSimilarity,
        maxSimilarity: found.maxSimilarity[c]!,
        action,
        resultId: newest.id,
        removedIds,
      };
      const cluster = deprecatedAlias(fields, 'removed', removedIds) as ClusterReport;
      if (!dryRun && action !== 'skip') await this.#applyCluster(cluster, members, newest);
      report.clusters.push(cluster);
      report.removed += cluster.removedIds.length;
    }
    report.remaining = all.length - report.removed;
    return report;
  }
  /** @deprecated Use {@link MemoryDeduplicator.dedupeAll} (the same call). */
  deduplicateAll(options: DedupeAllOptions = {}): Promise<BatchReport> {
    return this.dedupeAll(options);
  }

  async #applyCluster(cluster: ClusterReport, members: StoredMemory[], newest: StoredMemory): Promise<void> {
    const others = members.slice(0, -1);
    if (cluster.action === 'merge') {
      const merged = await this.#mergeMembers(members);
      if (merged.failure === undefined) {
        for (const m of members) await this.#record('merged', m, newest.id, cluster.minSimilarity);
        await this.store.update(merged.memory);
        for (const m of others) await this.store.delete(m.id);
        cluster.mergedContent = merged.memory.content;
        this.#log({ event: 'dedup_merge', ids: members.map((m) => m.id), count: members.length, resultId: newest.id }, 'info');
        return;
      }
      cluster.failure = merged.failure;
    }
    for (const m of others) await this.#record('replaced', m, newest.id, cluster.minSimilarity);
    for (const m of others) await this.store.delete(m.id);
  }

  /** Every audit entry, oldest first: what was replaced or merged away, by what, and when. */
  async history(): Promise<AuditEntry[]> {
    return this.#audit.list();
  }

  /**
   * Restores the most recent audited version of memory `id` that has not been restored yet:
   * re-added if it was deleted, or written back over what is stored under its id now (the merged
   * version, when a merge was stored under this id; the other memories of that merge stay in the
   * audit log, each restorable by its own id). What it overwrites goes to the audit log first
   * (`replaced`, unless it is that very version), so a memory stored later under a reused id can be
   * restored by `undo(id)` in turn. Memories stored under other ids are left as is.
   * Rejects if there is nothing to restore. Runs in turn with the other writes of this deduplicator.
   */
  async undo(id: string): Promise<Memory> {
    if (typeof id !== 'string') typeError('id', `must be a string, got ${describe(id)}`);
    return this.#serialized(() => this.#undo(id));
  }

  async #undo(id: string): Promise<Memory> {
    const entries = await this.#audit.list();
    const entry = entries.reverse().find((e) => e.memory.id === id && !e.undone);
    if (entry === undefined) throw new RangeError(`ctxdedup: no audited version of memory ${JSON.stringify(id)} to restore`);
    const current = await this.store.get(id);
    if (current === undefined) await this.store.add(entry.memory);
    else {
      // The memory stored under the id now is overwritten: audited first, like every write that
      // does not keep a memory verbatim (a later memory may have reused the id), so undo(id)
      // can bring it back in turn.
      if (!isDeepStrictEqual(stripEmbedding(current), stripEmbedding(entry.memory))) await this.#record('replaced', current, id, null);
      await this.store.update(entry.memory);
    }
    await this.#audit.markUndone(entry.seq);
    return stripEmbedding(entry.memory);
  }
}

function stripEmbedding(memory: StoredMemory): Memory {
  const { embedding: _embedding, ...plain } = copyMemory(memory);
  return plain;
}

function toLogFunction(logger: MemoryLogger | undefined): (event: MemoryDedupEvent, level: 'info' | 'warn') => void {
  if (logger === undefined) return () => {};
  if (typeof logger === 'function') return logger;
  if (typeof logger === 'object' && logger !== null && typeof logger.info === 'function' && typeof logger.warn === 'function') {
    return (event, level) => (level === 'warn' ? logger.warn(event) : logger.info(event));
  }
  typeError('options.logger', 'must be a function or an object with info() and warn()');
}
