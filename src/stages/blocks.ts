/**
 * Block dedup inside messages: runs of lines the model has already seen become one-line
 * references; every new line stays in place. The matching lives in ctxdedup-core
 * (`blocks.rs`); this module validates the options, turns the native references into rewritten
 * messages, decisions and markers, and expands a rewritten conversation from its output alone.
 * @module
 */
import {
  aliased,
  describe,
  expectArray,
  expectKnownKeys,
  expectObject,
  expectOptions,
  optionalNumber,
  rangeError,
  setOwn,
  show,
  typeError,
} from '../validation.js';
import type { NativeBlockOptions, NativeBlocks, TemplateKind } from '../native.js';
import { native } from '../native.js';
import { utf16 } from './message-analysis.js';
import { STEP_ITEMS, type Steps } from '../pacing.js';

/** Options of the block pass (`dedupeMessages(messages, { keep: 'earliest', blocks: { … } })`). */
export interface BlockOptions {
  /** Minimum lines in a replaced run. Default `4`. */
  minLines?: number;
  /** Minimum characters (UTF-16 units, line breaks inside the run included) in a replaced run. Default `200`. */
  minRunChars?: number;
  /**
   * @deprecated Use `minRunChars`: `minChars` names the message-level eligibility length
   * everywhere else (`options.minChars`). Both given must be equal.
   */
  minChars?: number;
  /**
   * `'auto'` (default): lines that start with a line number (`cat -n`, `nl`, `12→`, `12|`,
   * `grep -n`'s `12:`) also match on the text after the number, when the numbers of the replaced
   * lines can be regenerated exactly from the target's. `'off'`: lines match only as they are.
   */
  lineNumbers?: 'auto' | 'off';
  /** How many messages back a reference may point (`0`: only earlier in the same message). Default: no limit. */
  lookback?: number;
  /**
   * Reference line templates. Fields: `{lines}`, `{target}` (the target message's id), `{from}`,
   * `{to}` (1-based lines of the target message as it appears in the output), and for numbered
   * runs `{numberedFrom}`, `{numberedTo}` (the numbers the replaced lines carried). A template
   * must be one line and name `{target}`, `{from}` and `{to}` (and `{numberedFrom}` when numbered;
   * only the numbered template may use `{numberedFrom}` and `{numberedTo}`).
   */
  reference?: string;
  /** The template of a reference to numbered lines (`{numberedFrom}`, `{numberedTo}` allowed; see `reference`). */
  numberedReference?: string;
}

/** Default reference templates. */
export const DEFAULT_BLOCK_TEMPLATES = {
  reference: '[ctxdedup: {lines} lines unchanged, = {target} lines {from}–{to}]',
  numberedReference: '[ctxdedup: {lines} lines unchanged, = {target} lines {from}–{to}, numbered {numberedFrom}–{numberedTo} here]',
} as const;

/** How the replaced lines' numbers are regenerated from the target's lines. */
export interface BlockNumbering {
  /** Number carried by the first replaced line; the others follow consecutively. */
  first: number;
  /**
   * Number carried by the first target line; absent when the target lines are unnumbered (each
   * replaced line is then its number prefix followed by the whole target line).
   */
  targetFirst?: number;
  /** Width the number is right-aligned to with spaces (0: no padding). */
  width: number;
  /** The character after the number: tab, `→`, `|` or `:`. */
  separator: string;
}

/** One reference line in a rewritten message (kept in `metadata.ctxdedup.references`). */
export interface BlockReference {
  /** 0-based line of the reference in the message's output content. */
  line: number;
  /** How many lines it stands for. */
  lines: number;
  /** Id of the message whose lines are meant (earlier, or this message above the reference). */
  target: string;
  /** 1-based first line in the target message's output content (verbatim there). */
  from: number;
  numbered?: BlockNumbering;
}

/** Marker in `metadata.ctxdedup` of a message whose line runs were replaced. */
export interface BlocksMarker {
  kind: 'blocks';
  references: BlockReference[];
  /** The original message had no `metadata` field. */
  metadataAbsent?: true;
  /**
   * The original `metadata`, when a copy with the marker added could not give it back: not a
   * plain object (`null`, an array, a class instance, a null-prototype object, `undefined`), or
   * one with its own `ctxdedup` key. {@link expandMessages} puts it back as it was.
   */
  originalMetadata?: unknown;
}

