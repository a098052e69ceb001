/**
 * What `ctxdedup dedupe` does with one session, wherever it runs (a worker thread or the main
 * thread): the message stage, the edits, content keys and the verbatim entries. The main thread
 * adds them up in input order and counts tokens (one tokenizer, cached by content key).
 * Cross-session dedup needs the whole run's history, so sessions only report their candidates
 * here; the main thread decides (see dedupe.ts).
 * @module
 */
import { analysisInput, analyze, decide, inRecencyWindow, recencyStartOf, referenceTag, SUMMARY_PREFIXES, utf16 } from '../stages/message-analysis.js';
import {
  DEFAULT_TEMPLATES,
  dedupeMessages,
  dedupeMessagesAsyncCounted,
  dedupeMessagesCounted,
  type DedupeMessagesOptions,
  type DedupeMessagesResult,
  type Message,
  type MessageDedupStats,
} from '../stages/messages.js';
import { isMainThread } from 'node:worker_threads';
import type { TokenEncoding } from '../tokens.js';
import type { FormatName, PathStep } from './formats.js';
import type { Handled, Session, SessionHandler } from './jobs.js';
import { type Replaced, ReplacementMeter } from './report.js';
import type { SharedCounts } from './shared-counts.js';
import type { StringEdit } from './splice.js';

/**
 * What the message stage decided for one session: the texts it rewrote, in message order (a
 * whole-message reference tag, or with blocks the message's new content), and the stage's totals.
 * A message rewritten by the block pass carries `blockTokensSaved`, the sum of its runs' token
 * savings as the stage counted them (the report takes them as they are: such a message is not a
 * repeated content, and counting it whole again would double the tokenizer's work).
 */
export interface SessionDecisions {
  rewritten: { index: number; content: string; charsSaved: number; blockTokensSaved?: number }[];
  /**
   * Indexes of the messages a rewrite refers to (a tag's kept copy, a block reference's source
   * message), ascending: they must stay as they are, so cross-session dedup leaves them alone.
   */
  targets: number[];
  stats: Pick<MessageDedupStats, 'exactDuplicates' | 'nearDuplicates' | 'keptInWindow' | 'blockReferences' | 'blockCharsSaved'>;
}

/** The per-session dedup function: the message stage by default (a benchmark may swap in a reference). */
export type DedupeEngine = (messages: Message[], options: DedupeMessagesOptions) => Promise<SessionDecisions>;

/** Settings of the per-session work: plain data, so they can be sent to a worker thread. */
export interface DedupeSettings {
  keep: 'latest' | 'earliest';
  fuzzy: boolean;
  threshold: number;
  minChars: number;
  recencyWindow: number;
  preserve: string[];
  crossSession: boolean;
  /** Also replace repeated line runs inside messages (needs `keep: 'earliest'`). */
  blocks: boolean;
  /** Collect the originals for the verbatim file. */
  verbatim: boolean;
  /** Encoding the report counts tokens with (counted where the session is deduplicated). */
  tokenizer: TokenEncoding;
}

/** A tool output that cross-session dedup may replace (the main thread decides, in input order). */
export interface CrossCandidate {
  /** Content key of the content (`contentKey` in report.ts). */
  key: string;
  /** `session#id`: what a later copy's tag points at. */
  where: string;
  chars: number;
  /** In the recency window: registered, never replaced. */
  inWindow: boolean;
  path: PathStep[];
}

/** Everything the report and the verbatim file need from one session. */
export interface DedupeOutcome {
  name: string;
  line: number | undefined;
  format: FormatName;
  messages: number;
  contents: number;
  charsBefore: number;
  exact: number;
  near: number;
  keptInWindow: number;
  blocks: number;
  blockCharsSaved: number;
  /** Tokens the block references saved, net (the stage's per-run figures, summed). */
  blockTokensSaved: number;
  /** Contents replaced by this session's own dedup. */
  replaced: number;
  charsSaved: number;
  /** One per content replaced whole (a reference tag), in edit order, measured. */
  replacements: Replaced[];
  /** The verbatim file's edit entries of this session, JSON, comma-separated (with `verbatim`). */
  verbatim?: string;
  /** With `crossSession`: candidates, in unit order; their output spans come with the session. */
  cross?: CrossCandidate[];
}

/** Stage options of the settings. */
export function stageOptions(s: DedupeSettings): DedupeMessagesOptions {
  return { keep: s.keep, near: s.fuzzy, threshold: s.threshold, minChars: s.minChars, recencyWindow: s.recencyWindow, preserve: s.preserve, blocks: s.blocks };
}

