/**
 * `ctxdedup/cce`: a drop-in replacement for the duplicate detection of
 * context-compression-engine (CCE), with identical results from the native core.
 *
 * The functions keep CCE's signatures and tolerance (non-string content counts as empty, ids
 * may be numbers) and are synchronous like CCE's. Rules: `shared/golden/cce/README.md`.
 * @module
 */
import { rangeError, typeError } from '../validation.js';
import {
  analysisInput,
  analyzePacked,
  decide,
  FUZZY_EXCLUDED,
  recencyStartOf,
  referenceTag,
  rewrite,
  SUMMARY_PREFIX_UNITS,
  SUMMARY_PREFIXES,
  unpack,
  type Annotation,
} from '../stages/message-analysis.js';
import { djb2Bucket } from './djb2.js';

/** A CCE message: only `id`, `role`, `content`, `tool_calls` and `metadata` are read. */
export interface CceMessage {
  id?: unknown;
  index?: number;
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
  metadata?: Record<string, unknown>;
  [field: string]: unknown;
}

/**
 * The fields of a message `dedupe` reads: what it requires of a message type. Any object type
 * fits (every field is optional), your own interfaces included.
 */
export interface CceMessageFields {
  id?: unknown;
  index?: number;
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
  metadata?: object;
}

/** CCE's annotation: exact ones have no `similarity` key at all. */
export interface DedupAnnotation {
  duplicateOfIndex: number;
  contentLength: number;
  similarity?: number;
}

/** Provenance CCE's `uncompress()` reads to restore a replaced message. */
export interface CceOriginal {
  ids: unknown[];
  summary_id: string;
  parent_ids?: string[];
  version: number;
}

/** One trace entry of a replacement. */
export interface CceDecision {
  messageId: unknown;
  messageIndex: number;
  action: 'deduped' | 'fuzzy_deduped';
  reason: 'exact_duplicate' | 'fuzzy_duplicate';
  inputChars: number;
  outputChars: number;
}

/** CCE's option names for the dedup part of `compress()`. */
export interface CceDedupeOptions {
  /** Exact dedup. Default `true`. */
  dedup?: boolean;
  /** Fuzzy dedup. Default `false`. */
  fuzzyDedup?: boolean;
  /** Default `0.85`. */
  fuzzyThreshold?: number;
  /** The last N messages are never replaced. Default `4`. */
  recencyWindow?: number;
  /** Roles never deduplicated. Default `['system']`. */
  preserve?: string[];
  /** Written to `_cce_original.version`. Default `0`. */
  sourceVersion?: number;
  /** Return `decisions`. Default `false`. */
  trace?: boolean;
}

/** Result of {@link dedupe}. */
export interface CceDedupeResult<M extends CceMessageFields = CceMessage> {
  messages: M[];
  /** Originals of the replaced messages, by id (as CCE's `uncompress()` expects). */
  verbatim: Record<string, M>;
  decisions?: CceDecision[];
  stats: {
    messages_deduped: number;
    messages_fuzzy_deduped: number;
    original_chars: number;
    compressed_chars: number;
  };
}

const CCE_MIN_CHARS = 200;
/** CCE's reference tags. */
const CCE_TAG = referenceTag({
  exact: '[cce:dup of {keepId} — {chars} chars]',
  near: '[cce:near-dup of {keepId} — {chars} chars, ~{percent}% match]',
});

function toRoleSet(preserveRoles: unknown): ReadonlySet<unknown> {
  if (preserveRoles instanceof Set) return preserveRoles;
  if (Array.isArray(preserveRoles)) return new Set(preserveRoles);
  return new Set();
}

/** CCE compares `index >= recencyStart` only when `recencyStart > 0`; clamp to [0, n]. */
function clampRecencyStart(recencyStart: unknown, n: number): number {
  if (typeof recencyStart === 'symbol') typeError('recencyStart', 'must be comparable with a number, got a symbol');
  const value = Number(recencyStart);
  if (!(value > 0)) return 0;
  return Math.min(n, Math.ceil(value));
}

/**
 * A threshold as CCE uses it, in `similarity >= threshold`: JavaScript's relational comparison
 * converts it to a number (`'0.9'` is 0.9, `null` is 0, `'abc'` is NaN and matches nothing, a
 * BigInt compares by value). A symbol cannot be compared: TypeError naming the option.
 */
function toThreshold(value: unknown, path: string): number {
  if (typeof value === 'symbol') typeError(path, 'must be comparable with a number, got a symbol');
  return Number(value);
}

/**
 * The messages as an array. CCE walks `messages` by index up to `messages.length`, so a value
 * without a usable length (a number, a BigInt, an object without `length`) holds no messages;
 * `null` and `undefined` have no properties at all (TypeError, as in CCE).
 */
/** Longest array-like {@link dedupe} copies (an array of any length is read as it is). */
const MAX_ARRAY_LIKE = 2 ** 24;

