/**
 * Near-duplicate mode of the ingestion index: for each namespace that enables it, a bounded
 * window of its most recent new items, and the message stage's near-duplicate rule applied against it
 * (natively: `ctxdedup-core`'s `near_window`).
 *
 * The window lives in the process: it is per {@link IngestIndex} instance, starts empty when the
 * process starts, and is not shared through Redis or SQLite. Exact identity (the store) stays
 * authoritative and shared; near-duplicate detection is a best-effort, local refinement on top.
 * @module
 */
import { describe, expectKnownKeys, expectObject, optionalNumber, rangeError, typeError } from '../validation.js';
import { native, type NativeNearMatches } from '../native.js';

/** Settings of the near-duplicate mode of a namespace. */
export interface NearDuplicateOptions {
  /**
   * Minimum multiset line Jaccard for an item to count as a near duplicate, in (0, 1].
   * Default {@link DEFAULT_NEAR_THRESHOLD}.
   */
  threshold?: number;
  /**
   * How many of the namespace's most recent new items a batch is compared with, at least 1.
   * Default {@link DEFAULT_NEAR_WINDOW}.
   */
  window?: number;
}

/** Default similarity threshold of the near-duplicate mode (the message stage's). */
export const DEFAULT_NEAR_THRESHOLD = 0.85;
/** Default window: the 1,000 most recent new items of the namespace. */
export const DEFAULT_NEAR_WINDOW = 1000;
/** Largest accepted window. */
export const MAX_NEAR_WINDOW = 1_000_000;
/**
 * Default bound on the content held by all windows of one index together, in UTF-16 code units
 * (32 Mi units, about 64 MB). Beyond it, the oldest items of the least recently used namespace
 * are dropped first.
 */
export const DEFAULT_NEAR_WINDOW_MAX_CHARS = 32 * 1024 * 1024;

/** Validated settings. */
export interface NearSettings {
  threshold: number;
  window: number;
}

/**
 * Validates a `nearDuplicates` option: `undefined` (inherit), `false` (off) or settings.
 * @throws TypeError / RangeError naming `path`.
 */
export function nearOption(value: unknown, path: string): NearSettings | false | undefined {
  if (value === undefined || value === false) return value;
  if (value === true) return { threshold: DEFAULT_NEAR_THRESHOLD, window: DEFAULT_NEAR_WINDOW };
  expectObject(value, path);
  expectKnownKeys(value, path, ['threshold', 'window']);
  const { threshold, window } = value as { threshold?: unknown; window?: unknown };
  if (threshold !== undefined) {
    if (typeof threshold !== 'number') typeError(`${path}.threshold`, `must be a number, got ${describe(threshold)}`);
    if (!(threshold > 0 && threshold <= 1)) rangeError(`${path}.threshold`, `must be in (0, 1], got ${threshold}`);
  }
  return {
    threshold: (threshold as number | undefined) ?? DEFAULT_NEAR_THRESHOLD,
    window: optionalNumber(window, `${path}.window`, DEFAULT_NEAR_WINDOW, { min: 1, max: MAX_NEAR_WINDOW, integer: true }),
  };
}

/** An item of a batch that the exact pass found new, offered to the near-duplicate check. */
export interface NearCandidate {
  id: string;
  content: string;
}

/** A near duplicate: the id of the recent item it nearly repeats, and their similarity. */
export interface NearHit {
  duplicateOf: string;
  similarity: number;
}

interface WindowEntry {
  id: string;
  /** Length of the content, in UTF-16 code units (the content itself is held natively). */
  units: number;
  addedMs: number;
}

/** Dropped slots at the head of a window's array before it is compacted. */
const COMPACT_MIN_HEAD = 1024;

/**
 * One namespace's window, oldest first. The contents live in native memory
 * ({@link native.NativeNearWindow}: copied in once, never again per call); this side keeps their
 * ids, lengths and arrival times in an array with a head index. Dropping the oldest entries
 * clears their slots and moves the head; the array is compacted once the dropped slots are at
 * least half of it, so a drop costs O(1) amortized (`Array.prototype.shift` would move every
 * remaining entry on each drop: quadratic when a large window evicts many items).
 */
