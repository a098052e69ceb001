/**
 * Stage `deduplicate`: byte-exact dedup of scored context items (Cupel pipeline, Stage 3).
 *
 * Two items are duplicates iff `item.content` is the same JavaScript string. In each group the
 * survivor is the highest score; ties go to the lowest input index (-0 and +0 tie). Survivors
 * keep their input order and are the very objects that came in.
 *
 * The native core decides. Batches of at most {@link SMALL_BATCH} entries take an internal
 * JavaScript fast path with the same rule (one `Map`), because crossing into native code costs
 * more than the work there: measured at 4 to 128 entries of ~200 characters, warm, 1.4 vs 7.7 µs
 * (4) up to 26 vs 49 µs (128); on freshly parsed input 3 vs 10 µs (4), a tie near 16. Both paths
 * are held to the same conformance vectors. The pure-JS baseline the benchmarks compare against
 * lives in bench/reference/stage3.ts.
 * @module
 */
import { describe, expectArray, expectKnownKeys, expectObject, expectOptions, optionalBoolean, rangeError, typeError } from '../validation.js';
import { native } from '../native.js';
import { deprecatedAlias } from '../deprecated.js';

/**
 * What {@link deduplicate} reads of an item: a string `content`. Any object type that has it
 * fits, your own interfaces included; every other field rides along untouched.
 */
export interface ContextItemFields {
  content: string;
}

/** Anything with a string `content`: {@link ContextItemFields} and any other fields (for annotating literals). */
export interface ContextItem extends ContextItemFields {
  [field: string]: unknown;
}

/** A context item with its relevance score (higher is better; ±Infinity allowed, NaN not). */
export interface ScoredItem<T extends ContextItemFields = ContextItem> {
  item: T;
  score: number;
}

/** Options of {@link deduplicate} and {@link deduplicateWithReport}. */
export interface DeduplicateOptions {
  /** `false` returns the input unchanged without comparing anything. Default `true`. */
  enabled?: boolean;
}

/** A removed duplicate and the survivor it lost to. */
export interface RemovedItem<T extends ContextItemFields = ContextItem> {
  /** Input index of the removed entry. */
  index: number;
  /** Input index of the surviving entry with the same content. */
  duplicateOf: number;
  /** The removed entry itself. */
  item: ScoredItem<T>;
}

/** Totals of {@link deduplicateWithReport}. */
export interface DeduplicateStats {
  input: number;
  kept: number;
  /** Entries removed (`decisions.length`). */
  removed: number;
  /** Sum of `content.length` (UTF-16 code units) over removed entries. */
  charsSaved: number;
  /** @deprecated Use `charsSaved` (the same number). Not enumerable: absent from JSON. */
  readonly charsRemoved: number;
}

/** Result of {@link deduplicateWithReport}. */
export interface DeduplicateReport<T extends ContextItemFields = ContextItem> {
  kept: ScoredItem<T>[];
  /** One per removed entry, in input order: which entry, and the survivor it lost to. */
  decisions: RemovedItem<T>[];
  stats: DeduplicateStats;
  /**
   * @deprecated Use `decisions` (the same array; `removed` is a count, as in `stats.removed`).
   * Not enumerable: absent from JSON.
   */
  readonly removed: RemovedItem<T>[];
}

/** Batches up to this size take the internal JavaScript fast path (see the module notes). */
export const SMALL_BATCH = 128;

/**
 * Which path decides: `'auto'` (the product: the fast path up to {@link SMALL_BATCH} entries,
 * the native core above), or `'native'` (the core whatever the size, so tests and benchmarks
 * can hold it to the same vectors). @internal
 */
export type ScoredPath = 'auto' | 'native';

/** Validates the input; returns the contents and scores (in bulk, for one native call). */
function readScored(scored: unknown): { contents: string[]; scores: Float64Array } {
  expectArray(scored, 'scored');
  // Grown as the items are read: a huge holey array fails on its first hole, not on allocation.
  const contents: string[] = [];
  const list: number[] = [];
  for (let i = 0; i < scored.length; i++) {
    const entry = scored[i];
    expectObject(entry, `scored[${i}]`);
    const item = entry['item'];
    expectObject(item, `scored[${i}].item`);
    const content = item['content'];
    if (typeof content !== 'string') typeError(`scored[${i}].item.content`, `must be a string, got ${describe(content)}`);
    const score = entry['score'];
    if (typeof score !== 'number') typeError(`scored[${i}].score`, `must be a number, got ${describe(score)}`);
    if (Number.isNaN(score)) rangeError(`scored[${i}].score`, 'is NaN');
    contents.push(content);
    list.push(score);
  }
  return { contents, scores: Float64Array.from(list) };
}

