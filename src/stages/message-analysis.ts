/**
 * The one decision path of the message stage, shared by `dedupeMessages`, `ctxdedup/cce` and the
 * CLI: which messages can be deduplicated (the eligibility rule, {@link analysisInput}), the
 * native analysis (grouping and the keep rule live in core), the recency window
 * ({@link inRecencyWindow}), the reference tag ({@link referenceTag}, filled by `compileTemplate` in template.ts), and
 * the decisions and totals that follow ({@link decide}, {@link rewrite}). Callers only validate
 * their options and shape the result.
 * @internal
 * @module
 */
import { compileTemplate } from './template.js';
import { native, type NativeAnalysis, type NativeAnalyzeOptions } from '../native.js';
import { drain, STEP_ITEMS, type Steps } from '../pacing.js';

/** One message found to duplicate another (exact or near). @internal */
export interface Annotation {
  index: number;
  duplicateOfIndex: number;
  /** Exact: the keep target's length; fuzzy: the message's own length (UTF-16 units). */
  contentLength: number;
  /** Fuzzy only: multiset line Jaccard against the keep target. */
  similarity?: number;
}

/** Contents and shape-based exclusions of a message batch, ready for one native call. @internal */
export interface AnalysisInput {
  contents: string[];
  /** `contents[i].length`: measured here, where it is almost free, so the native side reads only
   * the strings it needs. */
  lengths: Uint32Array;
  /** Sum of `lengths`. */
  units: number;
  blocked: Uint8Array;
}

/** The parts of a message the analysis looks at. @internal */
interface MessageShape {
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
}

/** Whether a message is preserved by its role (truthy and listed, case-sensitive). @internal */
export function isPreservedRole(message: MessageShape, preserve: ReadonlySet<unknown>): boolean {
  return Boolean(message.role) && preserve.has(message.role);
}

/** Whether a message carries tool calls (a non-empty array). @internal */
export function hasToolCalls(message: MessageShape): boolean {
  return Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
}

/**
 * Collects contents (non-string content counts as `''`), their lengths, and the messages that
 * can never be deduplicated: shorter than `minChars`, preserved role, tool calls, or non-string
 * content. The shape of a message is only looked at when its content is long enough: in a large
 * batch every object read is a cache miss, and most tool-calling messages are short. @internal
 */
export function analysisInput(messages: readonly MessageShape[], preserve: ReadonlySet<unknown>, minChars: number): AnalysisInput {
  const n = messages.length;
  const contents = new Array<string>(n);
  const lengths = new Uint32Array(n);
  const blocked = new Uint8Array(n);
  let units = 0;
  for (let i = 0; i < n; i++) {
    const message = (messages[i] ?? {}) as MessageShape;
    const content = message.content;
    if (typeof content === 'string') {
      const length = content.length;
      contents[i] = content;
      lengths[i] = length;
      units += length;
      if (length < minChars || isPreservedRole(message, preserve) || hasToolCalls(message)) blocked[i] = 1;
    } else {
      contents[i] = '';
      blocked[i] = 1;
    }
  }
  return { contents, lengths, units, blocked };
}

/** Splits the native columns into annotation lists, exact first. @internal */
export function annotations(result: NativeAnalysis): { exact: Annotation[]; fuzzy: Annotation[] } {
  const exact: Annotation[] = [];
  for (let k = 0; k < result.exactIndex.length; k++) {
    exact.push({
      index: result.exactIndex[k] as number,
      duplicateOfIndex: result.exactOf[k] as number,
      contentLength: result.exactLength[k] as number,
    });
  }
  const fuzzy: Annotation[] = [];
  for (let k = 0; k < result.fuzzyIndex.length; k++) {
    fuzzy.push({
      index: result.fuzzyIndex[k] as number,
      duplicateOfIndex: result.fuzzyOf[k] as number,
      contentLength: result.fuzzyLength[k] as number,
      similarity: result.fuzzySimilarity[k] as number,
    });
  }
  return { exact, fuzzy };
}