export class NamespaceWindow {
  #slots: (WindowEntry | undefined)[] = [];
  #head = 0;
  readonly #contents = new native.NativeNearWindow();
  ids = new Set<string>();
  units = 0;

  /** Entries held. */
  get length(): number {
    return this.#slots.length - this.#head;
  }

  /** Appends the newest entries, oldest first (their contents are copied into native memory). */
  push(items: readonly NearCandidate[], addedMs: number): void {
    if (items.length === 0) return;
    this.#contents.push(
      items.map((c) => c.content),
      addedMs,
    );
    for (const { id, content } of items) {
      this.#slots.push({ id, units: content.length, addedMs });
      this.ids.add(id);
      this.units += content.length;
    }
  }

  /** Drops the oldest entries while `drop` accepts the oldest one; returns the units freed. */
  dropWhile(drop: (oldest: WindowEntry) => boolean): number {
    let freed = 0;
    let count = 0;
    for (let entry = this.#slots[this.#head]; entry !== undefined && drop(entry); entry = this.#slots[this.#head]) {
      // Cleared, so that the entry can be garbage-collected before the next compaction.
      this.#slots[this.#head] = undefined;
      this.#head++;
      this.ids.delete(entry.id);
      freed += entry.units;
      count++;
    }
    if (count === 0) return 0;
    this.#contents.dropOldest(count);
    if (this.#head === this.#slots.length) {
      this.#slots = [];
      this.#head = 0;
    } else if (this.#head >= COMPACT_MIN_HEAD && this.#head * 2 >= this.#slots.length) {
      this.#slots = this.#slots.slice(this.#head);
      this.#head = 0;
    }
    this.units -= freed;
    return freed;
  }

  /**
   * Near duplicates of `batch` against the entries still live at `nowMs` (with `ttlMs`: added
   * less than `ttlMs` before it). Returns the native search, whose window contents are fixed
   * when this is called, and the entries it may name (a match's `target` is a window position,
   * or the window's length + a batch index). It runs off the main thread when the batch and the
   * window contents it may read reach `asyncThreshold` code units. Its cost follows the batch
   * and the window items that start with one of its items' first lines, not the window's size.
   */
  decide(
    batch: string[],
    exclude: Uint8Array,
    threshold: number,
    time: { nowMs: number; ttlMs: number | undefined },
    asyncThreshold: number,
  ): { windowLength: number; entryAt: (position: number) => WindowEntry; found: NativeNearMatches | Promise<NativeNearMatches> } {
    const search = this.#contents.search(batch, exclude, threshold, time.nowMs, time.ttlMs);
    const taken = new Map<number, WindowEntry>();
    for (const position of search.positions) taken.set(position, this.#slots[this.#head + position]!);
    let batchUnits = 0;
    for (const content of batch) batchUnits += content.length;
    const found = batchUnits + search.units >= asyncThreshold ? search.runAsync(batch, exclude, threshold) : search.run(batch, exclude, threshold);
    return { windowLength: this.length, entryAt: (position) => taken.get(position)!, found };
  }
}

/** The windows of every namespace in near-duplicate mode, with a shared memory bound. */
export class NearWindows {
  /** Least recently used first. */
  #windows = new Map<string, NamespaceWindow>();
  #units = 0;
  #maxUnits: number;
  #asyncThreshold: number;
  /** Per namespace, the tail of the chain of checks (they run one at a time, in call order). */
  #chains = new Map<string, Promise<unknown>>();

  constructor(maxUnits: number, asyncThreshold: number) {
    this.#maxUnits = maxUnits;
    this.#asyncThreshold = asyncThreshold;
  }