/**
 * The metadata of a rewritten message (`marker` added under `ctxdedup`), and what the marker
 * must record so that {@link expandMessages} gives the original's back. @internal
 */
export function markedMetadata(original: { metadata?: unknown }, marker: { metadataAbsent?: true; originalMetadata?: unknown }): Record<string, unknown> {
  if (!Object.hasOwn(original, 'metadata')) {
    marker.metadataAbsent = true;
    return { ctxdedup: marker };
  }
  const metadata = original.metadata;
  const plain =
    typeof metadata === 'object' && metadata !== null && Object.getPrototypeOf(metadata) === Object.prototype && !Object.hasOwn(metadata, 'ctxdedup');
  if (plain) return { ...(metadata as Record<string, unknown>), ctxdedup: marker };
  marker.originalMetadata = metadata;
  // The output keeps an object's own fields (as a plain copy), whatever its prototype.
  const fields = typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) ? metadata : {};
  return { ...fields, ctxdedup: marker };
}

/** Why one run of lines was replaced. */
export interface BlockDecision {
  index: number;
  id: string;
  kind: 'block';
  /** The message whose lines the reference points at (kept verbatim there). */
  duplicateOfIndex: number;
  duplicateOfId: string;
  /** 1-based lines replaced, in the input message. */
  lines: { from: number; to: number };
  /** 1-based lines pointed at, in the target message's output. */
  targetLines: { from: number; to: number };
  /** Line numbers the replaced lines carried, when regenerated from the target's. */
  numbered?: { from: number; to: number };
  charsBefore: number;
  charsAfter: number;
  charsSaved: number;
  /** o200k_base tokens of the replaced lines and of the reference. */
  tokensBefore: number;
  tokensAfter: number;
  tokensSaved: number;
}

/** The validated block options, ready for the native pass. @internal */
export type ResolvedBlockOptions = Omit<NativeBlockOptions, 'messageMinChars' | 'skipPrefixes' | 'fullCounts'>;

function template(value: unknown, path: string, fallback: string, kind: TemplateKind): Uint16Array {
  if (value === undefined) return utf16([fallback])[0] as Uint16Array;
  if (typeof value !== 'string') typeError(path, `must be a string, got ${describe(value)}`);
  const units = utf16([value])[0] as Uint16Array;
  const problem = native.blockTemplateError(units, kind);
  if (problem !== null) typeError(path, problem);
  return units;
}

/**
 * Validates `options.blocks` (`true`, `false`/`undefined`, or an object) against the other
 * options. Returns `undefined` when the block pass is off. @internal
 */
