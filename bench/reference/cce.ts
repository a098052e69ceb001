/**
 * A pure-JS reference of context-compression-engine's message dedup rules, written from
 * /work/shared/golden/cce/README.md only (no CCE code was read or copied).
 *
 * It is deliberately the straightforward implementation, i.e. the baseline ctxdedup has to beat:
 * - exact pass: a `Map` from content to member indices;
 * - fuzzy pass: normalized lines per message, messages bucketed by each distinct line of their
 *   fingerprint, and every pair met in a shared bucket checked in full (fingerprint overlap,
 *   length ratio, multiset Jaccard), union-find over the matches.
 * Pairs that already sit in one component are still compared: the rules do not need that
 * shortcut, and a plain implementation does not take it.
 * @module
 */

/** The parts of a message the rules read. */
export interface RefMessage {
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
}

/** CCE's annotation; exact ones have no `similarity` key. */
export interface RefAnnotation {
  duplicateOfIndex: number;
  contentLength: number;
  similarity?: number;
}

const SKIP_PREFIXES = ['[summary:', '[summary#', '[truncated'];
const MIN_CHARS = 200;
const FINGERPRINT_LINES = 5;
const MIN_OVERLAP = 3;
const MIN_LENGTH_RATIO = 0.7;

function contentOf(m: RefMessage): string {
  return typeof m.content === 'string' ? m.content : '';
}

/** README §1: string content, role not preserved, no tool calls, no summary prefix, >= 200 units. */
function isEligible(m: RefMessage, preserve: ReadonlySet<unknown>): boolean {
  if (m.role && preserve.has(m.role)) return false;
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) return false;
  const content = contentOf(m);
  if (SKIP_PREFIXES.some((p) => content.startsWith(p))) return false;
  return content.length >= MIN_CHARS;
}

/** README §2: first member in the recency window if there is a window, else the last member. */
function keepTarget(members: readonly number[], recencyStart: number): number {
  if (recencyStart > 0) {
    for (const m of members) if (m >= recencyStart) return m;
  }
  return members[members.length - 1] as number;
}

/** README §3: exact duplicates among eligible messages. */
export function refAnalyzeDuplicates(
  messages: readonly RefMessage[],
  recencyStart: number,
  preserveRoles: ReadonlySet<unknown>,
): Map<number, RefAnnotation> {
  const groups = new Map<string, number[]>();
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as RefMessage;
    if (!isEligible(m, preserveRoles)) continue;
    const content = m.content as string;
    const members = groups.get(content);
    if (members === undefined) groups.set(content, [i]);
    else members.push(i);
  }
  const out = new Map<number, RefAnnotation>();
  for (const members of groups.values()) {
    if (members.length < 2) continue;
    const keep = keepTarget(members, recencyStart);
    const contentLength = contentOf(messages[keep] as RefMessage).length;
    for (const m of members) if (m !== keep) out.set(m, { duplicateOfIndex: keep, contentLength });
  }
  return out;
}

/**
 * README §3/§6: 32-bit djb2 over the UTF-16 units of `${length}:${content}`, the bucket key CCE
 * uses internally (h = h * 33 + unit, mod 2^32, from 5381).
 */
function djb2(content: string): number {
  const key = `${content.length}:${content}`;
  let h = 5381;
  for (let i = 0; i < key.length; i++) h = (Math.imul(h, 33) + key.charCodeAt(i)) >>> 0;
  return h;
}

/**
 * The exact pass bucketed the way the README says CCE does it: by djb2 hash, then by full string
 * comparison inside a bucket. Same annotations as {@link refAnalyzeDuplicates}, and also CCE's
 * Map insertion order (§6). Slower than a plain `Map`, because the hash is computed in JS on
 * every call, but closer to what CCE itself costs.
 */
export function refAnalyzeDuplicatesDjb2(
  messages: readonly RefMessage[],
  recencyStart: number,
  preserveRoles: ReadonlySet<unknown>,
): Map<number, RefAnnotation> {
  // bucket hash -> groups of equal contents, each group's member indices ascending
  const buckets = new Map<number, number[][]>();
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as RefMessage;
    if (!isEligible(m, preserveRoles)) continue;
    const content = m.content as string;
    const h = djb2(content);
    const groups = buckets.get(h);
    if (groups === undefined) {
      buckets.set(h, [[i]]);
      continue;
    }
    const group = groups.find((g) => contentOf(messages[g[0] as number] as RefMessage) === content);
    if (group === undefined) groups.push([i]);
    else group.push(i);
  }
  const out = new Map<number, RefAnnotation>();
  for (const groups of buckets.values()) {
    for (const members of groups) {
      if (members.length < 2) continue;
      const keep = keepTarget(members, recencyStart);
      const contentLength = contentOf(messages[keep] as RefMessage).length;
      for (const m of members) if (m !== keep) out.set(m, { duplicateOfIndex: keep, contentLength });
    }
  }
  return out;
}

