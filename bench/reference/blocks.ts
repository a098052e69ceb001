/**
 * A plain-JS baseline of `dedupeMessages(messages, { keep: 'earliest', blocks: true })`: the
 * whole-message exact pass (keep earliest), then block dedup with the rules of
 * crates/ctxdedup-core/src/blocks.rs (its module doc), default options and templates.
 *
 * Written the way a careful engineer would without ctxdedup, and without copying the Rust code's
 * structure where JS has a better tool:
 * - every line's comparison text is interned to a small integer id (one `Map` lookup per line on
 *   a substring), so lines compare as numbers and no line is copied;
 * - every window of `MIN_LINES` consecutive verbatim lines is indexed by a string key of its line
 *   ids (exact, so no hash collisions to confirm), keeping its earliest and most recent occurrence,
 *   like the native pass;
 * - a scan position extends each candidate line by line and takes the longest run; a run that
 *   is long enough but not net positive stays verbatim as a whole, and so does a run too short to
 *   replace once the message's retry budget of line comparisons is spent; tokens (o200k_base) are
 *   counted only for runs that reach the net-positive test.
 * It produces the same messages, verbatim map and decisions as the native call (the bench
 * checks that before timing), so both sides do the same work.
 * @module
 */

/** The parts of a message the rules read. */
export interface RefBlockMessage {
  id: string;
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
  metadata?: Record<string, unknown>;
  [field: string]: unknown;
}

/** Counts the o200k_base tokens of a text. */
export type RefTokenCounter = (text: string) => number;

/** What the baseline returns: the shapes of `dedupeMessages`'s messages, verbatim and decisions. */
export interface RefBlocksResult<M extends RefBlockMessage> {
  messages: M[];
  verbatim: Record<string, M>;
  decisions: Array<Record<string, unknown>>;
}

const SKIP_PREFIXES = ['[summary:', '[summary#', '[truncated'];
const MESSAGE_MIN_CHARS = 200;
const MIN_LINES = 4;
const MIN_CHARS = 200;
const NONE = -1;
/**
 * Line comparisons a message may spend on candidate runs before a run too short to replace stops
 * being retried from the next line (then it stays verbatim whole), as natively: 64 per line
 * plus 2^16.
 */
const RETRY_BUDGET_PER_LINE = 64;
const RETRY_BUDGET_BASE = 1 << 16;
/** A line-number prefix: at most 16 spaces, at most 9 digits (no leading zero), a separator. */
const MAX_PAD = 16;
const MAX_DIGITS = 9;
const TAB = 9;
const ARROW = 0x2192;
const PIPE = 124;
const COLON = 58;

/** One line of a message: where it is, its number prefix, and interned ids. */
interface Lines {
  start: Int32Array;
  end: Int32Array;
  /** Start of the text after the number prefix (`start` when unnumbered). */
  rest: Int32Array;
  /** Line number, or NONE. */
  number: Float64Array;
  /** `width << 16 | separator` of a numbered line, 0 otherwise. */
  format: Int32Array;
  /** Id of (format, text after the prefix): what windows are made of. */
  key: Int32Array;
  /** Id of the text after the prefix as an unnumbered line's text. */
  restId: Int32Array;
  count: number;
}

interface Processed {
  lines: Lines;
  /** Output line of each input line, or NONE when replaced. */
  outLine: Int32Array;
}

interface Ref {
  message: number;
  lineStart: number;
  lineCount: number;
  unitStart: number;
  unitEnd: number;
  outLine: number;
  target: number;
  targetLine: number;
  /** Numbering of the replaced lines, when regenerated. */
  first: number;
  targetFirst: number;
  width: number;
  separator: number;
  tokensBefore: number;
  tokensAfter: number;
  text: string;
}

const PLAIN = 0;
const NUMBERED = 1;
const RENUMBERED = 2;

/** Earliest and most recent occurrence of a window: `[message, line, message, line]`, length 2 or 4. */
type Candidates = number[];