export function resolveBlockOptions(
  option: unknown,
  context: { keep: unknown /** Path of the option that turned the near pass on, if it is on. */; near: string | undefined; recencyWindow: number },
): ResolvedBlockOptions | undefined {
  if (option === undefined || option === false) return undefined;
  if (option !== true) expectObject(option, 'options.blocks');
  if (context.keep !== 'earliest') {
    typeError(
      'options.blocks',
      `requires options.keep: 'earliest' (a reference must point at a copy already sent), got keep: ${show(context.keep ?? 'latest')}`,
    );
  }
  if (context.near !== undefined) {
    typeError('options.blocks', `cannot be combined with ${context.near} (near-duplicate replacement is lossy and rewrites earlier messages)`);
  }
  if (context.recencyWindow > 0) {
    rangeError(
      'options.blocks',
      `requires options.recencyWindow: 0 (a window would rewrite messages already sent once they leave it), got ${context.recencyWindow}`,
    );
  }
  const o = (option === true ? {} : option) as Record<string, unknown>;
  expectKnownKeys(o, 'options.blocks', ['minLines', 'minChars', 'minRunChars', 'lineNumbers', 'lookback', 'reference', 'numberedReference']);
  const own = (key: string): unknown => (Object.hasOwn(o, key) ? o[key] : undefined);
  const lineNumbers = own('lineNumbers') ?? 'auto';
  if (lineNumbers !== 'auto' && lineNumbers !== 'off') typeError('options.blocks.lineNumbers', `must be 'auto' or 'off', got ${show(lineNumbers)}`);
  const lookback = own('lookback');
  return {
    minLines: optionalNumber(own('minLines'), 'options.blocks.minLines', 4, { min: 1, max: 2 ** 32 - 1, integer: true }),
    minChars:
      aliased(
        runChars(own('minRunChars'), 'options.blocks.minRunChars'),
        'options.blocks.minRunChars',
        runChars(own('minChars'), 'options.blocks.minChars'),
        'options.blocks.minChars',
      ) ?? 200,
    lineNumbers: lineNumbers === 'auto',
    lookback: lookback === undefined ? undefined : optionalNumber(lookback, 'options.blocks.lookback', 0, { min: 0, max: 2 ** 32 - 1, integer: true }),
    reference: template(own('reference'), 'options.blocks.reference', DEFAULT_BLOCK_TEMPLATES.reference, 'reference'),
    numberedReference: template(own('numberedReference'), 'options.blocks.numberedReference', DEFAULT_BLOCK_TEMPLATES.numberedReference, 'numberedReference'),
  };
}

function runChars(value: unknown, path: string): number | undefined {
  return value === undefined ? undefined : optionalNumber(value, path, 0, { min: 0, max: 2 ** 32 - 1, integer: true });
}

interface Identified {
  id: string;
  content?: unknown;
  metadata?: object;
}

/** Makes `target[key]` the data property `value` (writable, enumerable, configurable). */
function settle(target: object, key: string, value: unknown): boolean {
  return Reflect.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/** The values of lazy properties not read yet (or read but not settled: a frozen owner), by owner and key. */
const lazyValues = new WeakMap<object, Map<string, { compute: (() => unknown) | undefined; value: unknown }>>();
/** One accessor pair per key, shared by every owner: V8 then reuses the owners' hidden classes. */
const lazyDescriptors = new Map<string, PropertyDescriptor>();

function lazyDescriptor(key: string): PropertyDescriptor {
  let descriptor = lazyDescriptors.get(key);
  if (descriptor === undefined) {
    descriptor = {
      enumerable: true,
      configurable: true,
      get(this: object): unknown {
        // The owner: the receiver, or the object it inherits the property from.
        let owner: object | null = this;
        let entry = lazyValues.get(owner)?.get(key);
        while (entry === undefined && owner !== null) {
          owner = Reflect.getPrototypeOf(owner);
          entry = owner === null ? undefined : lazyValues.get(owner)?.get(key);
        }
        if (entry === undefined || owner === null) return undefined;
        if (entry.compute !== undefined) {
          entry.value = entry.compute();
          entry.compute = undefined;
        }
        if (settle(owner, key, entry.value)) lazyValues.get(owner)?.delete(key);
        return entry.value;
      },
      set(this: object, assigned: unknown): void {
        // As an assignment to a writable data property: the receiver gets its own property.
        if (!settle(this, key, assigned)) throw new TypeError(`Cannot assign to read only property '${key}' of object`);
      },
    };
    lazyDescriptors.set(key, descriptor);
  }
  return descriptor;
}

/**
 * Replaces the existing own data property `target[key]` (its place in the key order kept) by one
 * computed on first read: an enumerable accessor that turns itself into the ordinary data
 * property holding the value when it is read (`compute` runs once) or assigned, so
 * `JSON.stringify`, spread, `structuredClone` and deep equality see the value as if it had been
 * stored. If `target` is frozen before the first read, the accessor stays and keeps returning
 * that value (the same object, for an object), and an assignment throws as on a frozen data
 * property. @internal
 */
export function lazyProperty(target: object, key: string, compute: () => unknown): void {
  let values = lazyValues.get(target);
  if (values === undefined) {
    values = new Map();
    lazyValues.set(target, values);
    // `console.log` / `util.inspect` show accessors as `[Getter/Setter]`: show the values.
    Object.defineProperty(target, INSPECT, { value: inspectValues, writable: true, configurable: true, enumerable: false });
  }
  values.set(key, { compute, value: undefined });
  Object.defineProperty(target, key, lazyDescriptor(key));
}

/** Node's `util.inspect.custom` (a registered symbol, so no import of node:util). */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/**
 * How `util.inspect` shows an object with lazy properties: their values, as if stored. Reading
 * them settles them into data properties; then the hook removes itself and the object is shown
 * as it is. A frozen object cannot settle: a plain copy of its values is shown instead.
 */
function inspectValues(this: Record<string, unknown>): unknown {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(this)) copy[key] = this[key];
  return Reflect.deleteProperty(this, INSPECT) && !lazyValues.get(this)?.size ? this : copy;
}

