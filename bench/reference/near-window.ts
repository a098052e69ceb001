/**
 * Pure-JS reference of the ingestion index's near-duplicate check (ctxdedup-core's
 * `near_window::near_duplicates`), written from the rules in shared/golden/cce/README.md §4 as a
 * JavaScript developer would: normalize everything, bucket by fingerprint line, compare the
 * pairs that meet; a window kept between calls is normalized and bucketed once. The benchmark
 * baseline for the native check; same results.
 */

const FINGERPRINT_LINES = 5;
const MIN_OVERLAP = 3;
const MIN_LENGTH_RATIO = 0.7;

interface Member {
  /** Position in window ++ batch. */
  position: number;
  rawLength: number;
  lineCount: number;
  bag: Map<string, number>;
  fingerprint: string[];
  fingerprintLines: string[];
}

function member(content: string, position: number): Member | undefined {
  const lines: string[] = [];
  for (const piece of content.split('\n')) {
    const line = piece.trim().toLowerCase();
    if (line !== '') lines.push(line);
  }
  if (lines.length < 2) return undefined;
  const bag = new Map<string, number>();
  for (const line of lines) bag.set(line, (bag.get(line) ?? 0) + 1);
  const fingerprint = lines.slice(0, FINGERPRINT_LINES);
  return { position, rawLength: content.length, lineCount: lines.length, bag, fingerprint, fingerprintLines: [...new Set(fingerprint)] };
}

function similarity(a: Member, b: Member, threshold: number): number | undefined {
  let overlap = 0;
  for (const x of a.fingerprint) for (const y of b.fingerprint) if (x === y) overlap++;
  if (overlap < MIN_OVERLAP) return undefined;
  const hi = Math.max(a.rawLength, b.rawLength);
  if ((hi === 0 ? 1 : Math.min(a.rawLength, b.rawLength) / hi) < MIN_LENGTH_RATIO) return undefined;
  const [small, large] = a.bag.size <= b.bag.size ? [a.bag, b.bag] : [b.bag, a.bag];
  let intersection = 0;
  for (const [line, count] of small) intersection += Math.min(count, large.get(line) ?? 0);
  const jaccard = intersection / (a.lineCount + b.lineCount - intersection);
  return jaccard >= threshold ? jaccard : undefined;
}

/** Adds `m` to the buckets of its fingerprint lines. */
function index(buckets: Map<string, Member[]>, m: Member): void {
  for (const line of m.fingerprintLines) {
    const bucket = buckets.get(line);
    if (bucket === undefined) buckets.set(line, [m]);
    else bucket.push(m);
  }
}

/**
 * A window kept between calls, as a careful JavaScript index would keep it: each content is
 * normalized and bucketed once, when it is pushed; a call normalizes only its batch.
 */
export class RefNearWindow {
  readonly #buckets = new Map<string, Member[]>();
  #length = 0;

  constructor(contents: readonly string[] = []) {
    this.push(contents);
  }

  /** Appends `contents` as the newest window contents. */
  push(contents: readonly string[]): void {
    for (const content of contents) {
      const m = member(content, this.#length++);
      if (m !== undefined) index(this.#buckets, m);
    }
  }

  /**
   * For each batch item, the best earlier near duplicate among the window contents and the
   * earlier batch items that matched nothing: `{ target, similarity }` (target = window index, or
   * window length + batch index), or undefined. Highest similarity wins; ties go to the earliest.
   */
  decide(batch: readonly string[], threshold: number): ({ target: number; similarity: number } | undefined)[] {
    // The batch's own unmatched items are candidates for its later items, for this call only.
    const own = new Map<string, Member[]>();
    return batch.map((content, b) => {
      const m = member(content, this.#length + b);
      if (m === undefined) return undefined;
      let best: { target: number; similarity: number } | undefined;
      const seen = new Set<Member>();
      for (const line of m.fingerprintLines) {
        for (const others of [this.#buckets.get(line), own.get(line)]) {
          for (const other of others ?? []) {
            if (seen.has(other)) continue;
            seen.add(other);
            const s = similarity(m, other, threshold);
            if (s === undefined) continue;
            if (best === undefined || s > best.similarity || (s === best.similarity && other.position < best.target)) {
              best = { target: other.position, similarity: s };
            }
          }
        }
      }
      if (best === undefined) index(own, m);
      return best;
    });
  }
}

/**
 * {@link RefNearWindow.decide} of `batch` against a window of `window`, built for this call.
 */
export function refNearDuplicates(
  window: readonly string[],
  batch: readonly string[],
  threshold: number,
): ({ target: number; similarity: number } | undefined)[] {
  return new RefNearWindow(window).decide(batch, threshold);
}
