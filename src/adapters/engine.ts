/**
 * The dedup engine every adapter shares: the message stage with the earliest copy kept (so a
 * conversation prefix always gives the same bytes) and block dedup on, plus the copy-on-write
 * edits that put rewritten texts back into a provider's document.
 * @internal
 * @module
 */
import { expectKnownKeys, expectOptions } from '../validation.js';
import {
  dedupeMessagesCounted,
  type DedupeMessagesOptions,
  type DedupeMessagesResult,
  type Message,
  type MessageDecision,
  type MessageDedupStats,
} from '../stages/messages.js';
import type { PathStep, Unit } from './mapping.js';
import { lazyProperty } from '../stages/blocks.js';

/** Options every adapter accepts (validated by the message stage, named `options.<name>`). */
export interface AdapterOptions {
  /**
   * Block dedup (runs of repeated lines become references): `true`, `false` or the stage's block
   * options. Default `true`, or `false` when `near` is on (the two cannot be combined).
   */
  blocks?: DedupeMessagesOptions['blocks'];
  /** Near-duplicate pass (opt-in, lossy for the model: turns blocks off). Default `false`. */
  near?: boolean;
  /** @deprecated Use `near` (the same switch; both given must be equal). */
  fuzzy?: boolean;
  /** Near-duplicate threshold in [0, 1]. Default `0.85`. */
  threshold?: number;
  /** Texts shorter than this (UTF-16 code units) are left alone. Default `200`. */
  minChars?: number;
  /** Reference tag wording of whole-text duplicates (see `DedupeMessagesOptions.reference`). */
  reference?: DedupeMessagesOptions['reference'];
}

/** Roles never rewritten (they stay sources a later reference may point at). */
const PRESERVE = ['system', 'developer'];

/** Option names passed on to the stage. */
const FORWARDED = ['near', 'fuzzy', 'threshold', 'minChars', 'reference'] as const;

/** The option names of {@link AdapterOptions}. @internal */
export const ADAPTER_OPTIONS: readonly string[] = [...FORWARDED, 'blocks'];

/**
 * The message stage as the adapters run it: keep earliest, blocks on unless turned off.
 * @throws TypeError / RangeError from the stage's option validation.
 */
export function runStage(messages: Message[], options: AdapterOptions | undefined): DedupeMessagesResult {
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  // The stage's other options (keep, recencyWindow, preserve) are fixed here: naming them is an error.
  expectKnownKeys(o, 'options', ADAPTER_OPTIONS);
  const stage: Record<string, unknown> = { preserve: PRESERVE };
  for (const name of FORWARDED) if (Object.hasOwn(o, name) && o[name] !== undefined) stage[name] = o[name];
  // Blocks are on by default; the near pass cannot be combined with them, so asking for near
  // duplicates alone turns them off (asking for both is the stage's TypeError).
  const blockOption = Object.hasOwn(o, 'blocks') && o['blocks'] !== undefined ? o['blocks'] : o['near'] !== true && o['fuzzy'] !== true;
  // Adapters report every decision (with its token figures): counted in the pass, which costs
  // less than counting them on first read.
  return dedupeMessagesCounted(messages, { ...stage, keep: 'earliest', blocks: blockOption } as DedupeMessagesOptions, true);
}

/**
 * One rewritten text: the stage's decision plus where the text and its target sit in the
 * document. The stage's `index` and `duplicateOfIndex` number the texts the adapter found, in
 * document order (not messages: a message can hold several texts); `path` and `duplicateOfPath`
 * locate them in the document, `id` and `duplicateOfId` name them as the references do.
 */
export type AdapterDecision = MessageDecision & {
  /** Where the rewritten text sits (`[3, 'content', 1, 'text']`). */
  path: PathStep[];
  /** Where the text it refers to sits. */
  duplicateOfPath: PathStep[];
};

