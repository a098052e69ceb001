/**
 * Stage: message dedup, exact and near, with explained and reversible decisions.
 *
 * Exact duplicates are eligible messages with the same content string; near duplicates are
 * linked by multiset line Jaccard (normalized lines, fingerprint and length-ratio filters) and
 * grouped transitively. One copy of each group stays; the others become short reference tags,
 * and the originals go to a verbatim map so {@link restoreMessages} gives the input back.
 *
 * Visible targets: a reference always points at a message that is in the output in full. The
 * exact pass runs first, and an exact group's kept copy takes part in the near pass; if it is
 * then replaced as a near duplicate, its exact copies refer to the near-duplicate group's kept
 * message instead (as `near` decisions, with its similarity), never to a tag. `ctxdedup/cce`
 * keeps context-compression-engine's chains instead.
 * @module
 */
import {
  aliased,
  describe,
  expectArray,
  expectObject,
  expectKnownKeys,
  expectOptions,
  isArrayOrRevoked,
  isRevokedProxy,
  optionalBoolean,
  optionalNumber,
  optionalStrings,
  show,
  typeError,
} from '../validation.js';
import { native, type NativeBlockOptions, type NativeBlocks } from '../native.js';
import { deprecatedAlias } from '../deprecated.js';
import { drain, drainPaced, flatten, STEP_ITEMS, type Steps } from '../pacing.js';
import {
  applyBlocks,
  markedMetadata,
  BlockReport,
  type BlockDecision,
  type BlockOptions,
  type BlocksMarker,
  lazyProperty,
  type ResolvedBlockOptions,
  resolveBlockOptions,
} from './blocks.js';
import {
  analysisInput,
  analyze,
  analyzePacked,
  ASYNC_MIN_UNITS,
  decide,
  planOf,
  recencyStartOf,
  referenceTag,
  TAG_FIELDS,
  rewriteSteps,
  shorterInTokensAsync,
  SUMMARY_PREFIX_UNITS,
  SUMMARY_PREFIXES,
  tagCandidates,
  unpack,
  utf16,
  type Annotation,
  type AnalysisInput,
  type MatchKind,
  type NativeAnalyzeOptions,
  type ReferenceInfo,
  type WholePlan,
  type WholeReplacement,
} from './message-analysis.js';

export { ASYNC_MIN_UNITS };
export type { MatchKind, ReferenceInfo };

/**
 * The fields of a message the message stage reads: what its functions require of a message
 * type. Any object type that has them fits, your own interfaces included; every other field
 * rides along untouched.
 */
export interface MessageFields {
  /** Unique within the conversation; the key of the verbatim map. */
  id: string;
  role?: string;
  /** Only string contents are deduplicated. */
  content?: unknown;
  /** A message with a non-empty `tool_calls` array is never replaced. */
  tool_calls?: unknown;
  /** Kept, with a `ctxdedup` marker added to it in a replaced or rewritten message. */
  metadata?: object;
}

/** A conversation message: {@link MessageFields} and any other fields (for annotating literals). */
export interface Message extends MessageFields {
  metadata?: Record<string, unknown>;
  [field: string]: unknown;
}

/** Reference tag templates: `{id}`, `{keepId}`, `{chars}` and `{percent}` are filled in. */
export interface ReferenceTemplates {
  exact?: string;
  near?: string;
  /** @deprecated Use `near` (the same template; both given must be equal). */
  fuzzy?: string;
}

/** Default reference tags, one per {@link MatchKind}. */
export const DEFAULT_TEMPLATES: Readonly<Record<MatchKind, string>> & {
  /** @deprecated Use `near` (the same template). Not enumerable. */
  readonly fuzzy: string;
} = deprecatedAlias(
  {
    exact: '[ctxdedup: duplicate of {keepId} — {chars} chars]',
    near: '[ctxdedup: near-duplicate of {keepId} — {chars} chars, ~{percent}% match]',
  },
  'fuzzy',
  '[ctxdedup: near-duplicate of {keepId} — {chars} chars, ~{percent}% match]',
) as Readonly<Record<MatchKind, string>> & { readonly fuzzy: string };