/** The same survivor rule as the Rust core, for small batches (the internal fast path). */
function survivorsSmall(contents: readonly string[], scores: Float64Array): Uint32Array {
  const best = new Map<string, number>();
  for (let i = 0; i < contents.length; i++) {
    const content = contents[i] as string;
    const current = best.get(content);
    if (current === undefined || (scores[i] as number) > (scores[current] as number)) best.set(content, i);
  }
  const out = new Uint32Array(contents.length);
  for (let i = 0; i < contents.length; i++) out[i] = best.get(contents[i] as string) as number;
  return out;
}

function survivors(contents: string[], scores: Float64Array, path: ScoredPath): Uint32Array {
  return path === 'auto' && contents.length <= SMALL_BATCH ? survivorsSmall(contents, scores) : native.scoredSurvivors(contents, scores);
}

function readOptions(options: DeduplicateOptions | undefined): Required<DeduplicateOptions> {
  expectOptions(options);
  if (options !== undefined) expectKnownKeys(options as Record<string, unknown>, 'options', ['enabled']);
  return { enabled: optionalBoolean(options?.enabled, 'options.enabled', true) };
}

/**
 * Removes byte-exact duplicates, keeping the best-scored copy of each content.
 *
 * @returns the surviving entries (same object references) in input order.
 * @throws TypeError if `scored` is not an array, an entry or its `item` is not an object,
 *   `item.content` is not a string or `score` is not a number (the message names the path).
 * @throws RangeError if a score is NaN.
 * @example
 * deduplicate([{ item: { content: 'a' }, score: 1 }, { item: { content: 'a' }, score: 2 }])
 * // -> [{ item: { content: 'a' }, score: 2 }]
 */
export function deduplicate<T extends ContextItemFields>(scored: readonly ScoredItem<T>[], options?: DeduplicateOptions): ScoredItem<T>[] {
  return deduplicateVia('auto', scored, options);
}

/** {@link deduplicate} on a chosen path. @internal */
export function deduplicateVia<T extends ContextItemFields>(path: ScoredPath, scored: readonly ScoredItem<T>[], options?: DeduplicateOptions): ScoredItem<T>[] {
  const { enabled } = readOptions(options);
  if (!enabled) {
    expectArray(scored, 'scored');
    return scored.slice();
  }
  const { contents, scores } = readScored(scored);
  const survivor = survivors(contents, scores, path);
  return scored.filter((_, i) => survivor[i] === i);
}

/**
 * Like {@link deduplicate}, and also says what was removed, in favour of which entry, and the
 * totals. With `enabled: false` everything is kept.
 */
export function deduplicateWithReport<T extends ContextItemFields>(scored: readonly ScoredItem<T>[], options?: DeduplicateOptions): DeduplicateReport<T> {
  return deduplicateWithReportVia('auto', scored, options);
}

/** {@link deduplicateWithReport} on a chosen path. @internal */
export function deduplicateWithReportVia<T extends ContextItemFields>(
  path: ScoredPath,
  scored: readonly ScoredItem<T>[],
  options?: DeduplicateOptions,
): DeduplicateReport<T> {
  const { enabled } = readOptions(options);
  expectArray(scored, 'scored');
  const kept: ScoredItem<T>[] = [];
  const decisions: RemovedItem<T>[] = [];
  let charsSaved = 0;
  if (!enabled) {
    // One push per item: spreading hundreds of thousands of arguments overflows the stack.
    for (const entry of scored) kept.push(entry);
  } else {
    const { contents, scores } = readScored(scored);
    const survivor = survivors(contents, scores, path);
    scored.forEach((entry, index) => {
      const duplicateOf = survivor[index] as number;
      if (duplicateOf === index) {
        kept.push(entry);
      } else {
        decisions.push({ index, duplicateOf, item: entry });
        charsSaved += (contents[index] as string).length;
      }
    });
  }
  const stats = deprecatedAlias({ input: scored.length, kept: kept.length, removed: decisions.length, charsSaved }, 'charsRemoved', charsSaved);
  return deprecatedAlias({ kept, decisions, stats }, 'removed', decisions) as DeduplicateReport<T>;
}