/** `flags` bit of a message kept out of the fuzzy pass (bit 0, 1, is "blocked"). @internal */
export const FUZZY_EXCLUDED = 2;

/**
 * The packed options of the last call, and the prefixes they were built from: callers pass the
 * same prefix arrays call after call (ctxdedup/cce a constant, `dedupeMessages` the default's
 * cached conversion), so only the fixed-size head is rewritten. The native call reads the array
 * synchronously and keeps nothing of it, so reusing it between calls is safe.
 */
let lastParams: { prefixes: readonly Uint16Array[]; params: Float64Array } | undefined;

/** The options of one analysis as the packed native call reads them (see `analyzeMessagesPacked`). */
function packedParams(options: NativeAnalyzeOptions): Float64Array {
  const prefixes = options.skipPrefixes;
  let params: Float64Array;
  if (lastParams !== undefined && lastParams.prefixes === prefixes) {
    params = lastParams.params;
  } else {
    let size = 8;
    for (const p of prefixes) size += 1 + p.length;
    params = new Float64Array(size);
    params[7] = prefixes.length;
    let at = 8;
    for (const p of prefixes) {
      params[at++] = p.length;
      params.set(p, at);
      at += p.length;
    }
    lastParams = { prefixes, params };
  }
  params[0] = options.minChars;
  params[1] = options.keep === 'earliest' ? 1 : 0;
  params[2] = options.recencyStart;
  params[3] = options.exact ? 1 : 0;
  params[4] = options.fuzzyThreshold === undefined ? 0 : 1;
  params[5] = options.fuzzyThreshold ?? 0;
  params[6] = options.visibleTargets === false ? 0 : 1;
  return params;
}

/**
 * The core's fuzzy length rule, from the core itself (`ctxdedup_core::fuzzy::LENGTH_RATIO`): two
 * messages whose raw lengths have `min / max` below this are never near duplicates. The
 * packed-call oracle test (test/unit/small-calls.test.ts) checks lengths on both sides of it.
 */
const FUZZY_LENGTH_RATIO = native.FUZZY_LENGTH_RATIO;

/** Batches up to this many messages are checked by {@link mayMatch} before crossing. */
const PRECHECK_MAX = 256;

/** Fuzzy candidate lengths of {@link mayMatch}, reused between calls. */
const fuzzyLengths = new Uint32Array(PRECHECK_MAX);

/**
 * The exact candidate lengths of the current {@link mayMatch} call: an open-addressing set
 * (linear probing, at most a quarter full) whose slots belong to the call whose `stamp` they
 * carry, so it is never cleared between calls.
 */
const SEEN_BITS = 10;
const seenLength = new Uint32Array(1 << SEEN_BITS);
const seenStamp = new Uint32Array(1 << SEEN_BITS);
let stamp = 0;

/**
 * From this many fuzzy candidates on, two of them are within the length ratio whatever their
 * lengths: sorted, with every neighbour below the ratio, each length after the second is over
 * 1 / 0.7 times the one before, and lengths below 2^32 allow at most 64 of them (2 + ln 2^32 /
 * ln(1 / 0.7) = 64.2); 72 leaves room for rounding.
 */
const RATIO_PIGEONHOLE = 72;

/** Sorts the first `k` entries of `a` ascending (insertion sort for the few of a conversation). */
function sortHead(a: Uint32Array, k: number): void {
  if (k > 24) {
    a.subarray(0, k).sort();
    return;
  }
  for (let i = 1; i < k; i++) {
    const v = a[i] as number;
    let j = i - 1;
    while (j >= 0 && (a[j] as number) > v) {
      a[j + 1] = a[j] as number;
      j--;
    }
    a[j + 1] = v;
  }
}