class BlockPass {
  private readonly texts = new Map<string, number>();
  private readonly numbered = new Map<number, number>();
  private nextId = 0;
  private readonly index = new Map<string, Candidates>();
  private readonly done: Array<Processed | undefined>;

  constructor(
    private readonly contents: readonly string[],
    private readonly ids: readonly string[],
    private readonly eligible: Uint8Array,
    private readonly countTokens: RefTokenCounter,
  ) {
    this.done = new Array<Processed | undefined>(contents.length);
  }

  private textId(text: string): number {
    let id = this.texts.get(text);
    if (id === undefined) {
      id = this.nextId++;
      this.texts.set(text, id);
    }
    return id;
  }

  private linesOf(m: number): Lines {
    const text = this.contents[m] as string;
    let count = 1;
    for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count++;
    const lines: Lines = {
      start: new Int32Array(count),
      end: new Int32Array(count),
      rest: new Int32Array(count),
      number: new Float64Array(count),
      format: new Int32Array(count),
      key: new Int32Array(count),
      restId: new Int32Array(count),
      count,
    };
    let start = 0;
    for (let i = 0; i < count; i++) {
      let end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      lines.start[i] = start;
      lines.end[i] = end;
      // Line-number prefix: spaces, digits, separator.
      let p = start;
      while (p < end && p - start <= MAX_PAD && text.charCodeAt(p) === 32) p++;
      const pad = p - start;
      let number = NONE;
      let format = 0;
      let rest = start;
      if (pad <= MAX_PAD) {
        const digitsAt = p;
        let n = 0;
        while (p < end && p - digitsAt <= MAX_DIGITS) {
          const c = text.charCodeAt(p);
          if (c < 48 || c > 57) break;
          n = n * 10 + (c - 48);
          p++;
        }
        const digits = p - digitsAt;
        if (digits > 0 && digits <= MAX_DIGITS && !(digits > 1 && text.charCodeAt(digitsAt) === 48) && p < end) {
          const sep = text.charCodeAt(p);
          if (sep === TAB || sep === ARROW || sep === PIPE || sep === COLON) {
            number = n;
            format = ((pad === 0 ? 0 : pad + digits) << 16) | sep;
            rest = p + 1;
          }
        }
      }
      lines.number[i] = number;
      lines.format[i] = format;
      lines.rest[i] = rest;
      const restId = this.textId(text.slice(rest, end));
      lines.restId[i] = restId;
      if (format === 0) lines.key[i] = restId;
      else {
        // (text id, format) as one number: format < 2^21, ids < 2^31.
        const pair = restId * 2_097_152 + format;
        let id = this.numbered.get(pair);
        if (id === undefined) {
          id = this.nextId++;
          this.numbered.set(pair, id);
        }
        lines.key[i] = id;
      }
      start = end + 1;
    }
    return lines;
  }

  /** String keys of every window of MIN_LINES lines, from `ids`. */
  private static windows(ids: Int32Array, count: number): string[] {
    const out: string[] = [];
    for (let i = 0; i + MIN_LINES <= count; i++) {
      let key = String(ids[i]);
      for (let t = 1; t < MIN_LINES; t++) key += `,${ids[i + t] as number}`;
      out.push(key);
    }
    return out;
  }

