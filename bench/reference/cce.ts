/**
 * A pure-JS reference of context-compression-engine's message dedup rules, written from
 * /work/shared/golden/cce/README.md only (no CCE code was read or copied).
 *
 * It is what a careful JavaScript implementation of those rules looks like, so that ctxdedup's
 * ratios against it are honest (a sloppy baseline would flatter them):
 * - exact pass: messages bucketed by the 32-bit djb2 hash of `${length}:${content}`, as CCE
 *   describes its own exact pass, hashed without building that string, then compared in full
 *   inside a bucket ({@link refAnalyzeDuplicatesDjb2}); {@link refAnalyzeDuplicates} is the
 *   faster plain `Map` from content to members (V8 hashes strings natively);
 * - fuzzy pass: one walk over each message's lines builds its multiset of normalized lines and
 *   its fingerprint counts (no intermediate arrays); messages are bucketed by each distinct
 *   fingerprint line; a pair met in a bucket is skipped when union-find already joined it, else
 *   checked with a `Map`-based fingerprint overlap, the raw length ratio, then the multiset
 *   Jaccard (iterating the smaller bag); union-find over the matches.
 * @module
 */
import { djb2Bucket } from '../../src/compat/djb2.js';

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
export function refAnalyzeDuplicates(messages: readonly RefMessage[], recencyStart: number, preserveRoles: ReadonlySet<unknown>): Map<number, RefAnnotation> {
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
 * The exact pass bucketed the way the README says CCE does it: by djb2 hash, then by full string
 * comparison inside a bucket. Same annotations as {@link refAnalyzeDuplicates}, and also CCE's
 * Map insertion order (§6). Slower than a plain `Map`, because the hash is computed in JS on
 * every call, but what CCE itself does.
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
    const h = djb2Bucket(content);
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

/** A fuzzy participant: its normalized lines as a multiset, and its fingerprint's. */
interface Member {
  index: number;
  rawLength: number;
  lineCount: number;
  /** Normalized line -> occurrences. */
  bag: Map<string, number>;
  /** The first five normalized lines as a multiset: line -> occurrences (keys: its bucket keys). */
  fingerprint: Map<string, number>;
}

/**
 * README §4.2-4.3 in one walk: split on \n only, trim() then toLowerCase(), empty lines dropped;
 * `undefined` with fewer than 2 lines.
 */
function member(index: number, content: string): Member | undefined {
  const bag = new Map<string, number>();
  const fingerprint = new Map<string, number>();
  let lineCount = 0;
  for (const piece of content.split('\n')) {
    const line = piece.trim().toLowerCase();
    if (line === '') continue;
    bag.set(line, (bag.get(line) ?? 0) + 1);
    if (lineCount < FINGERPRINT_LINES) fingerprint.set(line, (fingerprint.get(line) ?? 0) + 1);
    lineCount++;
  }
  return lineCount < 2 ? undefined : { index, rawLength: content.length, lineCount, bag, fingerprint };
}

/** README §4.4: sum over distinct lines L of countA(L) * countB(L) within the two fingerprints. */
function fingerprintOverlap(a: Member, b: Member): number {
  let total = 0;
  for (const [line, count] of a.fingerprint) {
    const other = b.fingerprint.get(line);
    if (other !== undefined) total += count * other;
  }
  return total;
}

/** README §4.6: multiset Jaccard, integer sums, one f64 division. */
function jaccard(a: Member, b: Member): number {
  const small = a.bag.size <= b.bag.size ? a.bag : b.bag;
  const large = small === a.bag ? b.bag : a.bag;
  let intersection = 0;
  for (const [line, count] of small) {
    const other = large.get(line);
    if (other !== undefined) intersection += Math.min(count, other);
  }
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
    const found = member(i, m.content as string);
    if (found !== undefined) members.push(found);
  }

  // Bucket by each distinct fingerprint line; pairs meeting in a bucket are the candidates.
  // A pair already in one component cannot change the components: it is not compared.
  const parent = new Int32Array(members.length);
  for (let k = 0; k < members.length; k++) parent[k] = k;
  const buckets = new Map<string, number[]>();
  const lastSeenBy = new Int32Array(members.length).fill(-1);
  for (let k = 0; k < members.length; k++) {
    const a = members[k] as Member;
    for (const line of a.fingerprint.keys()) {
      const bucket = buckets.get(line);
      if (bucket === undefined) {
        buckets.set(line, [k]);
        continue;
      }
      for (const j of bucket) {
        if (lastSeenBy[j] === k) continue; // already met through another shared line
        lastSeenBy[j] = k;
        const ra = find(parent, k);
        const rb = find(parent, j);
        if (ra === rb) continue;
        const b = members[j] as Member;
        if (fingerprintOverlap(a, b) < MIN_OVERLAP) continue;
        const ratio = a.rawLength < b.rawLength ? a.rawLength / b.rawLength : b.rawLength / a.rawLength;
        if (ratio < MIN_LENGTH_RATIO) continue;
        if (jaccard(a, b) >= threshold) parent[Math.max(ra, rb)] = Math.min(ra, rb);
      }
      bucket.push(k);
    }
  }

  // Components of 2+, in order of their smallest member; members ascending (README §6). Roots
  // are always a component's smallest member, so walking k upwards meets components in order.
  const components = new Map<number, number[]>();
  for (let k = 0; k < members.length; k++) {
    const root = find(parent, k);
    const list = components.get(root);
    if (list === undefined) components.set(root, [k]);
    else list.push(k);
  }
  const out = new Map<number, RefAnnotation>();
  for (const component of components.values()) {
    if (component.length < 2) continue;
    const keep = keepMember(component, members, recencyStart);
    for (const k of component) {
      const m = members[k] as Member;
      if (m === keep) continue;
      out.set(m.index, { duplicateOfIndex: keep.index, contentLength: m.rawLength, similarity: jaccard(m, keep) });
    }
  }
  return out;
}

/** README §2 over a component's members (ascending positions in `members`). */
function keepMember(component: readonly number[], members: readonly Member[], recencyStart: number): Member {
  if (recencyStart > 0) {
    for (const k of component) {
      const m = members[k] as Member;
      if (m.index >= recencyStart) return m;
    }
  }
  return members[component[component.length - 1] as number] as Member;
}