function asList<M>(messages: unknown): readonly M[] {
  if (Array.isArray(messages)) return messages as M[];
  if (messages === null || messages === undefined) typeError('messages', `must be an array, got ${messages === null ? 'null' : 'undefined'}`);
  const length = Number((messages as { length?: unknown }).length);
  if (!(length > 0)) return [];
  // Its entries are copied into an array: a length no conversation has would exhaust the heap.
  if (length > MAX_ARRAY_LIKE) rangeError('messages.length', `must be at most ${MAX_ARRAY_LIKE} for an array-like (pass an array), got ${length}`);
  return Array.from({ length: Math.ceil(length) }, (_, i) => (messages as Record<number, M>)[i] as M);
}

/**
 * One native analysis of a CCE call, packed (see `unpack`): exact annotations first (3 numbers
 * each), then fuzzy ones (4 each).
 */
function runPacked(
  given: readonly CceMessage[],
  recencyStart: unknown,
  preserveRoles: unknown,
  passes: { exact: boolean; fuzzyThreshold?: number; excluded?: ReadonlyMap<number, unknown> },
): { packed: Float64Array; lengths: Uint32Array; contents: string[]; flags: Uint8Array } {
  const messages = asList<CceMessage>(given);
  const input = analysisInput(messages, toRoleSet(preserveRoles), CCE_MIN_CHARS);
  // `blocked` is this call's own array: the fuzzy exclusions go into its second bit.
  const flags = input.blocked;
  if (passes.excluded !== undefined) {
    for (const key of passes.excluded.keys()) {
      if (Number.isInteger(key) && key >= 0 && key < messages.length) flags[key] = (flags[key] as number) | FUZZY_EXCLUDED;
    }
  }
  const packed = analyzePacked(input.contents, input.lengths, flags, {
    minChars: CCE_MIN_CHARS,
    skipPrefixes: SUMMARY_PREFIX_UNITS,
    keep: 'latest',
    recencyStart: clampRecencyStart(recencyStart, messages.length),
    exact: passes.exact,
    fuzzyThreshold: passes.fuzzyThreshold,
    // Bug-compatible by contract: CCE's `a -dup-> c -near-dup-> d` chains stay.
    visibleTargets: false,
  });
  return { packed, lengths: input.lengths, contents: input.contents, flags };
}

function run(
  given: readonly CceMessage[],
  recencyStart: unknown,
  preserveRoles: unknown,
  passes: { exact: boolean; fuzzyThreshold?: number; excluded?: ReadonlyMap<number, unknown> },
): { exact: Annotation[]; fuzzy: Annotation[]; lengths: Uint32Array } {
  const { packed, lengths } = runPacked(given, recencyStart, preserveRoles, passes);
  return { ...unpack(packed), lengths };
}

/**
 * CCE's exact pass: eligible messages with identical content; every member but the keep target
 * is annotated with `{ duplicateOfIndex, contentLength }`.
 */
export function analyzeDuplicates(messages: readonly CceMessage[], recencyStart: number, preserveRoles: ReadonlySet<string>): Map<number, DedupAnnotation> {
  const { packed, contents, flags } = runPacked(messages, recencyStart, preserveRoles, { exact: true });
  const end = 2 + 3 * (packed[0] as number);
  // Groups by keep target, in the core's order (by first member).
  const groups = new Map<number, number[]>();
  const lengthOf = new Map<number, number>();
  for (let at = 2; at < end; at += 3) {
    const keep = packed[at + 1] as number;
    let members = groups.get(keep);
    if (members === undefined) {
      members = [];
      groups.set(keep, members);
      lengthOf.set(keep, packed[at + 2] as number);
    }
    members.push(packed[at] as number);
  }
  const map = new Map<number, DedupAnnotation>();
  for (const keep of groups.size > 1 ? bucketOrder(groups, contents, flags) : groups.keys()) {
    const contentLength = lengthOf.get(keep) as number;
    for (const index of (groups.get(keep) as number[]).sort((a, b) => a - b)) map.set(index, { duplicateOfIndex: keep, contentLength });
  }
  return map;
}

/**
 * The exact groups (keep target -> members) in CCE's Map order (golden README §6): by first
 * appearance of their djb2 bucket among the eligible messages, then by first appearance within
 * the bucket. Without hash collisions this is the order by first member.
 */
function bucketOrder(groups: ReadonlyMap<number, readonly number[]>, contents: readonly string[], flags: Uint8Array): number[] {
  const first = new Map<number, number>();
  let last = 0;
  for (const [keep, members] of groups) {
    let at = keep;
    for (const m of members) if (m < at) at = m;
    first.set(keep, at);
    last = Math.max(last, at);
  }
  // Where each bucket first appears: every eligible message up to the last group's first member.
  const bucketFirst = new Map<number, number>();
  for (let i = 0; i <= last; i++) {
    if (((flags[i] as number) & 1) !== 0) continue;
    const content = contents[i] as string;
    if (SUMMARY_PREFIXES.some((p) => content.startsWith(p))) continue;
    const h = djb2Bucket(content);
    if (!bucketFirst.has(h)) bucketFirst.set(h, i);
  }
  const keyed = [...groups.keys()].map((keep) => {
    const at = first.get(keep) as number;
    return { keep, at, bucket: bucketFirst.get(djb2Bucket(contents[keep] as string)) ?? at };
  });
  keyed.sort((a, b) => a.bucket - b.bucket || a.at - b.at);
  return keyed.map((g) => g.keep);
}