  private extend(m: number, lines: Lines, i: number, target: number, j: number, own: Int32Array, mode: number): number {
    const done = this.done[target];
    const tl = done === undefined ? lines : done.lines;
    const tout = done === undefined ? own : done.outLine;
    const firstFormat = lines.format[i] as number;
    const firstNumber = lines.number[i] as number;
    const targetNumber = tl.number[j] as number;
    if (mode === NUMBERED && (firstNumber === NONE || firstFormat !== tl.format[j])) return 0;
    if (mode === RENUMBERED && firstNumber === NONE) return 0;
    const text = this.contents[m] as string;
    const ttext = this.contents[target] as string;
    let t = 0;
    while (i + t < lines.count && j + t < tl.count && tout[j + t] !== NONE) {
      const a = i + t;
      const b = j + t;
      let same: boolean;
      if (mode === PLAIN) {
        // Equal whole lines: the same prefix (or none) and the same text after it.
        same = lines.key[a] === tl.key[b] && lines.number[a] === tl.number[b];
      } else if (mode === NUMBERED) {
        same =
          lines.format[a] === firstFormat &&
          tl.format[b] === firstFormat &&
          lines.number[a] === firstNumber + t &&
          tl.number[b] === targetNumber + t &&
          lines.restId[a] === tl.restId[b];
      } else {
        same = lines.format[a] === firstFormat && lines.number[a] === firstNumber + t;
        if (same) {
          // The target line as a whole: its id when unnumbered, its text otherwise (rare).
          same =
            tl.format[b] === 0
              ? lines.restId[a] === tl.key[b]
              : text.slice(lines.rest[a] as number, lines.end[a] as number) === ttext.slice(tl.start[b] as number, tl.end[b] as number);
        }
      }
      if (!same) break;
      t++;
    }
    return t;
  }

  private insertWindow(m: number, line: number, key: string): void {
    const c = this.index.get(key);
    if (c === undefined) this.index.set(key, [m, line]);
    else if (c.length === 2) c.push(m, line);
    else {
      c[2] = m;
      c[3] = line;
    }
  }

  process(m: number, refs: Ref[]): void {
    const lines = this.linesOf(m);
    const n = lines.count;
    const windows = BlockPass.windows(lines.key, n);
    const eligible = this.eligible[m] === 1;
    let renumber: string[] | undefined;
    if (eligible && lines.format.some((f) => f !== 0)) renumber = BlockPass.windows(lines.restId, n);
    const outLine = new Int32Array(n).fill(NONE);
    let i = 0;
    let out = 0;
    let segment = 0;
    let spent = 0;
    const budget = RETRY_BUDGET_PER_LINE * n + RETRY_BUDGET_BASE;
    while (i < n) {
      let verbatim = 1;
      if (eligible && i + MIN_LINES <= n) {
        let bestLen = -1;
        let bestTarget = 0;
        let bestJ = 0;
        let bestMode = PLAIN;
        const plain = this.index.get(windows[i] as string);
        if (plain !== undefined) {
          for (let c = 0; c < plain.length; c += 2) {
            for (const mode of [PLAIN, NUMBERED]) {
              const len = this.extend(m, lines, i, plain[c] as number, plain[c + 1] as number, outLine, mode);
              spent += len + 1;
              if (len > bestLen) [bestLen, bestTarget, bestJ, bestMode] = [len, plain[c] as number, plain[c + 1] as number, mode];
            }
          }
        }
        const rw = renumber?.[i];
        const again = rw !== undefined && rw !== windows[i] ? this.index.get(rw) : undefined;
        if (again !== undefined) {
          for (let c = 0; c < again.length; c += 2) {
            const len = this.extend(m, lines, i, again[c] as number, again[c + 1] as number, outLine, RENUMBERED);
            spent += len + 1;
            if (len > bestLen) [bestLen, bestTarget, bestJ, bestMode] = [len, again[c] as number, again[c + 1] as number, RENUMBERED];
          }
        }
        // Past the budget, a run too short to replace stays verbatim whole (no retry per line).
        if (bestLen >= 0 && spent > budget) verbatim = Math.max(bestLen, 1);
        if (bestLen >= MIN_LINES) {
          const outcome = this.reference(m, lines, outLine, i, bestLen, bestTarget, bestJ, bestMode, out);
          if (typeof outcome !== 'string') {
            refs.push(outcome);
            i += bestLen;
            out++;
            segment = i;
            continue;
          }
          if (outcome === 'not shorter') verbatim = bestLen;
        }
      }
      for (let v = 0; v < verbatim; v++) {
        outLine[i] = out++;
        i++;
        if (i - segment >= MIN_LINES) this.insertWindow(m, i - MIN_LINES, windows[i - MIN_LINES] as string);
      }
    }
    this.done[m] = { lines, outLine };
  }

