/**
 * A tiny seeded PRNG (mulberry32) and helpers, so every corpus is byte-identical across runs,
 * machines and Node versions (Math.random would make figures incomparable between runs).
 * @module
 */

/** A deterministic random source. */
export interface Rng {
  /** Uniform float in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** Uniform integer in [lo, hi] (inclusive). */
  range(lo: number, hi: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  /** A uniformly chosen element of a non-empty array. */
  pick<T>(items: readonly T[]): T;
}

/** mulberry32: 32-bit state, good enough statistical quality for synthetic text. */
export function mulberry32(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next,
    int,
    range: (lo, hi) => lo + int(hi - lo + 1),
    chance: (p) => next() < p,
    pick: <T>(items: readonly T[]): T => items[int(items.length)] as T,
  };
}

/**
 * A new string object with the same content, as JSON.parse would hand it over. Duplicates in
 * the corpora must not share one JS string: V8 caches a string's hash in the string itself, and
 * identical references compare in O(1), both of which would flatter a pure-JS `Map` baseline.
 */
export function freshCopy(s: string): string {
  return JSON.parse(JSON.stringify(s)) as string;
}