/**
 * Whether the analysis of a small batch could annotate anything, from lengths alone: the exact
 * pass needs two candidates of one length (equal contents have equal lengths), the fuzzy pass two
 * whose lengths are within {@link FUZZY_LENGTH_RATIO} (a rule of the core's pair test). Candidates
 * are the unblocked messages of at least `minChars` units (a superset of the core's eligible
 * messages), so `false` is a proof that the native analysis returns nothing: most calls on a real
 * conversation end here, without crossing the boundary. Batches over {@link PRECHECK_MAX}
 * messages almost always have a candidate pair and go straight to the core. @internal
 */
export function mayMatch(lengths: Uint32Array, flags: Uint8Array, options: NativeAnalyzeOptions): boolean {
  const n = lengths.length;
  if (n > PRECHECK_MAX) return true;
  const exact = options.exact;
  const fuzzy = options.fuzzyThreshold !== undefined;
  if (exact && ++stamp === 2 ** 32 - 1) {
    seenStamp.fill(0);
    stamp = 1;
  }
  const mask = (1 << SEEN_BITS) - 1;
  let kf = 0;
  for (let i = 0; i < n; i++) {
    const flag = flags[i] as number;
    const length = lengths[i] as number;
    if ((flag & 1) !== 0 || length < options.minChars) continue;
    if (exact) {
      let at = Math.imul(length, 0x9e3779b1) >>> (32 - SEEN_BITS);
      while (seenStamp[at] === stamp) {
        if (seenLength[at] === length) return true;
        at = (at + 1) & mask;
      }
      seenStamp[at] = stamp;
      seenLength[at] = length;
    }
    if (fuzzy && (flag & FUZZY_EXCLUDED) === 0) fuzzyLengths[kf++] = length;
  }
  if (kf >= RATIO_PIGEONHOLE) return true;
  if (kf >= 2) {
    sortHead(fuzzyLengths, kf);
    for (let k = 1; k < kf; k++) {
      const hi = fuzzyLengths[k] as number;
      // The core's ratio: 1 when both are empty.
      if (hi === 0 || (fuzzyLengths[k - 1] as number) / hi >= FUZZY_LENGTH_RATIO) return true;
    }
  }
  return false;
}

/**
 * The native analysis on the calling thread, in one boundary crossing that costs about the same
 * for 10 messages as for 10,000: the options go in as one `Float64Array`, the annotations come
 * back as one. `flags[i]`: 1 = blocked (see {@link AnalysisInput.blocked}), plus
 * {@link FUZZY_EXCLUDED}. A batch in which nothing can match ({@link mayMatch}) does not cross at
 * all. Returns the packed result; read it with {@link unpack}. @internal
 */
export function analyzePacked(contents: string[], lengths: Uint32Array, flags: Uint8Array, options: NativeAnalyzeOptions): Float64Array {
  if (!mayMatch(lengths, flags, options)) return new Float64Array(2);
  return native.analyzeMessagesPacked(contents, lengths, flags, packedParams(options));
}

/**
 * Batches up to this many UTF-16 units are analysed on the calling thread even by
 * {@link analyze}: copying them for a worker costs more than the analysis itself
 * (well under a millisecond at this size).
 */
export const ASYNC_MIN_UNITS = 1 << 18;

/**
 * The native analysis of a batch: inline if `inline` or up to {@link ASYNC_MIN_UNITS} code units,
 * else on a libuv worker thread (contents are copied before the promise is returned). @internal
 */
export async function analyze(input: AnalysisInput, inline: boolean, options: NativeAnalyzeOptions): Promise<{ exact: Annotation[]; fuzzy: Annotation[] }> {
  const { contents, lengths, units, blocked } = input;
  return inline || units <= ASYNC_MIN_UNITS
    ? unpack(analyzePacked(contents, lengths, blocked, options))
    : annotations(await native.analyzeMessagesAsync(contents, lengths, blocked, new Uint8Array(0), options));
}