/** The option names {@link dedupeMessages} takes. */
const MESSAGE_OPTIONS = [
  'keep',
  'exact',
  'near',
  'fuzzy',
  'threshold',
  'minChars',
  'preserve',
  'recencyWindow',
  'skipPrefixes',
  'reference',
  'blocks',
] as const satisfies readonly (keyof DedupeMessagesOptions)[];

/** Options of {@link dedupeMessages}. */
export interface DedupeMessagesOptions {
  /**
   * Which copy stays in full. `'latest'` (default, context-compression-engine's rule) keeps the
   * last copy, or the first copy inside the recency window; `'earliest'` keeps the first copy
   * and replaces later ones, which keeps a prompt-cache prefix stable: the output for `x ++ y`
   * begins with the output for `x`, except with `near` (a later message can join two earlier
   * ones into one group) or a `recencyWindow` (a message is replaced once it leaves it).
   */
  keep?: 'latest' | 'earliest';
  /** Run the exact pass. Default `true`. */
  exact?: boolean;
  /** Run the near-duplicate pass. Default `false`. */
  near?: boolean;
  /** @deprecated Use `near` (the same switch; both given must be equal). */
  fuzzy?: boolean;
  /** Minimum multiset line Jaccard for near duplicates, in [0, 1]. Default `0.85`. */
  threshold?: number;
  /** Contents shorter than this (UTF-16 code units) are left alone. Default `200`. */
  minChars?: number;
  /** Roles never deduplicated (exact, case-sensitive). Default `['system']`. */
  preserve?: string[];
  /** The last N messages are never replaced (0 = none protected). Default `0`. */
  recencyWindow?: number;
  /** Contents starting with any of these are left alone. Default: `[summary:`, `[summary#`, `[truncated`. */
  skipPrefixes?: string[];
  /** Reference tag wording: templates, or a function that returns the tag. */
  reference?: ReferenceTemplates | ((info: ReferenceInfo) => string);
  /**
   * Block dedup (lossless): after the whole-message exact pass, runs of at least `minLines`
   * lines already sent earlier in the conversation (or above in the same message) become
   * one-line references; new lines stay verbatim. Requires `keep: 'earliest'`, no `near` and
   * no `recencyWindow`, so appending messages never changes bytes already produced. `true`
   * means the defaults ({@link BlockOptions}). Default `false`.
   */
  blocks?: boolean | BlockOptions;
}

/** Why one message was replaced whole. */
export interface WholeMessageDecision {
  index: number;
  id: string;
  /**
   * `exact`: the kept message has the same content. `near`: a near duplicate of it (also an
   * exact copy of a message that was itself replaced as a near duplicate of it).
   */
  kind: MatchKind;
  /** The message kept in full: never itself replaced, so the reference can be followed in the output. */
  duplicateOfIndex: number;
  duplicateOfId: string;
  /** Near only: similarity to the kept message. */
  similarity?: number;
  charsBefore: number;
  charsAfter: number;
  charsSaved: number;
}

/** Why a message, or a run of lines in it (`kind: 'block'`), was replaced. */
export type MessageDecision = WholeMessageDecision | BlockDecision;

/** Totals a UI can show as one card. */
export interface MessageDedupStats {
  messages: number;
  exactDuplicates: number;
  nearDuplicates: number;
  /** Annotated duplicates left in full because they sit in the recency window. */
  keptInWindow: number;
  charsBefore: number;
  charsAfter: number;
  charsSaved: number;
  /**
   * o200k_base tokens saved, net of tags and references: each message replaced whole counts its
   * original's tokens minus its tag's, and `blockTokensSaved` is added. Counted on first read
   * (one batch; a kept message counted once for all its copies), or off the JS thread by
   * {@link dedupeMessagesAsync} on a batch it analyses there: the value is that of a stored number.
   */
  tokensSaved: number;
  /** Block pass: references written, lines they replaced, characters and o200k tokens saved (net of the references). */
  blockReferences: number;
  blockLines: number;
  blockCharsSaved: number;
  blockTokensSaved: number;
}

