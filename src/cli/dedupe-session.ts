/**
 * What `ctxdedup dedupe` does with one session, wherever it runs (a worker thread or the main
 * thread): the message stage, the edits, content keys and the verbatim entries. The main thread
 * adds them up in input order and counts tokens (one tokenizer, cached by content key).
 * Cross-session dedup needs the whole run's history, so sessions only report their candidates
 * here; the main thread decides (see dedupe.ts).
 * @module
 */
import { native } from '../native.js';
import {
  analysisInput,
  analyzePacked,
  annotations,
  inRecencyWindow,
  recencyStartOf,
  SUMMARY_PREFIXES,
  unpack,
  utf16,
  type Annotation,
} from '../stages/message-analysis.js';
import {
  ASYNC_MIN_UNITS,
  DEFAULT_TEMPLATES,
  dedupeMessages,
  dedupeMessagesAsync,
  type DedupeMessagesOptions,
  type Message,
  type ReferenceInfo,
} from '../stages/messages.js';
import type { FormatName, PathStep } from './formats.js';
import type { Handled, JobScope, Session, SessionHandler } from './jobs.js';
import { describeReplacement, KeyCache, type Replaced } from './report.js';
import type { StringEdit } from './splice.js';

/** One replacement an engine decided. */
export interface EngineDecision {
  /** Index of the replaced message. */
  index: number;
  kind: 'exact' | 'near' | 'block';
  /** The reference tag that replaces it (`block`: the message's new content, references inside). */
  tag: string;
  /** Its length minus the tag's. */
  charsSaved: number;
}

/** What an engine decided for one session, decisions in message order. */
export interface EngineResult {
  decisions: EngineDecision[];
  exact: number;
  near: number;
  /** Duplicates left in full because they sit in the recency window. */
  keptInWindow: number;
  /** Block references written, and the characters they saved (net). */
  blocks?: number;
  blockCharsSaved?: number;
}

/** The per-session dedup function: the native analysis by default (a benchmark may swap in a reference). */
export type DedupeEngine = (messages: Message[], options: DedupeMessagesOptions) => Promise<EngineResult>;

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
  /** Contents replaced by this session's own dedup. */
  replaced: number;
  charsSaved: number;
  /** One per replaced content, in edit order (tokens are counted on the main thread). */
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

/**
 * The message stage's decisions through the public API (`dedupeMessagesAsync`): the reference
 * the CLI's own {@link nativeEngine} is tested against.
 */
export const stageEngine: DedupeEngine = async (messages, options) => {
  const r = await dedupeMessagesAsync(messages, options);
  // Block decisions come one per run: a message is one edit (its new content), saving their sum.
  const decisions: EngineDecision[] = [];
  for (const d of r.decisions) {
    const last = decisions[decisions.length - 1];
    if (last !== undefined && last.index === d.index) last.charsSaved += d.charsSaved;
    else decisions.push({ index: d.index, kind: d.kind, tag: r.messages[d.index]?.content as string, charsSaved: d.charsSaved });
  }
  return {
    decisions,
    exact: r.stats.exactDuplicates,
    near: r.stats.nearDuplicates,
    keptInWindow: r.stats.keptInWindow,
    blocks: r.stats.blockReferences,
    blockCharsSaved: r.stats.blockCharsSaved,
  };
};

/**
 * The stage's default tag templates, cut at their placeholders once: filling them is then a
 * concatenation (the stage's regex replace showed in profiles at thousands of tags a second).
 */
const TAG_PARTS = {
  exact: DEFAULT_TEMPLATES.exact.split(/\{(id|keepId|chars|percent)\}/),
  near: DEFAULT_TEMPLATES.near.split(/\{(id|keepId|chars|percent)\}/),
};

/** A reference tag in the stage's default wording (its `{id}`, `{keepId}`, `{chars}`, `{percent}` fill). */
function defaultTag(info: ReferenceInfo): string {
  const parts = TAG_PARTS[info.kind];
  let tag = parts[0] as string;
  for (let i = 1; i < parts.length; i += 2) {
    const key = parts[i];
    const value =
      key === 'id'
        ? info.id
        : key === 'keepId'
          ? info.keepId
          : key === 'chars'
            ? String(info.chars)
            : String(info.similarity === undefined ? 100 : Math.round(info.similarity * 100));
    tag += value + (parts[i + 1] as string);
  }
  return tag;
}

/**
 * The default engine: the same native analysis and rules as `dedupeMessagesAsync` (on the
 * message-analysis bridge the stage and `ctxdedup/cce` share), minus what the CLI never reads:
 * per-call validation (the options are validated once, see {@link validateSettings}), the
 * rewritten conversation and the verbatim map. For sessions of a few KB that bookkeeping cost
 * more than the analysis; test/unit/cli-jobs.test.ts checks the result equals {@link stageEngine}'s.
 */