/** A stage result as the CLI reads it: block decisions come one per run, a message is one rewrite. */
function rewrites(r: DedupeMessagesResult): SessionDecisions {
  const rewritten: SessionDecisions['rewritten'] = [];
  const targets = new Set<number>();
  for (const d of r.decisions) {
    targets.add(d.duplicateOfIndex);
    const last = rewritten[rewritten.length - 1];
    if (last !== undefined && last.index === d.index) {
      last.charsSaved += d.charsSaved;
      if (d.kind === 'block') last.blockTokensSaved = (last.blockTokensSaved ?? 0) + d.tokensSaved;
    } else {
      const rewrite: SessionDecisions['rewritten'][number] = { index: d.index, content: r.messages[d.index]?.content as string, charsSaved: d.charsSaved };
      if (d.kind === 'block') rewrite.blockTokensSaved = d.tokensSaved;
      rewritten.push(rewrite);
    }
  }
  // The fields the CLI reads, not the whole object: `tokensSaved` is counted when read (the CLI
  // counts with its own tokenizer), and a worker's result is copied field by field.
  const { exactDuplicates, nearDuplicates, keptInWindow, blockReferences, blockCharsSaved } = r.stats;
  return { rewritten, targets: sortedIndexes(targets), stats: { exactDuplicates, nearDuplicates, keptInWindow, blockReferences, blockCharsSaved } };
}

/** The indexes of `set`, ascending. */
export function sortedIndexes(set: ReadonlySet<number>): number[] {
  return [...set].sort((a, b) => a - b);
}

/**
 * The message stage (`dedupeMessagesAsync`, counting block runs in the pass: the report reads them all): what the CLI runs with
 * blocks, and the reference its lean path is tested against.
 */
export const stageEngine: DedupeEngine = async (messages, options) => rewrites(await dedupeMessagesAsyncCounted(messages, options, true, false));

/** {@link stageEngine} on the calling thread: a worker thread has nothing else to do meanwhile. */
const stageEngineInline: DedupeEngine = async (messages, options) => rewrites(dedupeMessagesCounted(messages, options, true));

/**
 * The default engine: the stage's own decision path (src/stages/message-analysis.ts: eligibility,
 * native analysis, recency window, default tags, decisions) minus what the CLI never reads: the
 * per-call validation (the options are validated once, see {@link validateSettings}), the
 * rewritten message objects and the verbatim map. With blocks, the stage itself. For sessions of
 * a few KB that bookkeeping costs more than the analysis; test/unit/cli-jobs.test.ts checks the
 * result equals {@link stageEngine}'s.
 */
export function defaultEngine(settings: DedupeSettings): DedupeEngine {
  // On the main thread (`--jobs 1`) large sessions are analysed on a libuv thread so reading and
  // writing go on; a worker thread has nothing else to do and skips the copy that needs.
  const inline = !isMainThread;
  if (settings.blocks) return inline ? stageEngineInline : stageEngine;
  const preserve = new Set<unknown>(settings.preserve);
  const skipPrefixes = utf16(SUMMARY_PREFIXES);
  const tag = referenceTag(DEFAULT_TEMPLATES);
  return async (messages) => {
    const input = analysisInput(messages, preserve, settings.minChars);
    const window = { recencyWindow: settings.recencyWindow, recencyStart: recencyStartOf(messages.length, settings.recencyWindow) };
    const found = await analyze(input, inline, {
      minChars: settings.minChars,
      skipPrefixes,
      keep: settings.keep,
      recencyStart: window.recencyStart,
      exact: true,
      fuzzyThreshold: settings.fuzzy ? settings.threshold : undefined,
    });
    // As dedupeMessages: keep 'earliest' tags a duplicate only when the tag is shorter.
    const netPositive = settings.keep === 'earliest' ? input.contents : undefined;
    const plan = decide(found, (i) => (messages[i] as Message).id, input.lengths, window, tag, netPositive, true);
    return {
      rewritten: plan.replacements.map((r) => ({ index: r.index, content: r.tag, charsSaved: r.charsSaved })),
      targets: sortedIndexes(new Set(plan.replacements.map((r) => r.duplicateOfIndex))),
      stats: { exactDuplicates: plan.exact, nearDuplicates: plan.near, keptInWindow: plan.keptInWindow, blockReferences: 0, blockCharsSaved: 0 },
    };
  };
}

/**
 * Validates the stage options once, with the stage's own rules (ranges, types).
 * @throws RangeError or TypeError naming the option
 */
export function validateSettings(settings: DedupeSettings): void {
  dedupeMessages([], stageOptions(settings));
}