  private reference(
    m: number,
    lines: Lines,
    own: Int32Array,
    i: number,
    len: number,
    target: number,
    j: number,
    mode: number,
    out: number,
  ): Ref | 'short' | 'not shorter' {
    const done = this.done[target];
    const tl = done === undefined ? lines : done.lines;
    const tout = done === undefined ? own : done.outLine;
    const targetLine = tout[j] as number;
    const unitStart = lines.start[i] as number;
    const unitEnd = lines.end[i + len - 1] as number;
    if (unitEnd - unitStart < MIN_CHARS) return 'short';
    const numbered = mode === RENUMBERED || (mode === NUMBERED && lines.number[i] !== tl.number[j]);
    const id = this.ids[target] as string;
    const from = targetLine + 1;
    const first = lines.number[i] as number;
    const text = numbered
      ? `[ctxdedup: ${len} lines unchanged, = ${id} lines ${from}–${from + len - 1}, numbered ${first}–${first + len - 1} here]`
      : `[ctxdedup: ${len} lines unchanged, = ${id} lines ${from}–${from + len - 1}]`;
    if (text.includes('\n') || text.length >= unitEnd - unitStart) return 'not shorter';
    const tokensAfter = this.countTokens(text);
    const tokensBefore = this.countTokens((this.contents[m] as string).slice(unitStart, unitEnd));
    if (tokensAfter >= tokensBefore) return 'not shorter';
    const format = lines.format[i] as number;
    return {
      message: m,
      lineStart: i,
      lineCount: len,
      unitStart,
      unitEnd,
      outLine: out,
      target,
      targetLine,
      first: numbered ? first : NONE,
      targetFirst: numbered && mode === NUMBERED ? (tl.number[j] as number) : NONE,
      width: format >>> 16,
      separator: format & 0xffff,
      tokensBefore,
      tokensAfter,
      text,
    };
  }
}

function eligibleForDedup(m: RefBlockMessage): boolean {
  const content = m.content;
  if (typeof content !== 'string' || content.length < MESSAGE_MIN_CHARS) return false;
  if (m.role && m.role === 'system') return false;
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) return false;
  return !SKIP_PREFIXES.some((p) => content.startsWith(p));
}

/**
 * `dedupeMessages(messages, { keep: 'earliest', blocks: true })` in plain JS (default options,
 * `preserve: ['system']`), with `countTokens` for the net-positive rule.
 */
