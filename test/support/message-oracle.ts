/**
 * A small, deliberately naive pure-JS oracle of the message analysis, written from the rules in
 * shared/golden/cce/README.md (eligibility, keep target, exact pass, fuzzy pass), with the
 * ctxdedup extensions (minChars, skipPrefixes, keep 'earliest', exact on/off). Quadratic: for
 * tests only.
 */

export interface OracleMessage {
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
}

export interface OracleOptions {
  minChars: number;
  skipPrefixes: readonly string[];
  preserve: ReadonlySet<unknown>;
  keep: 'latest' | 'earliest';
  recencyStart: number;
  exact: boolean;
  /** undefined: no fuzzy pass. */
  threshold?: number | undefined;
  /** Messages kept out of the fuzzy pass (in addition to the exact-annotated ones). */
  fuzzyExcluded?: ReadonlySet<number>;
}

export interface OracleAnnotation {
  index: number;
  duplicateOfIndex: number;
  contentLength: number;
  similarity?: number;
}

export const CCE_SKIP_PREFIXES: readonly string[] = ['[summary:', '[summary#', '[truncated'];

/** `content.split('\n')`, each piece `trim()`ed and `toLowerCase()`d, empty pieces dropped. */
export function normalizedLines(content: string): string[] {
  return content
    .split('\n')
    .map((line) => line.trim().toLowerCase())
    .filter((line) => line.length > 0);
}

function counts(lines: readonly string[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of lines) map.set(line, (map.get(line) ?? 0) + 1);
  return map;
}

/** Multiset Jaccard of two line lists: sum(min) / sum(max), as one f64 division. */
export function jaccard(a: readonly string[], b: readonly string[]): number {
  const ca = counts(a);
  const cb = counts(b);
  let inter = 0;
  let union = 0;
  for (const [line, x] of ca) {
    const y = cb.get(line) ?? 0;
    inter += Math.min(x, y);
    union += Math.max(x, y);
  }
  for (const [line, y] of cb) if (!ca.has(line)) union += y;
  return union === 0 ? 0 : inter / union;
}

/** Fingerprint overlap of the first five lines, counted with multiplicity. */
export function fingerprintOverlap(a: readonly string[], b: readonly string[]): number {
  const ca = counts(a.slice(0, 5));
  const cb = counts(b.slice(0, 5));
  let total = 0;
  for (const [line, x] of ca) total += x * (cb.get(line) ?? 0);
  return total;
}

export function contentOf(message: OracleMessage | null | undefined): string {
  const content = message?.content;
  return typeof content === 'string' ? content : '';
}

export function isEligible(message: OracleMessage | null | undefined, o: OracleOptions): boolean {
  if (message === null || message === undefined || typeof message.content !== 'string') return false;
  if (message.role && o.preserve.has(message.role)) return false;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return false;
  const content = message.content;
  if (o.skipPrefixes.some((p) => content.startsWith(p))) return false;
  return content.length >= o.minChars;
}

export function keepTarget(members: readonly number[], o: Pick<OracleOptions, 'keep' | 'recencyStart'>): number {
  if (o.keep === 'earliest') return members[0] as number;
  if (o.recencyStart > 0) {
    const inWindow = members.find((m) => m >= o.recencyStart);
    if (inWindow !== undefined) return inWindow;
  }
  return members[members.length - 1] as number;
}

export function analyze(messages: readonly (OracleMessage | null | undefined)[], o: OracleOptions): { exact: OracleAnnotation[]; fuzzy: OracleAnnotation[] } {
  const eligible = messages.map((_, i) => i).filter((i) => isEligible(messages[i], o));
  const exact: OracleAnnotation[] = [];
  if (o.exact) {
    const groups = new Map<string, number[]>();
    for (const i of eligible) {
      const c = contentOf(messages[i]);
      const g = groups.get(c);
      if (g) g.push(i);
      else groups.set(c, [i]);
    }
    for (const members of groups.values()) {
      if (members.length < 2) continue;
      const keep = keepTarget(members, o);
      for (const m of members) {
        if (m !== keep) exact.push({ index: m, duplicateOfIndex: keep, contentLength: contentOf(messages[keep]).length });
      }
    }
  }
  const fuzzy: OracleAnnotation[] = [];
  if (o.threshold !== undefined) {
    const threshold = o.threshold;
    const annotated = new Set(exact.map((a) => a.index));
    const members = eligible
      .filter((i) => !annotated.has(i) && !(o.fuzzyExcluded?.has(i) ?? false))
      .map((i) => ({ index: i, len: contentOf(messages[i]).length, lines: normalizedLines(contentOf(messages[i])) }))
      .filter((m) => m.lines.length >= 2);
    const parent = members.map((_, k) => k);
    const find = (k: number): number => {
      while (parent[k] !== k) k = parent[k] as number;
      return k;
    };
    for (let a = 0; a < members.length; a++) {
      for (let b = a + 1; b < members.length; b++) {
        const x = members[a] as (typeof members)[number];
        const y = members[b] as (typeof members)[number];
        if (fingerprintOverlap(x.lines, y.lines) < 3) continue;
        if (Math.min(x.len, y.len) / Math.max(x.len, y.len) < 0.7) continue;
        if (jaccard(x.lines, y.lines) >= threshold) parent[find(b)] = find(a);
      }
    }
    const groups = new Map<number, number[]>();
    members.forEach((_, k) => {
      const root = find(k);
      const g = groups.get(root);
      if (g) g.push(k);
      else groups.set(root, [k]);
    });
    for (const group of groups.values()) {
      if (group.length < 2) continue;
      const indices = group.map((k) => (members[k] as (typeof members)[number]).index);
      const keep = keepTarget(indices, o);
      const keepLines = normalizedLines(contentOf(messages[keep]));
      for (const k of group) {
        const m = members[k] as (typeof members)[number];
        if (m.index === keep) continue;
        fuzzy.push({ index: m.index, duplicateOfIndex: keep, contentLength: m.len, similarity: jaccard(m.lines, keepLines) });
      }
    }
  }
  exact.sort((a, b) => a.index - b.index);
  fuzzy.sort((a, b) => a.index - b.index);
  return { exact, fuzzy };
}
