/**
 * Pure-JS baseline of Stage 3 (`deduplicate`): what one would write without ctxdedup, a `Map`
 * from content to the index of the best entry so far, then a filter in input order.
 * Same rule as the library: highest score wins, ties go to the lowest index.
 * @module
 */

/** The shape of a scored entry the baseline reads. */
export interface ScoredLike {
  item: { content: string };
  score: number;
}

/** Survivors of byte-exact dedup, in input order (the same objects). */
export function deduplicateBaseline<T extends ScoredLike>(scored: readonly T[]): T[] {
  const best = new Map<string, number>();
  for (let i = 0; i < scored.length; i++) {
    const entry = scored[i] as T;
    const current = best.get(entry.item.content);
    if (current === undefined || entry.score > (scored[current] as T).score) best.set(entry.item.content, i);
  }
  return scored.filter((entry, i) => best.get(entry.item.content) === i);
}