/** Splits a packed native result into annotation lists, exact first. @internal */
export function unpack(packed: Float64Array): { exact: Annotation[]; fuzzy: Annotation[] } {
  const exactCount = packed[0] as number;
  const fuzzyCount = packed[1] as number;
  const exact = new Array<Annotation>(exactCount);
  let at = 2;
  for (let k = 0; k < exactCount; k++, at += 3) {
    exact[k] = { index: packed[at] as number, duplicateOfIndex: packed[at + 1] as number, contentLength: packed[at + 2] as number };
  }
  const fuzzy = new Array<Annotation>(fuzzyCount);
  for (let k = 0; k < fuzzyCount; k++, at += 4) {
    fuzzy[k] = {
      index: packed[at] as number,
      duplicateOfIndex: packed[at + 1] as number,
      contentLength: packed[at + 2] as number,
      similarity: packed[at + 3] as number,
    };
  }
  return { exact, fuzzy };
}

/** Code units of each string, so prefixes reach Rust losslessly (lone surrogates included). @internal */
export function utf16(strings: readonly string[]): Uint16Array[] {
  return strings.map((s) => {
    const units = new Uint16Array(s.length);
    for (let i = 0; i < s.length; i++) units[i] = s.charCodeAt(i);
    return units;
  });
}

/** The summary/truncation markers context-compression-engine never deduplicates. */
export const SUMMARY_PREFIXES: readonly string[] = ['[summary:', '[summary#', '[truncated'];

/**
 * {@link SUMMARY_PREFIXES} as UTF-16 units, converted once: one array for every call that uses
 * the default, so the packed options of the last call can be reused. Read only. @internal
 */
export const SUMMARY_PREFIX_UNITS: Uint16Array[] = utf16(SUMMARY_PREFIXES);

/** `recencyStart` as context-compression-engine derives it from a recency window. @internal */
export function recencyStartOf(count: number, recencyWindow: number): number {
  return Math.max(0, count - Math.max(recencyWindow, 0));
}

/** Whether an annotated message sits in the protected recency window. @internal */
export function inRecencyWindow(index: number, recencyWindow: number, recencyStart: number): boolean {
  return recencyWindow > 0 && index >= recencyStart;
}

/** How a whole message matched the one kept in full: the same content, or a near duplicate of it. */
export type MatchKind = 'exact' | 'near';

/** What a reference tag may say about the copy it stands for. */
export interface ReferenceInfo {
  kind: MatchKind;
  /** Id of the replaced message. */
  id: string;
  /** Id of the message kept in full. */
  keepId: string;
  /** Length of the replaced content (UTF-16 code units). */
  chars: number;
  /** Near only: multiset line Jaccard against the kept message, in [0, 1]. */
  similarity?: number;
}

/** The fields of a whole-message tag template. @internal */
/** The fields of a whole-message reference template. */
export const TAG_FIELDS = ['id', 'keepId', 'chars', 'percent'] as const;

/**
 * The tag function of a pair of templates: `{id}`, `{keepId}`, `{chars}` and `{percent}` (the
 * similarity in whole percent, 100 for exact) are filled in. @internal
 */
export function referenceTag(templates: Readonly<Record<MatchKind, string>>): (info: ReferenceInfo) => string {
  // Compiling costs a RegExp and a split per template: a measurable share of a 10-message call,
  // and callers pass the same few templates call after call.
  const key = `${templates.exact.length}:${templates.exact}${templates.near}`;
  let tag = compiledTags.get(key);
  if (tag === undefined) {
    if (compiledTags.size >= COMPILED_TAGS_CAP) compiledTags.clear();
    tag = compileTag(templates);
    compiledTags.set(key, tag);
  }
  return tag;
}

/** Tag functions by their templates (bounded: see {@link referenceTag}). */
const compiledTags = new Map<string, (info: ReferenceInfo) => string>();
const COMPILED_TAGS_CAP = 64;

function compileTag(templates: Readonly<Record<MatchKind, string>>): (info: ReferenceInfo) => string {
  const exact = compileTemplate(templates.exact, TAG_FIELDS);
  const near = compileTemplate(templates.near, TAG_FIELDS);
  return (info) =>
    (info.kind === 'exact' ? exact : near)((field) =>
      field === 'id'
        ? info.id
        : field === 'keepId'
          ? info.keepId
          : field === 'chars'
            ? String(info.chars)
            : String(info.similarity === undefined ? 100 : Math.round(info.similarity * 100)),
    );
}

