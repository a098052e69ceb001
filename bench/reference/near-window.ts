/**
 * Pure-JS reference of the ingestion index's near-duplicate check (ctxdedup-core's
 * `near_window::near_duplicates`), written from the rules in shared/golden/cce/README.md §4 as a
 * JavaScript developer would: normalize everything, bucket by fingerprint line, compare the
 * pairs that meet. The benchmark baseline for the native check; same results.
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

/**
 * For each batch item, the best earlier near duplicate among the window contents and the earlier
 * batch items that matched nothing: `{ target, similarity }` (target = window index, or window
 * length + batch index), or undefined. Highest similarity wins; ties go to the earliest.
 */
export function refNearDuplicates(
  window: readonly string[],
  batch: readonly string[],
  threshold: number,
): ({ target: number; similarity: number } | undefined)[] {
  const buckets = new Map<string, Member[]>();
  const index = (m: Member): void => {
    for (const line of m.fingerprintLines) {
      const bucket = buckets.get(line);
      if (bucket === undefined) buckets.set(line, [m]);
      else bucket.push(m);
    }
  };
  window.forEach((content, w) => {
    const m = member(content, w);
    if (m !== undefined) index(m);
  });
  return batch.map((content, b) => {
    const m = member(content, window.length + b);
    if (m === undefined) return undefined;
    let best: { target: number; similarity: number } | undefined;
    const seen = new Set<Member>();
    for (const line of m.fingerprintLines) {
      for (const other of buckets.get(line) ?? []) {
        if (seen.has(other)) continue;
        seen.add(other);
        const s = similarity(m, other, threshold);
        if (s === undefined) continue;
        if (best === undefined || s > best.similarity || (s === best.similarity && other.position < best.target)) {
          best = { target: other.position, similarity: s };
        }
      }
    }
    if (best === undefined) index(m);
    return best;
  });
}