/** A fuzzy participant: its normalized lines as a multiset, and its fingerprint. */
interface Member {
  index: number;
  rawLength: number;
  lineCount: number;
  bag: Map<string, number>;
  /** First five normalized lines, repeats kept. */
  fingerprint: string[];
  /** The distinct lines of the fingerprint (its bucket keys). */
  fingerprintLines: string[];
}

/** README §4.2: split on \n only, trim() then toLowerCase(), drop empty lines. */
function normalizedLines(content: string): string[] {
  const out: string[] = [];
  for (const piece of content.split('\n')) {
    const line = piece.trim().toLowerCase();
    if (line !== '') out.push(line);
  }
  return out;
}

function counts(lines: readonly string[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of lines) map.set(line, (map.get(line) ?? 0) + 1);
  return map;
}

/**
 * README §4.4: sum over distinct lines L of countA(L) * countB(L) within the two fingerprints,
 * which is the number of equal (position in A, position in B) pairs: at most 5 x 5 compares.
 */
function fingerprintOverlap(a: Member, b: Member): number {
  let total = 0;
  for (const x of a.fingerprint) for (const y of b.fingerprint) if (x === y) total++;
  return total;
}

/** README §4.6: multiset Jaccard, integer sums, one f64 division. */
function jaccard(a: Member, b: Member): number {
  const [small, large] = a.bag.size <= b.bag.size ? [a.bag, b.bag] : [b.bag, a.bag];
  let intersection = 0;
  for (const [line, count] of small) intersection += Math.min(count, large.get(line) ?? 0);
  // sum(max) = |A| + |B| - sum(min), exactly, since all terms are integers.
  return intersection / (a.lineCount + b.lineCount - intersection);
}

function find(parent: Int32Array, x: number): number {
  while (parent[x] !== x) {
    const p = parent[x] as number;
    parent[x] = parent[p] as number;
    x = p;
  }
  return x;
}

/** README §4: near duplicates among eligible messages not annotated by the exact pass. */
export function refAnalyzeFuzzyDuplicates(
  messages: readonly RefMessage[],
  recencyStart: number,
  preserveRoles: ReadonlySet<unknown>,
  exactAnnotations: ReadonlyMap<number, unknown>,
  threshold = 0.85,
): Map<number, RefAnnotation> {
  const members: Member[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as RefMessage;
    if (exactAnnotations.has(i) || !isEligible(m, preserveRoles)) continue;
    const content = m.content as string;
    const lines = normalizedLines(content);
    if (lines.length < 2) continue;
    const fingerprint = lines.slice(0, FINGERPRINT_LINES);
    members.push({
      index: i,
      rawLength: content.length,
      lineCount: lines.length,
      bag: counts(lines),
      fingerprint,
      fingerprintLines: [...new Set(fingerprint)],
    });
  }

  // Bucket by each distinct fingerprint line; pairs meeting in a bucket are the candidates.
  const parent = Int32Array.from(members, (_, k) => k);
  const buckets = new Map<string, number[]>();
  const lastSeenBy = new Int32Array(members.length).fill(-1);
  for (let k = 0; k < members.length; k++) {
    const a = members[k] as Member;
    for (const line of a.fingerprintLines) {
      const bucket = buckets.get(line);
      if (bucket === undefined) {
        buckets.set(line, [k]);
        continue;
      }
      for (const j of bucket) {
        if (lastSeenBy[j] === k) continue; // already met through another shared line
        lastSeenBy[j] = k;
        const b = members[j] as Member;
        if (fingerprintOverlap(a, b) < MIN_OVERLAP) continue;
        const ratio = Math.min(a.rawLength, b.rawLength) / Math.max(a.rawLength, b.rawLength);
        if (ratio < MIN_LENGTH_RATIO) continue;
        if (jaccard(a, b) >= threshold) {
          const ra = find(parent, k);
          const rb = find(parent, j);
          if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
        }
      }
      bucket.push(k);
    }
  }

  // Components of 2+, in order of their smallest member; members ascending (README §6).
  const components = new Map<number, number[]>();
  for (let k = 0; k < members.length; k++) {
    const root = find(parent, k);
    const list = components.get(root);
    if (list === undefined) components.set(root, [k]);
    else list.push(k);
  }
  const out = new Map<number, RefAnnotation>();
  const ordered = [...components.values()].filter((c) => c.length >= 2).sort((x, y) => (x[0] as number) - (y[0] as number));
  for (const component of ordered) {
    const indices = component.map((k) => (members[k] as Member).index);
    const keep = keepTarget(indices, recencyStart);
    const keepMember = members[component[indices.indexOf(keep)] as number] as Member;
    for (const k of component) {
      const m = members[k] as Member;
      if (m.index === keep) continue;
      out.set(m.index, { duplicateOfIndex: keep, contentLength: m.rawLength, similarity: jaccard(m, keepMember) });
    }
  }
  return out;
}