/** Loads the engine a module exports as `engine` (how workers get a non-default engine). */
export async function loadEngine(settings: DedupeSettings, moduleUrl: string | undefined): Promise<DedupeEngine> {
  if (moduleUrl === undefined) return defaultEngine(settings);
  const mod = (await import(moduleUrl)) as { engine?: unknown };
  if (typeof mod.engine !== 'function') throw new TypeError(`${moduleUrl} does not export an engine function`);
  return mod.engine as DedupeEngine;
}

/** Version of the verbatim file format `dedupe` writes and `restore` reads. */
export const VERBATIM_VERSION = 1;

/**
 * One edit of the verbatim file: where, the original, the tag written, and the original's JSON
 * literal as the input wrote it when `JSON.stringify` would write it otherwise (so `restore` gives
 * the bytes back, not only the value).
 */
export function verbatimEntry(path: readonly PathStep[], original: string, tag: string, literal: string | undefined): string {
  return JSON.stringify(literal === undefined || literal === JSON.stringify(original) ? { path, original, tag } : { path, original, tag, raw: literal });
}

/** The dedupe {@link SessionHandler}. */
export function dedupeHandler(settings: DedupeSettings, engine: DedupeEngine, counts?: SharedCounts): SessionHandler<DedupeOutcome> {
  const options = stageOptions(settings);
  const preserved = new Set(settings.preserve);
  // The report's measurements happen here, next to the texts: only numbers leave the session.
  const meter = new ReplacementMeter(settings.tokenizer, counts);

  return {
    async handle(session: Session): Promise<Handled<DedupeOutcome>> {
      const { units } = session;
      const result = await engine(
        units.map((u) => u.message),
        options,
      );
      const edits: StringEdit[] = [];
      const replacements: Replaced[] = [];
      const verbatim: string[] = [];
      /** The original of each edit. */
      const originals: string[] = [];
      let charsSaved = 0;
      let blockTokensSaved = 0;
      const replacedIdx = new Set<number>();
      for (const d of result.rewritten) {
        const unit = units[d.index];
        if (unit === undefined) continue;
        const before = unit.message.content as string;
        replacedIdx.add(d.index);
        edits.push({ path: unit.path, value: d.content });
        originals.push(before);
        charsSaved += d.charsSaved;
        if (d.blockTokensSaved === undefined) replacements.push(meter.measure(before, d.content));
        else blockTokensSaved += d.blockTokensSaved;
      }
      if (settings.verbatim && edits.length > 0) {
        // A string the input writes unlike JSON.stringify (`\u00e9`, `\/`) keeps its exact literal.
        const literals = session.literals(edits.map((e) => e.path));
        edits.forEach((e, k) => {
          verbatim.push(verbatimEntry(e.path, originals[k] as string, e.value, literals[k]));
        });
      }
      let charsBefore = 0;
      for (const u of units) charsBefore += (u.message.content as string).length;
      const outcome: DedupeOutcome = {
        name: session.name,
        line: session.line,
        format: session.format,
        messages: session.messages,
        contents: units.length,
        charsBefore,
        exact: result.stats.exactDuplicates,
        near: result.stats.nearDuplicates,
        keptInWindow: result.stats.keptInWindow,
        blocks: result.stats.blockReferences,
        blockCharsSaved: result.stats.blockCharsSaved,
        blockTokensSaved,
        replaced: edits.length,
        charsSaved,
        replacements,
      };
      if (settings.verbatim && verbatim.length > 0) outcome.verbatim = verbatim.join(',');
      const handled: Handled<DedupeOutcome> = { edits, outcome };
      if (settings.crossSession && !preserved.has('tool')) {
        const cross: CrossCandidate[] = [];
        const targets = new Set(result.targets);
        const recencyStart = recencyStartOf(units.length, settings.recencyWindow);
        // The stage's eligibility rule (length, role, tool calls), for tool outputs only.
        const { blocked } = analysisInput(
          units.map((u) => u.message),
          preserved,
          settings.minChars,
        );
        units.forEach((unit, i) => {
          const m = unit.message;
          const content = m.content as string;
          // A message the session's own references point at stays as it is (else they would
          // chain, or point at lines no longer there).
          if (replacedIdx.has(i) || targets.has(i) || blocked[i] === 1 || m.role !== 'tool' || content.length === 0) return;
          cross.push({
            key: meter.key(content),
            where: `${session.name}#${m.id}`,
            chars: content.length,
            inWindow: inRecencyWindow(i, settings.recencyWindow, recencyStart),
            path: unit.path,
          });
        });
        outcome.cross = cross;
        handled.locate = cross.map((c) => c.path);
      }
      return handled;
    },
  };
}