/** Result of {@link dedupeMessages}. */
export interface DedupeMessagesResult<M extends MessageFields = Message> {
  /** The conversation with duplicates replaced by reference tags, in input order. */
  messages: M[];
  /** Originals of every replaced message, by id. */
  verbatim: Record<string, M>;
  /**
   * One decision per replacement, by message index. With block references, built on first read
   * (it then counts the replaced runs' o200k tokens, all in one batch), as is
   * `stats.blockTokensSaved`: the values are those of a stored array.
   */
  decisions: MessageDecision[];
  stats: MessageDedupStats;
}

/** Marker left in `metadata` of a message replaced whole. */
export interface WholeMessageMarker {
  kind: MatchKind;
  duplicateOf: string;
  similarity?: number;
  /** Block mode only: the original message had no `metadata` field ({@link expandMessages} removes it again). */
  metadataAbsent?: true;
  /** Block mode only: the original `metadata`, as in {@link BlocksMarker.originalMetadata}. */
  originalMetadata?: unknown;
}

/** Marker left in `metadata.ctxdedup` of a rewritten message. */
export type ReplacementMarker = WholeMessageMarker | BlocksMarker;

interface Plan {
  messages: Message[];
  /** Every message's id, read once: the async variant must not see later changes. */
  ids: string[];
  /** Whether each message's content is a string (a text the model sees), read once. */
  texts: Uint8Array;
  input: AnalysisInput;
  native: NativeAnalyzeOptions;
  recencyWindow: number;
  recencyStart: number;
  reference: (info: ReferenceInfo) => string;
  blocks: ResolvedBlockOptions | undefined;
}

/**
 * The o200k tokens a call's whole-message replacements saved: each replaced text's count minus
 * its tag's. The texts are gathered only when counted; an exact duplicate's text is its keeper's,
 * so each keeper is counted once for all its copies.
 */
class WholeTokens {
  readonly #replacements: readonly WholeReplacement[];
  readonly #contents: readonly string[];
  #saved: number | undefined;

  /** `contents`: every message's content as the analysis read it. */
  constructor(replacements: readonly WholeReplacement[], contents: readonly string[]) {
    this.#replacements = replacements;
    this.#contents = contents;
    if (replacements.length === 0) this.#saved = 0;
  }

  /** Whether the count is known (reading it costs nothing more). */
  get counted(): boolean {
    return this.#saved !== undefined;
  }

  /** The texts to count and each one's weight (+copies replaced, -1 per tag). */
  #texts(): { texts: string[]; weights: number[] } {
    const texts: string[] = [];
    const weights: number[] = [];
    const keeperAt = new Map<number, number>();
    for (const r of this.#replacements) {
      const at = r.kind === 'exact' ? keeperAt.get(r.duplicateOfIndex) : undefined;
      if (at !== undefined) weights[at] = (weights[at] as number) + 1;
      else {
        if (r.kind === 'exact') keeperAt.set(r.duplicateOfIndex, texts.length);
        texts.push(this.#contents[r.index] as string);
        weights.push(1);
      }
      texts.push(r.tag);
      weights.push(-1);
    }
    return { texts, weights };
  }