export function nativeEngine(settings: DedupeSettings): DedupeEngine {
  const preserve = new Set<unknown>(settings.preserve);
  const skipPrefixes = utf16(SUMMARY_PREFIXES);
  // The block pass needs every text (short messages are sources too) and the stage's result.
  if (settings.blocks) return stageEngine;
  return async (messages) => {
    const { contents, lengths, units, blocked } = analysisInput(messages, preserve, settings.minChars);
    const recencyStart = recencyStartOf(messages.length, settings.recencyWindow);
    const options = {
      minChars: settings.minChars,
      skipPrefixes,
      keep: settings.keep,
      recencyStart,
      exact: true,
      fuzzyThreshold: settings.fuzzy ? settings.threshold : undefined,
    };
    const { exact, fuzzy } =
      units <= ASYNC_MIN_UNITS
        ? unpack(analyzePacked(contents, lengths, blocked, options))
        : annotations(await native.analyzeMessagesAsync(contents, lengths, blocked, new Uint8Array(0), options));
    const out: EngineResult = { decisions: [], exact: 0, near: 0, keptInWindow: 0, blocks: 0, blockCharsSaved: 0 };
    const decide = (a: Annotation, kind: 'exact' | 'near'): void => {
      if (inRecencyWindow(a.index, settings.recencyWindow, recencyStart)) {
        out.keptInWindow++;
        return;
      }
      const info: ReferenceInfo = { kind, id: (messages[a.index] as Message).id, keepId: (messages[a.duplicateOfIndex] as Message).id, chars: a.contentLength };
      if (a.similarity !== undefined) info.similarity = a.similarity;
      const tag = defaultTag(info);
      out.decisions.push({ index: a.index, kind, tag, charsSaved: (contents[a.index] as string).length - tag.length });
      if (kind === 'exact') out.exact++;
      else out.near++;
    };
    for (const a of exact) decide(a, 'exact');
    for (const a of fuzzy) decide(a, 'near');
    out.decisions.sort((x, y) => x.index - y.index);
    return out;
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
  if (moduleUrl === undefined) return nativeEngine(settings);
  const mod = (await import(moduleUrl)) as { engine?: unknown };
  if (typeof mod.engine !== 'function') throw new TypeError(`${moduleUrl} does not export an engine function`);
  return mod.engine as DedupeEngine;
}

/** The dedupe {@link SessionHandler}. */
export function dedupeHandler(settings: DedupeSettings, engine: DedupeEngine): SessionHandler<DedupeOutcome> {
  const options = stageOptions(settings);
  const preserved = new Set(settings.preserve);
  const keys = new KeyCache();
  // Texts the stage would skip anyway (too short, preserved role, tool calls) cross the native
  // boundary as '' so they are not copied there; decisions and tags are unchanged.
  const slim = (m: Message): Message => {
    const content = m.content as string;
    // Blocks: a short message can still be the target of a reference.
    if (settings.blocks) return m;
    if (content.length === 0 || (content.length >= settings.minChars && m.tool_calls === undefined && !(typeof m.role === 'string' && preserved.has(m.role))))
      return m;
    return { ...m, content: '' };
  };

  return {
    async handle(session: Session, job: JobScope): Promise<Handled<DedupeOutcome>> {
      const memo = (job.memo['replaced'] ??= new Map<string, true>()) as Map<string, true>;
      const { units } = session;
      const result = await engine(
        units.map((u) => slim(u.message)),
        options,
      );
      const edits: StringEdit[] = [];
      const replacements: Replaced[] = [];
      const verbatim: string[] = [];
      let charsSaved = 0;
      const replacedIdx = new Set<number>();
      for (const d of result.decisions) {
        const unit = units[d.index];
        if (unit === undefined) continue;
        const before = unit.message.content as string;
        replacedIdx.add(d.index);
        edits.push({ path: unit.path, value: d.tag });
        charsSaved += d.charsSaved;
        replacements.push(describeReplacement(before, d.tag, memo, keys));
        if (settings.verbatim) verbatim.push(JSON.stringify({ path: unit.path, original: before, tag: d.tag }));
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
        exact: result.exact,
        near: result.near,
        keptInWindow: result.keptInWindow,
        blocks: result.blocks ?? 0,
        blockCharsSaved: result.blockCharsSaved ?? 0,
        replaced: edits.length,
        charsSaved,
        replacements,
      };
      if (settings.verbatim && verbatim.length > 0) outcome.verbatim = verbatim.join(',');
      const handled: Handled<DedupeOutcome> = { edits, outcome };
      if (settings.crossSession && !preserved.has('tool')) {
        const cross: CrossCandidate[] = [];
        const windowStart = settings.recencyWindow > 0 ? units.length - settings.recencyWindow : units.length;
        units.forEach((unit, i) => {
          const m = unit.message;
          const content = m.content as string;
          if (replacedIdx.has(i) || m.role !== 'tool' || m.tool_calls !== undefined) return;
          if (content.length < settings.minChars || content.length === 0) return;
          cross.push({ key: keys.key(content), where: `${session.name}#${m.id}`, chars: content.length, inWindow: i >= windowStart, path: unit.path });
        });
        outcome.cross = cross;
        handled.locate = cross.map((c) => c.path);
      }
      return handled;
    },
  };
}