/**
 * Rewrites the messages the native pass found runs in: `out[i]` gets the new content and a
 * {@link BlocksMarker}, `verbatim[id]` the original. The decisions are built apart, on demand
 * ({@link BlockReport}). In steps (`drainPaced` of pacing.ts). @internal
 */
export function* applyBlocks<M extends Identified>(
  originals: readonly M[],
  out: M[],
  verbatim: Record<string, M>,
  found: NativeBlocks,
  contents: readonly string[],
  ids: readonly string[],
): Steps<void> {
  const count = found.message.length;
  let k = 0;
  let step = 0;
  while (k < count) {
    // A step ends between messages, after about STEP_ITEMS references.
    if (k >= step + STEP_ITEMS) {
      step = k;
      yield;
    }
    const index = found.message[k] as number;
    const original = originals[index] as M;
    // The content and ids the pass read (a caller may change the messages while an async pass runs).
    const content = contents[index] as string;
    let rewritten = '';
    const references: BlockReference[] = [];
    let at = 0;
    for (; k < count && found.message[k] === index; k++) {
      const text = found.text.slice(k === 0 ? 0 : found.textEnd[k - 1], found.textEnd[k]);
      rewritten += content.slice(at, found.unitStart[k] as number) + text;
      at = found.unitEnd[k] as number;
      const reference: BlockReference = {
        line: found.outLine[k] as number,
        lines: found.lineCount[k] as number,
        target: ids[found.target[k] as number] as string,
        from: (found.targetLine[k] as number) + 1,
      };
      const numbered = numberingOf(found, k);
      if (numbered !== undefined) reference.numbered = numbered;
      references.push(reference);
    }
    rewritten += content.slice(at);
    const marker: BlocksMarker = { kind: 'blocks', references };
    out[index] = { ...original, id: ids[index] as string, content: rewritten, metadata: markedMetadata(original, marker) };
    setOwn(verbatim, ids[index] as string, original);
  }
}

/** Length of reference `k`'s text. */
function textLength(found: NativeBlocks, k: number): number {
  return (found.textEnd[k] as number) - (k === 0 ? 0 : (found.textEnd[k - 1] as number));
}

function numberingOf(found: NativeBlocks, k: number): BlockNumbering | undefined {
  const first = found.numberedFirst[k] as number;
  if (first === 0xffffffff) return undefined;
  const numbered: BlockNumbering = { first, width: found.width[k] as number, separator: String.fromCharCode(found.separator[k] as number) };
  const targetFirst = found.targetNumberedFirst[k] as number;
  if (targetFirst !== 0xffffffff) numbered.targetFirst = targetFirst;
  return numbered;
}

/**
 * What a block pass reports: its totals, and its decisions and token figures on demand. The
 * native pass counts a replaced run only as far as its net-positive test needs, so the o200k
 * counts of the runs (`tokensBefore`, `tokensSaved`, `blockTokensSaved`) are taken here, all of
 * a call's runs in one batch, on the first read of either, from the texts the pass read.
 * @internal
 */
export class BlockReport {
  readonly #found: NativeBlocks;
  readonly #ids: readonly string[];
  readonly #contents: readonly string[];
  #counts: Uint32Array | undefined;
  /** References, the lines they replaced, characters saved (net). */
  readonly references: number;
  readonly lines: number;
  readonly charsSaved: number;