/**
 * CCE's fuzzy pass over eligible messages that are not keys of `exactAnnotations`; annotations
 * carry the similarity to the keep target.
 */
export function analyzeFuzzyDuplicates(
  messages: readonly CceMessage[],
  recencyStart: number,
  preserveRoles: ReadonlySet<string>,
  exactAnnotations: ReadonlyMap<number, DedupAnnotation>,
  threshold = 0.85,
): Map<number, DedupAnnotation> {
  const excluded = exactAnnotations instanceof Map ? exactAnnotations : undefined;
  const { packed } = runPacked(messages, recencyStart, preserveRoles, {
    exact: false,
    fuzzyThreshold: toThreshold(threshold, 'threshold'),
    ...(excluded ? { excluded } : {}),
  });
  const map = new Map<number, DedupAnnotation>();
  const start = 2 + 3 * (packed[0] as number);
  const end = start + 4 * (packed[1] as number);
  for (let at = start; at < end; at += 4) {
    map.set(packed[at] as number, {
      duplicateOfIndex: packed[at + 1] as number,
      contentLength: packed[at + 2] as number,
      similarity: packed[at + 3] as number,
    });
  }
  return map;
}

/** CCE's summary id: djb2 over the id's UTF-16 units, base 36 (non-string ids hash nothing). */
function summaryId(id: unknown): string {
  let h = 5381;
  if (typeof id === 'string') {
    for (let i = 0; i < id.length; i++) h = (Math.imul(h, 33) + id.charCodeAt(i)) >>> 0;
  }
  return `cce_sum_${h.toString(36)}`;
}

function provenance(original: CceMessageFields, version: number): CceOriginal {
  const previous = ((original.metadata as Record<string, unknown> | undefined)?.['_cce_original'] as { summary_id?: unknown } | undefined)?.summary_id;
  // Key order matters to deep-equal checks and JSON output: ids, summary_id, parent_ids, version.
  const hasParent = typeof previous === 'string' && previous.length > 0;
  return {
    ids: [original.id],
    summary_id: summaryId(original.id),
    ...(hasParent ? { parent_ids: [previous] } : {}),
    version,
  };
}

/**
 * The dedup part of CCE's `compress()`: duplicates outside the recency window are replaced by
 * CCE's tags with `metadata._cce_original` provenance, so CCE's `uncompress()` restores them.
 * Every other message is returned untouched (no summarization happens here).
 */
export function dedupe<M extends CceMessageFields>(given: readonly M[], options: CceDedupeOptions = {}): CceDedupeResult<M> {
  const messages = asList<M>(given);
  // Read through CCE's message type: its fields are what `M` is required to have.
  const read = messages as unknown as readonly CceMessage[];
  const { dedup = true, fuzzyDedup = false, fuzzyThreshold = 0.85, recencyWindow = 4, preserve = ['system'], sourceVersion = 0, trace = false } = options;
  const n = messages.length;
  const recencyStart = recencyStartOf(n, recencyWindow);
  // CCE reads the switches for their truthiness and the threshold in a comparison: coerce the
  // same way, so the native call only ever sees a boolean and a number.
  const passes = fuzzyDedup ? { exact: Boolean(dedup), fuzzyThreshold: toThreshold(fuzzyThreshold, 'options.fuzzyThreshold') } : { exact: Boolean(dedup) };
  const found = dedup || fuzzyDedup ? run(read, recencyStart, preserve, passes) : { exact: [], fuzzy: [], lengths: new Uint32Array(n) };

  // CCE ids may be anything: tags and verbatim keys use their string form.
  const plan = decide(found, (i) => String((read[i] as CceMessage).id), found.lengths, { recencyWindow, recencyStart }, CCE_TAG);
  const { messages: out, verbatim } = rewrite(
    messages,
    plan,
    (original, r) => ({ ...original, content: r.tag, metadata: { ...(original.metadata ?? {}), _cce_original: provenance(original, sourceVersion) } }),
    (original) => String(original.id),
  );
  const stats = { messages_deduped: plan.exact, messages_fuzzy_deduped: plan.near, original_chars: 0, compressed_chars: 0 };
  const decisions: CceDecision[] = plan.replacements.map((r) => ({
    messageId: (messages[r.index] as M).id,
    messageIndex: r.index,
    action: r.kind === 'near' ? 'fuzzy_deduped' : 'deduped',
    reason: r.kind === 'near' ? 'fuzzy_duplicate' : 'exact_duplicate',
    inputChars: r.contentLength,
    outputChars: r.tag.length,
  }));
  for (let i = 0; i < n; i++) {
    const before = (messages[i] as CceMessage | null | undefined)?.content;
    const after = (out[i] as CceMessage | null | undefined)?.content;
    stats.original_chars += typeof before === 'string' ? before.length : 0;
    stats.compressed_chars += typeof after === 'string' ? after.length : 0;
  }
  const result: CceDedupeResult<M> = { messages: out, verbatim, stats };
  if (trace) result.decisions = decisions;
  return result;
}