/** One message the plan replaces whole by a reference tag. @internal */
export interface WholeReplacement {
  index: number;
  kind: MatchKind;
  /** The message kept in full. */
  duplicateOfIndex: number;
  /** Near only. */
  similarity?: number;
  /** What the tag's `chars` says (exact: the kept message's length; near: its own). */
  contentLength: number;
  tag: string;
  /** Length of the replaced content, and what the tag saves (may be negative). */
  charsBefore: number;
  charsSaved: number;
}

/** The whole-message decisions of one batch and their totals. @internal */
export interface WholePlan {
  /** In message order. */
  replacements: WholeReplacement[];
  exact: number;
  near: number;
  /** Annotated duplicates left in full because they sit in the recency window. */
  keptInWindow: number;
  charsSaved: number;
}

/**
 * Turns the native annotations into decisions: annotations in the recency window are counted
 * and left alone, every other one gets its tag (exact ones first, then near ones: the order a
 * caller's tag function sees). `id(i)` is the id of message `i`; `lengths[i]` its content length.
 * With `contents` (net positive: `dedupeMessages` with `keep: 'earliest'`), a message whose tag
 * would not be shorter than it, in UTF-16 units and in o200k_base tokens, stays in full and gets
 * no decision; with `shorter` alone (`keep: 'latest'`), in UTF-16 units only, so the output is
 * never longer than the input whatever the template, ids and `minChars`. `ctxdedup/cce` passes
 * neither and keeps CCE's rule (every duplicate is tagged).
 * @internal
 */
export function decide(
  found: { exact: readonly Annotation[]; fuzzy: readonly Annotation[] },
  id: (index: number) => string,
  lengths: Uint32Array,
  window: { recencyWindow: number; recencyStart: number },
  tag: (info: ReferenceInfo) => string,
  contents?: readonly string[],
  shorter = contents !== undefined,
): WholePlan {
  const tagged = drain(tagCandidates(found, id, lengths, window, tag, shorter));
  return planOf(contents === undefined ? tagged.candidates : shorterInTokens(tagged.candidates, contents), tagged.keptInWindow);
}

/**
 * Each annotation outside the recency window with its tag: the candidate replacements (with
 * `shorter`, only those whose tag is shorter in UTF-16 units), in annotation order. In steps
 * ({@link decide} runs them at once; the async message stage lets the event loop run between
 * them). @internal
 */
export function* tagCandidates(
  found: { exact: readonly Annotation[]; fuzzy: readonly Annotation[] },
  id: (index: number) => string,
  lengths: Uint32Array,
  window: { recencyWindow: number; recencyStart: number },
  tag: (info: ReferenceInfo) => string,
  shorter: boolean,
): Steps<{ candidates: WholeReplacement[]; keptInWindow: number }> {
  const candidates: WholeReplacement[] = [];
  let keptInWindow = 0;
  const add = (a: Annotation, kind: MatchKind): void => {
    if (inRecencyWindow(a.index, window.recencyWindow, window.recencyStart)) {
      keptInWindow++;
      return;
    }
    const info: ReferenceInfo = { kind, id: id(a.index), keepId: id(a.duplicateOfIndex), chars: a.contentLength };
    if (a.similarity !== undefined) info.similarity = a.similarity;
    const text = tag(info);
    const charsBefore = lengths[a.index] as number;
    const r: WholeReplacement = {
      index: a.index,
      kind,
      duplicateOfIndex: a.duplicateOfIndex,
      contentLength: a.contentLength,
      tag: text,
      charsBefore,
      charsSaved: charsBefore - text.length,
    };
    if (a.similarity !== undefined) r.similarity = a.similarity;
    if (r.charsSaved > 0 || !shorter) candidates.push(r);
  };
  let k = 0;
  for (const [annotations, kind] of [
    [found.exact, 'exact'],
    [found.fuzzy, 'near'],
  ] as const) {
    for (const a of annotations) {
      if (++k % STEP_ITEMS === 0) yield;
      add(a, kind);
    }
  }
  return { candidates, keptInWindow };
}