  /** Items held in `namespace`'s window (for tests and diagnostics). */
  size(namespace: string): number {
    return this.#windows.get(namespace)?.length ?? 0;
  }

  /** Content held by all windows, in UTF-16 code units. */
  get units(): number {
    return this.#units;
  }

  /** Empties every window now (their native memory is freed at once, not when collected). */
  clear(): void {
    for (const window of this.#windows.values()) window.dropWhile(() => true);
    this.#windows.clear();
    this.#units = 0;
  }

  /**
   * Decides, for each candidate in order, whether it nearly repeats an item of the namespace's
   * window or an earlier candidate that matched nothing; then adds the candidates that matched
   * nothing to the window. Calls for one namespace run one after the other, in call order, so
   * each sees the items the previous ones added.
   *
   * @param ttlMs window items older than this are ignored and dropped (the namespace's TTL).
   */
  decide(
    namespace: string,
    settings: NearSettings,
    candidates: readonly NearCandidate[],
    nowMs: number,
    ttlMs: number | undefined,
  ): Promise<(NearHit | undefined)[]> {
    const previous = this.#chains.get(namespace) ?? Promise.resolve();
    const run = previous.then(() => this.#decide(namespace, settings, candidates, nowMs, ttlMs));
    const tail = run.catch(() => undefined);
    this.#chains.set(namespace, tail);
    void tail.then(() => {
      if (this.#chains.get(namespace) === tail) this.#chains.delete(namespace);
    });
    return run;
  }

  async #decide(
    namespace: string,
    settings: NearSettings,
    candidates: readonly NearCandidate[],
    nowMs: number,
    ttlMs: number | undefined,
  ): Promise<(NearHit | undefined)[]> {
    if (candidates.length === 0) return [];
    let window = this.#windows.get(namespace);
    if (window === undefined) {
      window = new NamespaceWindow();
      this.#windows.set(namespace, window);
    }
    if (ttlMs !== undefined) this.#units -= window.dropWhile((oldest) => oldest.addedMs + ttlMs <= nowMs);
    // A candidate whose id is already in the window, or repeats the id of an earlier candidate,
    // is a retry: it stays new, is compared with nothing and is no candidate for others.
    const exclude = new Uint8Array(candidates.length);
    const seen = new Set<string>();
    candidates.forEach((c, i) => {
      if (window.ids.has(c.id) || seen.has(c.id)) exclude[i] = 1;
      seen.add(c.id);
    });
    const batch = candidates.map((c) => c.content);
    // The search offers only entries still live: after a clock went back, expired ones can sit
    // behind live ones, where the drop above does not reach.
    const { windowLength, entryAt, found: search } = window.decide(batch, exclude, settings.threshold, { nowMs, ttlMs }, this.#asyncThreshold);
    const found = await search;

    const hits: (NearHit | undefined)[] = new Array(candidates.length);
    const added: NearCandidate[] = [];
    for (let i = 0; i < candidates.length; i++) {
      const target = found.target[i]!;
      if (target < 0) {
        if (exclude[i] === 0) added.push(candidates[i]!);
        continue;
      }
      const duplicateOf = target < windowLength ? entryAt(target).id : candidates[target - windowLength]!.id;
      hits[i] = { duplicateOf, similarity: found.similarity[i]! };
    }
    const before = window.units;
    window.push(added, nowMs);
    this.#units += window.units - before;
    this.#units -= window.dropWhile(() => window.length > settings.window);
    // Most recently used last; over the memory bound, the least recently used windows shrink first.
    this.#windows.delete(namespace);
    this.#windows.set(namespace, window);
    this.#evict();
    return hits;
  }

  #evict(): void {
    for (const [name, window] of this.#windows) {
      if (this.#units <= this.#maxUnits) return;
      let over = this.#units - this.#maxUnits;
      this.#units -= window.dropWhile((oldest) => {
        over -= oldest.units;
        return over + oldest.units > 0;
      });
      if (window.length === 0) this.#windows.delete(name);
    }
  }
}