  #settle(weights: readonly number[], counts: Uint32Array): number {
    let saved = 0;
    for (let k = 0; k < counts.length; k++) saved += (weights[k] as number) * (counts[k] as number);
    this.#saved = saved;
    return saved;
  }

  saved(): number {
    if (this.#saved !== undefined) return this.#saved;
    const { texts, weights } = this.#texts();
    return this.#settle(weights, native.countTokensBatch(texts, native.TokenEncoding.O200kBase));
  }

  /** Counts off the JS thread (a large async call), so a later read never blocks the loop. */
  async count(): Promise<void> {
    if (this.#saved !== undefined) return;
    const { texts, weights } = this.#texts();
    this.#settle(weights, await native.countTokensBatchAsync(texts, native.TokenEncoding.O200kBase));
  }
}

/** The whole-message token counter of each result {@link apply} built. */
const wholeTokens = new WeakMap<object, WholeTokens>();

/** Gives `stats.tokensSaved` its value: at once if it is known, else on first read. */
function setTokensSaved(stats: MessageDedupStats, known: boolean, saved: () => number): void {
  if (known) stats.tokensSaved = saved();
  else lazyProperty(stats, 'tokensSaved', saved);
}

/** The tag function of the default templates, and the templates it was compiled from. */
let defaultReference: { exact: string; near: string; tag: (info: ReferenceInfo) => string } | undefined;

/** Roles preserved by default, as the set the analysis reads (never modified). */
const DEFAULT_PRESERVE: ReadonlySet<unknown> = new Set(['system']);

function referenceOf(option: unknown): (info: ReferenceInfo) => string {
  if (option === undefined) {
    const { exact, near } = DEFAULT_TEMPLATES;
    if (defaultReference?.exact !== exact || defaultReference.near !== near) defaultReference = { exact, near, tag: referenceTag({ exact, near }) };
    return defaultReference.tag;
  }
  if (typeof option === 'function') {
    return (info) => {
      const tag: unknown = option(info);
      if (typeof tag !== 'string') typeError('options.reference()', `must return a string, got ${describe(tag)}`);
      return tag;
    };
  }
  if (option !== undefined) expectObject(option, 'options.reference');
  const given = (option ?? {}) as Record<string, unknown>;
  expectKnownKeys(given, 'options.reference', ['exact', 'near', 'fuzzy']);
  // An absent or `undefined` template means the default, like every other option.
  const read = (key: string): string | undefined => {
    const template = Object.hasOwn(given, key) ? given[key] : undefined;
    if (template !== undefined && typeof template !== 'string') typeError(`options.reference.${key}`, `must be a string, got ${describe(template)}`);
    // A misspelled field would reach the model as literal text (`{target}` is a block template's).
    for (const [, field] of template?.matchAll(/\{(\w+)\}/g) ?? []) {
      if (!(TAG_FIELDS as readonly string[]).includes(field as string)) {
        typeError(`options.reference.${key}`, `has an unknown field {${field}} (fields: ${TAG_FIELDS.map((f) => `{${f}}`).join(', ')})`);
      }
    }
    return template;
  };
  const templates: Record<MatchKind, string> = {
    exact: read('exact') ?? DEFAULT_TEMPLATES.exact,
    near: aliased(read('near'), 'options.reference.near', read('fuzzy'), 'options.reference.fuzzy') ?? DEFAULT_TEMPLATES.near,
  };
  return referenceTag(templates);
}

function plan(messages: unknown, options: DedupeMessagesOptions | undefined): Plan {
  expectArray(messages, 'messages');
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  expectKnownKeys(o, 'options', MESSAGE_OPTIONS);
  const seen = new Set<string>();
  const ids = new Array<string>(messages.length);
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    // The path is built only for the error: a template literal per message is a measurable
    // share of a call on a short conversation.
    if (typeof m !== 'object' || m === null || isArrayOrRevoked(m)) expectObject(m, `messages[${i}]`);
    const id = (m as Record<string, unknown>)['id'];
    if (typeof id !== 'string') typeError(`messages[${i}].id`, `must be a string (it keys the verbatim map), got ${describe(id)}`);
    // One lookup: the set grows unless the id is already in it.
    const size = seen.size;
    if (seen.add(id).size === size) typeError(`messages[${i}].id`, `duplicates an earlier id: ${show(id)}`);
    ids[i] = id;
  }
  const keep = o['keep'] ?? 'latest';
  if (keep !== 'latest' && keep !== 'earliest') typeError('options.keep', `must be 'latest' or 'earliest', got ${show(keep)}`);
  const recencyWindow = optionalNumber(o['recencyWindow'], 'options.recencyWindow', 0, { min: 0, integer: true });
  const minChars = optionalNumber(o['minChars'], 'options.minChars', 200, { min: 0, max: 2 ** 32 - 1, integer: true });
  const threshold = optionalNumber(o['threshold'], 'options.threshold', 0.85, { min: 0, max: 1 });
  const nearOption = o['near'] === undefined ? undefined : optionalBoolean(o['near'], 'options.near', false);
  const fuzzyOption = o['fuzzy'] === undefined ? undefined : optionalBoolean(o['fuzzy'], 'options.fuzzy', false);
  const near = aliased(nearOption, 'options.near', fuzzyOption, 'options.fuzzy') ?? false;
  // Errors name the switch the caller used.
  const nearPath = nearOption === undefined && fuzzyOption !== undefined ? 'options.fuzzy' : 'options.near';
  const blocks = resolveBlockOptions(o['blocks'], { keep: o['keep'], near: near ? nearPath : undefined, recencyWindow });
  // A snapshot of the list; ids and contents are read into the plan below (the async variant must
  // not see changes the caller makes while it runs).
  const list = (messages as Message[]).slice();
  const recencyStart = recencyStartOf(list.length, recencyWindow);
  const texts = new Uint8Array(list.length);
  if (blocks !== undefined) for (let i = 0; i < list.length; i++) texts[i] = typeof (list[i] as Message).content === 'string' ? 1 : 0;
  return {
    messages: list,
    ids,
    texts,
    input: analysisInput(
      list,
      o['preserve'] === undefined ? DEFAULT_PRESERVE : new Set(optionalStrings(o['preserve'], 'options.preserve', ['system'])),
      minChars,
    ),
    native: {
      minChars,
      skipPrefixes:
        o['skipPrefixes'] === undefined ? SUMMARY_PREFIX_UNITS : utf16(optionalStrings(o['skipPrefixes'], 'options.skipPrefixes', SUMMARY_PREFIXES)),
      keep,
      recencyStart,
      exact: optionalBoolean(o['exact'], 'options.exact', true),
      fuzzyThreshold: near ? threshold : undefined,
    },
    recencyWindow,
    recencyStart,
    reference: referenceOf(o['reference']),
    blocks,
  };
}