  /** `ids` and `contents`: every message's id and content as the pass read them (snapshots). */
  constructor(found: NativeBlocks, ids: readonly string[], contents: readonly string[]) {
    this.#found = found;
    this.#ids = ids;
    this.#contents = contents;
    // A pass run with `fullCounts` (off the JS thread) brings its counts along.
    this.#counts = found.tokensBefore;
    let lines = 0;
    let chars = 0;
    const n = found.message.length;
    for (let k = 0; k < n; k++) {
      lines += found.lineCount[k] as number;
      chars += (found.unitEnd[k] as number) - (found.unitStart[k] as number) - textLength(found, k);
    }
    this.references = n;
    this.lines = lines;
    this.charsSaved = chars;
  }

  /** Whether the run counts are known yet (reading the token figures costs nothing more). */
  get counted(): boolean {
    return this.#counts !== undefined;
  }

  #runTokens(): Uint32Array {
    if (this.#counts === undefined) {
      const f = this.#found;
      const texts = new Array<string>(f.message.length);
      for (let k = 0; k < texts.length; k++) {
        texts[k] = (this.#contents[f.message[k] as number] as string).slice(f.unitStart[k] as number, f.unitEnd[k] as number);
      }
      this.#counts = native.countBlockRuns(texts);
    }
    return this.#counts;
  }