export function refDedupeBlocks<M extends RefBlockMessage>(messages: readonly M[], countTokens: RefTokenCounter): RefBlocksResult<M> {
  const n = messages.length;
  const out = messages.slice();
  const verbatim: Record<string, M> = {};
  const decisions: Array<Record<string, unknown>> = [];
  const contents = new Array<string>(n);
  const ids = new Array<string>(n);
  const eligible = new Uint8Array(n);
  const source = new Uint8Array(n);
  const keeper = new Int32Array(n).fill(-1);
  // Whole-message exact pass, keep earliest: a duplicate is tagged only if the tag is shorter, in
  // characters and in tokens.
  const first = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const m = messages[i] as M;
    ids[i] = m.id;
    const content = typeof m.content === 'string' ? m.content : '';
    contents[i] = content;
    source[i] = typeof m.content === 'string' ? 1 : 0;
    if (!eligibleForDedup(m)) continue;
    const keep = first.get(content);
    if (keep === undefined) {
      first.set(content, i);
      eligible[i] = 1;
      continue;
    }
    const keepId = (messages[keep] as M).id;
    const tag = `[ctxdedup: duplicate of ${keepId} — ${content.length} chars]`;
    if (tag.length >= content.length || countTokens(tag) >= countTokens(content)) {
      eligible[i] = 1;
      continue;
    }
    keeper[i] = keep;
    const marker: Record<string, unknown> = { kind: 'exact', duplicateOf: keepId };
    if (m.metadata === undefined) marker['metadataAbsent'] = true;
    out[i] = { ...m, content: tag, metadata: { ...(m.metadata ?? {}), ctxdedup: marker } };
    verbatim[m.id] = m;
    source[i] = 0;
    decisions.push({
      index: i,
      id: m.id,
      kind: 'exact',
      duplicateOfIndex: keep,
      duplicateOfId: keepId,
      charsBefore: content.length,
      charsAfter: tag.length,
      charsSaved: content.length - tag.length,
    });
  }
  // Block pass over what the model still sees. A duplicate whose keeper the pass rewrote stays a
  // message (its tag would name text no longer there in full) and goes through the pass.
  const pass = new BlockPass(contents, ids, eligible, countTokens);
  const refs: Ref[] = [];
  const rewritten = new Uint8Array(n);
  for (let m = 0; m < n; m++) {
    const k = keeper[m] as number;
    if (k >= 0) {
      if (rewritten[k] === 0) continue;
      const m0 = messages[m] as M;
      out[m] = m0;
      delete verbatim[m0.id];
      decisions.splice(
        decisions.findIndex((d) => d['index'] === m),
        1,
      );
      source[m] = 1;
      eligible[m] = 1;
    }
    if (source[m] === 1) {
      const before = refs.length;
      pass.process(m, refs);
      if (refs.length > before) rewritten[m] = 1;
    }
  }
  // Rewritten messages and decisions.
  let k = 0;
  while (k < refs.length) {
    const index = (refs[k] as Ref).message;
    const original = messages[index] as M;
    const content = contents[index] as string;
    const parts: string[] = [];
    const references: Array<Record<string, unknown>> = [];
    let at = 0;
    for (; k < refs.length && (refs[k] as Ref).message === index; k++) {
      const r = refs[k] as Ref;
      parts.push(content.slice(at, r.unitStart), r.text);
      at = r.unitEnd;
      const targetId = ids[r.target] as string;
      const from = r.targetLine + 1;
      const reference: Record<string, unknown> = { line: r.outLine, lines: r.lineCount, target: targetId, from };
      const decision: Record<string, unknown> = {
        index,
        id: original.id,
        kind: 'block',
        duplicateOfIndex: r.target,
        duplicateOfId: targetId,
        lines: { from: r.lineStart + 1, to: r.lineStart + r.lineCount },
        targetLines: { from, to: from + r.lineCount - 1 },
        charsBefore: r.unitEnd - r.unitStart,
        charsAfter: r.text.length,
        charsSaved: r.unitEnd - r.unitStart - r.text.length,
        tokensBefore: r.tokensBefore,
        tokensAfter: r.tokensAfter,
        tokensSaved: r.tokensBefore - r.tokensAfter,
      };
      if (r.first !== NONE) {
        const numbering: Record<string, unknown> = { first: r.first, width: r.width, separator: String.fromCharCode(r.separator) };
        if (r.targetFirst !== NONE) numbering['targetFirst'] = r.targetFirst;
        reference['numbered'] = numbering;
        decision['numbered'] = { from: r.first, to: r.first + r.lineCount - 1 };
      }
      references.push(reference);
      decisions.push(decision);
    }
    parts.push(content.slice(at));
    const marker: Record<string, unknown> = { kind: 'blocks', references };
    if (original.metadata === undefined) marker['metadataAbsent'] = true;
    out[index] = { ...original, content: parts.join(''), metadata: { ...(original.metadata ?? {}), ctxdedup: marker } };
    verbatim[original.id] = original;
  }
  decisions.sort((a, b) => (a['index'] as number) - (b['index'] as number));
  return { messages: out, verbatim, decisions };
}