/** The whole-message decisions of `found`. */
function wholePlan(p: Plan, found: { exact: Annotation[]; fuzzy: Annotation[] }): WholePlan {
  // keep 'earliest' (the cache-safe mode) is net positive; 'latest' keeps CCE's analysis.
  const netPositive = p.native.keep === 'earliest' ? p.input.contents : undefined;
  return decide(found, (i) => p.ids[i] as string, p.input.lengths, p, p.reference, netPositive, true);
}

/** {@link wholePlan}, tagging in steps and counting tokens off the JS thread. */
async function wholePlanAsync(p: Plan, found: { exact: Annotation[]; fuzzy: Annotation[] }): Promise<WholePlan> {
  const tagged = await drainPaced(tagCandidates(found, (i) => p.ids[i] as string, p.input.lengths, p, p.reference, true));
  const kept = p.native.keep === 'earliest' ? await shorterInTokensAsync(tagged.candidates, p.input.contents) : tagged.candidates;
  return planOf(kept, tagged.keptInWindow);
}

function apply<M extends MessageFields>(p: Plan, plan: WholePlan): DedupeMessagesResult<M> {
  return drain(applySteps<M>(p, plan));
}

/** {@link apply} in steps ({@link drainPaced}: the async variant lets the event loop run). */
function* applySteps<M extends MessageFields>(p: Plan, plan: WholePlan): Steps<DedupeMessagesResult<M>> {
  const messages = p.messages as unknown as M[];
  const { messages: out, verbatim } = yield* rewriteSteps(
    messages,
    plan,
    (original, r) => {
      const marker: WholeMessageMarker = { kind: r.kind, duplicateOf: p.ids[r.duplicateOfIndex] as string };
      if (r.similarity !== undefined) marker.similarity = r.similarity;
      const metadata = p.blocks === undefined ? { ...(original.metadata ?? {}), ctxdedup: marker } : markedMetadata(original, marker);
      return { ...original, id: p.ids[r.index] as string, content: r.tag, metadata };
    },
    (_, index) => p.ids[index] as string,
  );
  const decisions: MessageDecision[] = [];
  for (const r of plan.replacements) {
    if (decisions.length % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const decision: WholeMessageDecision = {
      index: r.index,
      id: p.ids[r.index] as string,
      kind: r.kind,
      duplicateOfIndex: r.duplicateOfIndex,
      duplicateOfId: p.ids[r.duplicateOfIndex] as string,
      charsBefore: r.charsBefore,
      charsAfter: r.tag.length,
      charsSaved: r.charsSaved,
    };
    if (r.similarity !== undefined) decision.similarity = r.similarity;
    decisions.push(decision);
  }
  const charsBefore = p.input.units;
  const whole = new WholeTokens(plan.replacements, p.input.contents);
  const result: DedupeMessagesResult<M> = {
    messages: out,
    verbatim,
    decisions,
    stats: {
      messages: messages.length,
      exactDuplicates: plan.exact,
      nearDuplicates: plan.near,
      keptInWindow: plan.keptInWindow,
      charsBefore,
      charsAfter: charsBefore - plan.charsSaved,
      charsSaved: plan.charsSaved,
      tokensSaved: 0,
      blockReferences: 0,
      blockLines: 0,
      blockCharsSaved: 0,
      blockTokensSaved: 0,
    },
  };
  wholeTokens.set(result, whole);
  setTokensSaved(result.stats, whole.counted, () => whole.saved());
  return result;
}

/**
 * Inputs of the block pass once whole-message replacements are known: each duplicate's keeper
 * (the pass skips a duplicate, whose tag the model sees, unless it rewrites the keeper).
 */
function blockInput(p: Plan, replaced: DedupeMessagesResult['decisions'], fullCounts: boolean): [Uint8Array, Uint8Array, Uint32Array, NativeBlockOptions] {
  const keeper = new Uint32Array(replaced.length === 0 ? 0 : p.messages.length).fill(NO_KEEPER);
  for (const d of replaced) keeper[d.index] = d.duplicateOfIndex;
  // On the JS thread, runs are counted only as far as the decisions need and the reported counts
  // are taken on first read; off it (`fullCounts`), in full there, so reading never blocks the loop.
  const options = { ...(p.blocks as ResolvedBlockOptions), messageMinChars: p.native.minChars, skipPrefixes: p.native.skipPrefixes, fullCounts };
  return [p.texts, p.input.blocked, keeper, options];
}

/** `keeper` of a message that is not a duplicate (the core's `NO_KEEPER`, u32::MAX). */
const NO_KEEPER = 0xffffffff;

/**
 * The whole-message result without the duplicates the block pass kept as messages: their keeper
 * was rewritten, so a tag would name text the model no longer sees in full.
 */
function* withoutKept<M extends MessageFields>(p: Plan, result: DedupeMessagesResult<M>, plan: WholePlan, found: NativeBlocks): Steps<DedupeMessagesResult<M>> {
  if (found.keptDuplicates.length === 0) return result;
  const kept = new Set(found.keptDuplicates);
  // Each replacement was decided on its own: the others stand as they are.
  return yield* applySteps<M>(
    p,
    planOf(
      plan.replacements.filter((r) => !kept.has(r.index)),
      plan.keptInWindow,
    ),
  );
}

/**
 * Adds the block pass's rewrites, decisions and totals to a whole-message result. `ids`: the
 * messages' ids as the pass read them.
 *
 * The pass counts a replaced run's tokens only as far as its net-positive test needs: the
 * decisions (with each run's `tokensBefore` and `tokensSaved`) and `stats.blockTokensSaved` are
 * built on first read, all runs counted in one batch ({@link BlockReport}), as lazy properties
 * that read exactly as stored values would ({@link lazyProperty}).
 */
function* withBlocks<M extends MessageFields>(
  p: Plan,
  result: DedupeMessagesResult<M>,
  found: NativeBlocks,
  ids: readonly string[],
): Steps<DedupeMessagesResult<M>> {
  yield* applyBlocks(p.messages as unknown as M[], result.messages, result.verbatim, found, p.input.contents, p.ids);
  if (found.message.length === 0) return result;
  const report = new BlockReport(found, ids, p.input.contents);
  const counter = wholeTokens.get(result) as WholeTokens;
  // Field by field, not a spread: a spread would read (and so count) `tokensSaved`.
  const s = result.stats;
  const stats: MessageDedupStats = {
    messages: s.messages,
    exactDuplicates: s.exactDuplicates,
    nearDuplicates: s.nearDuplicates,
    keptInWindow: s.keptInWindow,
    charsBefore: s.charsBefore,
    charsAfter: s.charsAfter - report.charsSaved,
    charsSaved: s.charsSaved + report.charsSaved,
    tokensSaved: 0,
    blockReferences: report.references,
    blockLines: report.lines,
    blockCharsSaved: report.charsSaved,
    blockTokensSaved: 0,
  };
  setTokensSaved(stats, counter.counted && report.counted, () => counter.saved() + report.tokensSaved());
  if (report.counted) stats.blockTokensSaved = report.tokensSaved();
  else lazyProperty(stats, 'blockTokensSaved', () => report.tokensSaved());
  const whole = result.decisions;
  const decisions = (): MessageDecision[] => [...whole, ...report.decisions()].sort((a, b) => a.index - b.index);
  if (report.counted) return { ...result, decisions: decisions(), stats };
  const out: DedupeMessagesResult<M> = { ...result, decisions: whole, stats };
  lazyProperty(out, 'decisions', decisions);
  return out;
}

/**
 * Replaces duplicate messages with short reference tags.
 *
 * @returns the rewritten conversation, the originals by id, one decision per replacement, totals.
 * @throws TypeError if `messages` is not an array of objects with unique string ids, or an option
 *   has the wrong type; RangeError if `threshold` is outside [0, 1] or NaN, or `recencyWindow` /
 *   `minChars` is negative or not an integer.
 * @example
 * const { messages, verbatim } = dedupeMessages(conversation, { keep: 'earliest', near: true });
 * restoreMessages(messages, verbatim); // deep-equals conversation
 */
export function dedupeMessages<M extends MessageFields>(messages: readonly M[], options?: DedupeMessagesOptions): DedupeMessagesResult<M> {
  return dedupeMessagesCounted(messages, options, false);
}

/**
 * {@link dedupeMessages} for a caller that reads every decision (the CLI's report): with
 * `countInPass`, the block pass counts each replaced run in full as it goes, which costs less
 * than counting them all on first read. Same result either way. @internal
 */
export function dedupeMessagesCounted<M extends MessageFields>(
  messages: readonly M[],
  options: DedupeMessagesOptions | undefined,
  countInPass: boolean,
): DedupeMessagesResult<M> {
  const p = plan(messages, options);
  const { contents, lengths, blocked } = p.input;
  // `blocked` holds 0 or 1 only: as packed flags it blocks, and excludes nothing else.
  const decided = wholePlan(p, unpack(analyzePacked(contents, lengths, blocked, p.native)));
  const result = apply<M>(p, decided);
  if (p.blocks === undefined) return result;
  const found = native.dedupeBlocksSync(contents, p.ids, ...blockInput(p, result.decisions, countInPass));
  return drain(withBlocks(p, drain(withoutKept(p, result, decided, found)), found, p.ids));
}

/**
 * {@link dedupeMessages} with the analysis on a worker thread, so the event loop stays free.
 * Ids and contents are read before the promise is returned: changing them later changes no
 * decision, and every rewritten message carries the id and content read then. Untouched messages
 * (and the originals in `verbatim`) are the input objects themselves, so later changes to those
 * objects show in the result, as they would after the sync call.
 * Small batches (up to {@link ASYNC_MIN_UNITS} code units) are analysed inline.
 */
export async function dedupeMessagesAsync<M extends MessageFields>(messages: readonly M[], options?: DedupeMessagesOptions): Promise<DedupeMessagesResult<M>> {
  return dedupeMessagesAsyncCounted(messages, options, false);
}

/**
 * {@link dedupeMessagesAsync} with {@link dedupeMessagesCounted}'s `countInPass`; without
 * `countTotal`, `stats.tokensSaved` is left to be counted on read even off the JS thread (a caller
 * that never reads it: the CLI counts with its own tokenizer). @internal
 */
export async function dedupeMessagesAsyncCounted<M extends MessageFields>(
  messages: readonly M[],
  options: DedupeMessagesOptions | undefined,
  countInPass: boolean,
  countTotal = true,
): Promise<DedupeMessagesResult<M>> {
  const p = plan(messages, options);
  const { contents, units } = p.input;
  const inline = units <= ASYNC_MIN_UNITS;
  if (!inline) await drainPaced(flatten(contents));
  const analysis = await analyze(p.input, false, p.native);
  // Off the JS thread, the whole-message replacements' tokens are counted there too.
  const counted = async (result: DedupeMessagesResult<M>): Promise<DedupeMessagesResult<M>> => {
    if (countTotal) await (wholeTokens.get(result) as WholeTokens).count();
    return result;
  };
  const decided = inline ? wholePlan(p, analysis) : await wholePlanAsync(p, analysis);
  const whole = inline ? apply<M>(p, decided) : await drainPaced(applySteps<M>(p, decided));
  if (p.blocks === undefined) return inline ? whole : counted(whole);
  const ids = p.ids;
  const input = blockInput(p, whole.decisions, countInPass || !inline);
  const found = inline ? native.dedupeBlocksSync(contents, ids, ...input) : await native.dedupeBlocksAsync(contents, ids, ...input);
  if (inline) return drain(withBlocks(p, drain(withoutKept(p, whole, decided, found)), found, ids));
  const final = await counted(await drainPaced(withoutKept(p, whole, decided, found)));
  return drainPaced(withBlocks(p, final, found, ids));
}

/**
 * Puts the originals back: every message that carries a ctxdedup replacement marker and whose id
 * is in `verbatim` is replaced by the original; everything else is returned as is.
 *
 * @throws TypeError if `messages` is not an array or `verbatim` is not an object.
 */
export function restoreMessages<M extends MessageFields>(messages: readonly M[], verbatim: Record<string, M>): M[] {
  expectArray(messages, 'messages');
  expectObject(verbatim, 'verbatim');
  // An indexed loop, not map: a hole comes back as `undefined` at its index, not as a hole.
  const out = new Array<M>(messages.length);
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as M;
    if (isRevokedProxy(m)) expectObject(m, `messages[${i}]`);
    const marker = (m as unknown as Message | undefined)?.metadata?.['ctxdedup'];
    out[i] = marker === undefined || typeof m.id !== 'string' || !Object.hasOwn(verbatim, m.id) ? m : (verbatim[m.id] as M);
  }
  return out;
}