  /** o200k tokens all references saved, net of the references. */
  tokensSaved(): number {
    const before = this.#runTokens();
    let saved = 0;
    for (let k = 0; k < before.length; k++) saved += (before[k] as number) - (this.#found.tokensAfter[k] as number);
    return saved;
  }

  /** One decision per reference, in order. */
  decisions(): BlockDecision[] {
    const f = this.#found;
    const before = this.#runTokens();
    const decisions = new Array<BlockDecision>(before.length);
    for (let k = 0; k < before.length; k++) {
      const index = f.message[k] as number;
      const target = f.target[k] as number;
      const lines = f.lineCount[k] as number;
      const from = (f.targetLine[k] as number) + 1;
      const lineStart = (f.lineStart[k] as number) + 1;
      const charsBefore = (f.unitEnd[k] as number) - (f.unitStart[k] as number);
      const charsAfter = textLength(f, k);
      const tokensBefore = before[k] as number;
      const tokensAfter = f.tokensAfter[k] as number;
      const decision: BlockDecision = {
        index,
        id: this.#ids[index] as string,
        kind: 'block',
        duplicateOfIndex: target,
        duplicateOfId: this.#ids[target] as string,
        lines: { from: lineStart, to: lineStart + lines - 1 },
        targetLines: { from, to: from + lines - 1 },
        charsBefore,
        charsAfter,
        charsSaved: charsBefore - charsAfter,
        tokensBefore,
        tokensAfter,
        tokensSaved: tokensBefore - tokensAfter,
      };
      const first = f.numberedFirst[k] as number;
      if (first !== 0xffffffff) decision.numbered = { from: first, to: first + lines - 1 };
      decisions[k] = decision;
    }
    return decisions;
  }
}

/** The prefix of a numbered line: the number right-aligned to `width`, then the separator. */
function numberPrefix(n: BlockNumbering, number: number): string {
  return String(number).padStart(n.width, ' ') + n.separator;
}

/** A message's output text as references read it: its lines and where each starts. */
interface OutputLines {
  content: string;
  lines: string[];
  /** `starts[k]`: offset of line `k`; `starts[lines.length]` is `content.length + 1`. */
  starts: number[];
}

function outputLinesOf(content: string): OutputLines {
  const lines = content.split('\n');
  const starts = new Array<number>(lines.length + 1);
  let at = 0;
  for (let k = 0; k < lines.length; k++) {
    starts[k] = at;
    at += (lines[k] as string).length + 1;
  }
  starts[lines.length] = at;
  return { content, lines, starts };
}

/** The characters {@link expandMessages} may still build (`maxChars` minus what it built). */
interface Budget {
  left: number;
  max: number;
}

function spend(budget: Budget, chars: number, at: string): void {
  budget.left -= chars;
  if (budget.left < 0) {
    rangeError(at, `expands past maxChars (${budget.max} characters in all block references); pass a larger maxChars to expand it`);
  }
}

/** Length of {@link numberPrefix}`(n, number)`, without building it. */
function numberPrefixLength(n: BlockNumbering, number: number): number {
  return Math.max(n.width, String(number).length) + n.separator.length;
}

/**
 * The characters a numbered reference expands to (its lines, their regenerated prefixes, the line
 * breaks between them), after checking the numbering fields that size them. Linear in the lines,
 * each of which adds at least one character: the work stays within the budget it is charged to.
 */
function numberedLength(n: BlockNumbering, target: OutputLines, first: number, lines: number, at: string): number {
  expectObject(n, `${at}.numbered`);
  const count = (value: unknown, field: string): void => {
    if (typeof value !== 'number') typeError(`${at}.numbered.${field}`, `must be a number, got ${describe(value)}`);
    if (!Number.isSafeInteger(value) || value < 0) rangeError(`${at}.numbered.${field}`, `must be a non-negative integer, got ${show(value)}`);
  };
  count(n.first, 'first');
  count(n.width, 'width');
  if (n.targetFirst !== undefined) count(n.targetFirst, 'targetFirst');
  if (typeof n.separator !== 'string') typeError(`${at}.numbered.separator`, `must be a string, got ${describe(n.separator)}`);
  let chars = lines - 1;
  for (let t = 0; t < lines; t++) {
    const source = (target.lines[first + t] as string).length;
    const removed = n.targetFirst === undefined ? 0 : Math.min(source, numberPrefixLength(n, n.targetFirst + t));
    chars += numberPrefixLength(n, n.first + t) + source - removed;
  }
  return chars;
}

function expandBlocks(content: string, marker: BlocksMarker, path: string, outputOf: (id: string, at: string) => OutputLines, budget: Budget): string {
  const lines = content.split('\n');
  const byLine = new Map<number, BlockReference>();
  const refs: unknown = marker.references;
  expectArray(refs, `${path}.references`);
  for (let r = 0; r < refs.length; r++) {
    const ref = refs[r] as BlockReference | undefined;
    expectObject(ref, `${path}.references[${r}]`);
    byLine.set(ref.line, ref);
  }
  // Pieces joined by line breaks: verbatim lines, and one piece per reference.
  const pieces: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const ref = byLine.get(i);
    if (ref === undefined) {
      pieces.push(lines[i] as string);
      continue;
    }
    const at = `${path}.references (line ${i})`;
    const target = outputOf(ref.target, at);
    const count = target.lines.length;
    if (!Number.isInteger(ref.from) || !Number.isInteger(ref.lines) || ref.from < 1 || ref.lines < 1 || ref.from - 1 + ref.lines > count) {
      rangeError(at, `points at lines ${show(ref.from)}+${show(ref.lines)} of ${show(ref.target)}, which has ${count}`);
    }
    const first = ref.from - 1;
    const end = first + ref.lines;
    // The target span's characters, line breaks between its lines included.
    const span = (target.starts[end] as number) - (target.starts[first] as number) - 1;
    const n = ref.numbered;
    if (n === undefined) {
      spend(budget, span, at);
      pieces.push(target.content.slice(target.starts[first], (target.starts[end] as number) - 1));
      continue;
    }
    spend(budget, numberedLength(n, target, first, ref.lines, at), at);
    const numbered = new Array<string>(ref.lines);
    for (let t = 0; t < ref.lines; t++) {
      const source = target.lines[first + t] as string;
      numbered[t] = numberPrefix(n, n.first + t) + (n.targetFirst === undefined ? source : source.slice(numberPrefix(n, n.targetFirst + t).length));
    }
    pieces.push(numbered.join('\n'));
  }
  return pieces.join('\n');
}

/** The `kind` of every replacement marker ({@link ReplacementMarker}). */
const MARKER_KINDS: ReadonlySet<unknown> = new Set(['exact', 'near', 'blocks']);