/** The plan of these replacements (in any order) and its totals. @internal */
export function planOf(replacements: readonly WholeReplacement[], keptInWindow: number): WholePlan {
  const plan: WholePlan = { replacements: [], exact: 0, near: 0, keptInWindow, charsSaved: 0 };
  for (const r of replacements) {
    plan.replacements.push(r);
    plan.charsSaved += r.charsSaved;
    if (r.kind === 'exact') plan.exact++;
    else plan.near++;
  }
  plan.replacements.sort((a, b) => a.index - b.index);
  return plan;
}

/**
 * The replacements whose tag has fewer o200k_base tokens than the message it replaces. A
 * message is counted only until it passes its tag's count (a few pieces, whatever its length).
 */
function shorterInTokens(candidates: WholeReplacement[], contents: readonly string[]): WholeReplacement[] {
  if (candidates.length === 0) return candidates;
  const o200k = native.TokenEncoding.O200kBase;
  const tags = native.countTokensBatch(
    candidates.map((r) => r.tag),
    o200k,
  );
  const messages = native.countTokensBatchUpTo(
    candidates.map((r) => contents[r.index] as string),
    tags,
    o200k,
  );
  return candidates.filter((_, k) => (messages[k] as number) > (tags[k] as number));
}

/**
 * The replacements whose tag has fewer o200k_base tokens than the message it replaces, counted
 * on a libuv thread (the texts are copied first). @internal
 */
export async function shorterInTokensAsync(candidates: WholeReplacement[], contents: readonly string[]): Promise<WholeReplacement[]> {
  if (candidates.length === 0) return candidates;
  const o200k = native.TokenEncoding.O200kBase;
  const tags = await native.countTokensBatchAsync(
    candidates.map((r) => r.tag),
    o200k,
  );
  const messages = await native.countTokensBatchUpToAsync(
    candidates.map((r) => contents[r.index] as string),
    tags,
    o200k,
  );
  return candidates.filter((_, k) => (messages[k] as number) > (tags[k] as number));
}

/**
 * The messages with the plan's replacements applied (`replace` builds a replaced message from
 * its original), and the originals by `key` (the verbatim map). @internal
 */
export function rewrite<M>(
  messages: readonly M[],
  plan: WholePlan,
  replace: (original: M, r: WholeReplacement) => M,
  /** The verbatim key of `original`, message `index`. */
  key: (original: M, index: number) => string,
): { messages: M[]; verbatim: Record<string, M> } {
  return drain(rewriteSteps(messages, plan, replace, key));
}

/** {@link rewrite} in steps of {@link STEP_ITEMS} replacements ({@link drainPaced}). @internal */
export function* rewriteSteps<M>(
  messages: readonly M[],
  plan: WholePlan,
  replace: (original: M, r: WholeReplacement) => M,
  key: (original: M, index: number) => string,
): Steps<{ messages: M[]; verbatim: Record<string, M> }> {
  const out = messages.slice();
  const entries: [string, M][] = [];
  const replacements = plan.replacements;
  for (let k = 0; k < replacements.length; k++) {
    if (k > 0 && k % STEP_ITEMS === 0) yield;
    const r = replacements[k] as WholeReplacement;
    const original = messages[r.index] as M;
    out[r.index] = replace(original, r);
    entries.push([key(original, r.index), original]);
  }
  // fromEntries defines own data properties (a `__proto__` id stays a plain key, no setter runs),
  // and costs about half of a defineProperty per key.
  return { messages: out, verbatim: Object.fromEntries(entries) as Record<string, M> };
}

export type { NativeAnalyzeOptions };