/** Totals of one adapter call. */
export interface AdapterStats extends MessageDedupStats {
  /** Texts found (message contents, text parts and blocks, tool result texts). */
  texts: number;
  /** Texts rewritten (whole duplicates and texts with block references). */
  rewritten: number;
  /** Parts or blocks of a type the adapter does not know, passed through untouched. */
  unknown: number;
}

/** The stage run over the units of a document, and the edits it implies. */
export interface UnitsResult {
  /** Rewritten texts: unit index -> new text. */
  edits: Map<number, string>;
  /** Originals of the rewritten texts, by unit id. */
  verbatim: Record<string, string>;
  decisions: AdapterDecision[];
  stats: AdapterStats;
}

/** @deprecated Use {@link AdapterStats}. */
export type AdapterReport = AdapterStats;

/** Runs the stage over `units` and collects what changed. */
export function dedupeUnits(units: readonly Unit[], unknown: number, options: AdapterOptions | undefined): UnitsResult {
  const result = runStage(
    units.map((u) => u.message),
    options,
  );
  const edits = new Map<number, string>();
  const verbatim: Record<string, string> = {};
  units.forEach((u, i) => {
    const before = u.message.content as string;
    const after = result.messages[i]?.content;
    if (typeof after === 'string' && after !== before) {
      edits.set(i, after);
      Object.defineProperty(verbatim, u.message.id, { value: before, enumerable: true, writable: true, configurable: true });
    }
  });
  const decisions = result.decisions.map((d) => ({
    ...d,
    path: (units[d.index] as Unit).path.slice(),
    duplicateOfPath: (units[d.duplicateOfIndex] as Unit).path.slice(),
  }));
  return { edits, verbatim, decisions, stats: adapterStats(result.stats, { texts: units.length, rewritten: edits.size, unknown }) };
}

/**
 * The stage's totals and the adapter's: field by field, not a spread, because a spread reads (and
 * so counts) the token totals, which stay counted on first read.
 */
function adapterStats(s: MessageDedupStats, own: Pick<AdapterStats, 'texts' | 'rewritten' | 'unknown'>): AdapterStats {
  const stats: AdapterStats = {
    messages: s.messages,
    exactDuplicates: s.exactDuplicates,
    nearDuplicates: s.nearDuplicates,
    keptInWindow: s.keptInWindow,
    charsBefore: s.charsBefore,
    charsAfter: s.charsAfter,
    charsSaved: s.charsSaved,
    tokensSaved: 0,
    blockReferences: s.blockReferences,
    blockLines: s.blockLines,
    blockCharsSaved: s.blockCharsSaved,
    blockTokensSaved: 0,
    ...own,
  };
  for (const key of ['tokensSaved', 'blockTokensSaved'] as const) {
    if (Object.getOwnPropertyDescriptor(s, key)?.get === undefined) stats[key] = s[key];
    else lazyProperty(stats, key, () => s[key]);
  }
  return stats;
}

/** An own data property, even for a key such as `__proto__`. */
function put(node: Record<PathStep, unknown>, key: PathStep, value: unknown): void {
  Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Sets values inside a copy of `root`: every container on an edited path is copied once (arrays
 * by slice, objects by spread), everything else is shared with the input, which is never mutated.
 */
export function withEdits<T>(root: T, edits: Iterable<[PathStep[], unknown]>): T {
  const copies = new Set<unknown>();
  const copy = (value: unknown): unknown => {
    const c = Array.isArray(value) ? value.slice() : { ...(value as Record<string, unknown>) };
    copies.add(c);
    return c;
  };
  let out: unknown = root;
  for (const [path, value] of edits) {
    if (!copies.has(out)) out = copy(out);
    let node = out as Record<PathStep, unknown>;
    for (let s = 0; s < path.length - 1; s++) {
      const step = path[s] as PathStep;
      let child = node[step];
      if (!copies.has(child)) {
        child = copy(child);
        put(node, step, child);
      }
      node = child as Record<PathStep, unknown>;
    }
    put(node, path[path.length - 1] as PathStep, value);
  }
  return out as T;
}