/** Options of {@link expandMessages}. */
export interface ExpandMessagesOptions {
  /**
   * Most characters (UTF-16 code units) the block references may expand to, in all: past it,
   * `expandMessages` throws a `RangeError` before building more. An output from an untrusted
   * source can name the same long span many times; this bounds what such an output costs.
   * Default 2^28 (268,435,456: 512 MiB of text). Exact duplicates share their keeper's string
   * and do not count.
   */
  maxChars?: number;
}

/** {@link ExpandMessagesOptions.maxChars} by default. */
export const DEFAULT_EXPAND_MAX_CHARS = 2 ** 28;

/**
 * Rebuilds the original conversation from a deduplicated one alone, without the verbatim map:
 * every block reference's target lines are in the output, and a whole-message exact reference
 * names a message that is in it. Near-duplicate replacements are lossy and cannot be
 * expanded: use {@link restoreMessages} with the verbatim map for those.
 *
 * @throws TypeError if `messages` is not an array of messages; RangeError if a reference names a
 *   message or lines that are not in `messages`, a message is a near-duplicate replacement, or
 *   the block references expand past `maxChars`.
 * @example
 * const { messages } = dedupeMessages(conversation, { keep: 'earliest', blocks: true });
 * expandMessages(messages); // deep-equals conversation
 */
export function expandMessages<M extends Identified>(messages: readonly M[], options?: ExpandMessagesOptions): M[] {
  expectArray(messages, 'messages');
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  expectKnownKeys(o, 'options', ['maxChars']);
  const max = optionalNumber(o['maxChars'], 'options.maxChars', DEFAULT_EXPAND_MAX_CHARS, { min: 0 });
  const budget: Budget = { left: max, max };
  const index = new Map<string, number>();
  const split = new Map<number, OutputLines>();
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    expectObject(m, `messages[${i}]`);
    if (typeof m['id'] === 'string' && !index.has(m['id'])) index.set(m['id'], i);
  }
  const outputLines = (id: string, at: string): OutputLines => {
    const i = index.get(id);
    if (i === undefined) rangeError(at, `names ${show(id)}, which is not in messages`);
    let lines = split.get(i);
    if (lines === undefined) {
      const content = (messages[i] as M).content;
      if (typeof content !== 'string') rangeError(at, `names ${show(id)}, whose content is not a string`);
      lines = outputLinesOf(content);
      split.set(i, lines);
    }
    return lines;
  };
  const expanded: M[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as M;
    const marker = (message.metadata as Record<string, unknown> | undefined)?.['ctxdedup'] as Record<string, unknown> | undefined;
    // A `ctxdedup` value that is not a marker (no known `kind`) is the caller's own metadata.
    if (typeof marker !== 'object' || marker === null || !MARKER_KINDS.has(marker['kind'])) {
      expanded.push(message);
      continue;
    }
    const path = `messages[${i}].metadata.ctxdedup`;
    let content: string;
    if (marker['kind'] === 'blocks') {
      if (typeof message.content !== 'string') typeError(`messages[${i}].content`, `must be a string, got ${describe(message.content)}`);
      content = expandBlocks(message.content, marker as unknown as BlocksMarker, path, outputLines, budget);
    } else if (marker['kind'] === 'exact') {
      const of = marker['duplicateOf'];
      if (typeof of !== 'string') typeError(`${path}.duplicateOf`, `must be a string, got ${describe(of)}`);
      const at = index.get(of);
      if (at === undefined || at >= i) rangeError(`${path}.duplicateOf`, `names ${show(of)}, which is not an earlier message`);
      content = (expanded[at] as M).content as string;
    } else {
      rangeError(
        path,
        `is a ${show(marker['kind'])} replacement, which cannot be expanded from the output (near duplicates are lossy): use restoreMessages with the verbatim map`,
      );
    }
    const { ctxdedup: _, ...metadata } = (message.metadata ?? {}) as Record<string, unknown>;
    const restored = { ...message, content } as M;
    if (marker['metadataAbsent'] === true) delete restored.metadata;
    else if (Object.hasOwn(marker, 'originalMetadata')) restored.metadata = marker['originalMetadata'] as M['metadata'];
    else restored.metadata = metadata;
    expanded.push(restored);
  }
  return expanded;
}
