/**
 * The run report: totals, top repeated contents, per-format counts and throughput, with text and
 * self-contained HTML renderings. Memory stays bounded: the top lists are pruned as they grow.
 * @module
 */
import { readFileSync } from 'node:fs';
import { sha256 } from '../identity.js';
import { tokenCounter, type TokenCounter, type TokenEncoding } from '../tokens.js';
import type { FormatName } from './formats.js';
import type { SharedCounts } from './shared-counts.js';

/** One content that was replaced more than once across the run. */
export interface Offender {
  /** First characters, whitespace collapsed. */
  preview: string;
  /** SHA-256 (hex) of the content's UTF-8 bytes; absent for a content with lone surrogates. */
  sha256?: string;
  /** Replaced copies. */
  copies: number;
  chars: number;
  /** Tokens of the content (real tokenizer). */
  tokens: number;
  /** Tokens removed by replacing its copies (content tokens minus tag tokens, summed). */
  tokensWasted: number;
}

/** Savings of one session. */
export interface SessionSaving {
  session: string;
  format: FormatName;
  messages: number;
  replaced: number;
  charsSaved: number;
  tokensSaved: number;
}

/** The report of `ctxdedup dedupe` (also printed by `--json`). */
export interface DedupeReport {
  version: 1;
  dryRun: boolean;
  files: number;
  sessions: number;
  messages: number;
  /** Texts analysed (a message with several text blocks contributes several). */
  contents: number;
  exactDuplicates: number;
  nearDuplicates: number;
  crossSessionDuplicates: number;
  /**
   * Block references (runs of lines already sent, replaced inside messages) and the characters
   * and tokens they saved, net: the stage's per-run figures (`BlockDecision`), summed. They are
   * part of `charsSaved` and `tokensSaved`; messages rewritten this way are not in `topRepeated`.
   */
  blockReferences: number;
  blockCharsSaved: number;
  blockTokensSaved: number;
  /** Duplicates left in full because they sit in the recency window. */
  keptInWindow: number;
  charsBefore: number;
  charsAfter: number;
  charsSaved: number;
  tokensSaved: number;
  tokenizer: string;
  formats: Partial<Record<FormatName, { files: number; sessions: number; messages: number }>>;
  /** Top repeated contents by tokens wasted (at most 20). */
  topRepeated: Offender[];
  /** Sessions with the most tokens saved (at most 100), largest first. */
  topSessions: SessionSaving[];
  errors: { file: string; line?: number; message: string }[];
  errorCount: number;
  throughput: {
    seconds: number;
    bytesIn: number;
    bytesParsed: number;
    bytesOut: number;
    mbPerSec: number;
    sessionsPerSec: number;
    peakRssMb: number;
  };
}

const TOP_KEEP = 20;
const OFFENDER_CAP = 20_000;
const SESSION_CAP = 100;
const ERROR_CAP = 100;
const TOKEN_CACHE_CAP = 50_000;
const PREVIEW_CHARS = 100;

/** A content key that never merges distinct strings: SHA-256 of UTF-8, or of UTF-16 for lone surrogates. */
export function contentKey(text: string): { key: string; sha256?: string } {
  if (text.isWellFormed()) {
    const hex = sha256(text);
    return { key: hex, sha256: hex };
  }
  return { key: `u16:${sha256(Buffer.from(text, 'utf16le'))}` };
}

/**
 * The first `max` characters of `text` with whitespace runs collapsed to one space and the ends
 * trimmed (`…` when cut). Only a prefix is collapsed, growing until it yields enough characters:
 * replaced contents can be megabytes long.
 */
export function preview(text: string, max = PREVIEW_CHARS): string {
  for (let n = 4 * max; n < text.length; n *= 4) {
    // Collapsing a prefix gives a prefix of the collapsed whole (a run cut at the end still
    // collapses to one space), so more than max + 1 characters decide the result.
    const flat = text.slice(0, n).replace(/\s+/g, ' ').trimStart();
    if (flat.length > max + 1) return `${flat.slice(0, max - 1)}…`;
  }
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * One replaced content, measured where the session was deduplicated (possibly on a worker
 * thread): only these numbers and a short preview travel to the main thread, never the texts.
 */
export interface Replaced {
  /** {@link contentKey} of the original: its SHA-256, or `u16:…` for a text with lone surrogates. */
  key: string;
  /** Length of the original (UTF-16 code units). */
  chars: number;
  /** Tokens of the original. */
  tokens: number;
  /** Tokens saved: the original's tokens minus its replacement's, at least 0. */
  saved: number;
  /** {@link preview} of the original. */
  preview: string;
}

/**
 * {@link contentKey}s of recently seen texts. Replaced contents recur (the same file re-read in
 * session after session), and hashing each copy again cost more than finding it here: texts are
 * bucketed by length and their first and last characters, then compared in full, so a hit is
 * exact. Buckets hold a few texts (equal-looking texts cannot make lookups slow) and the cache a
 * bounded amount of text, least recently used buckets first out.
 */
export class KeyCache {
  private readonly buckets = new Map<string, { text: string; key: string }[]>();
  private units = 0;

  /**
   * @param maxUnits - UTF-16 code units of text kept, at most (longer texts are not kept)
   * @param perBucket - texts kept per bucket
   */
  constructor(
    private readonly maxUnits = 1 << 24,
    private readonly perBucket = 4,
  ) {}

  /** The content key of `text`. */
  key(text: string): string {
    const id = text.length <= 64 ? text : `${text.length}:${text.slice(0, 24)}:${text.slice(-24)}`;
    const bucket = this.buckets.get(id);
    const hit = bucket?.find((e) => e.text === text);
    if (bucket !== undefined) {
      // Refresh recency (LRU).
      this.buckets.delete(id);
      this.buckets.set(id, bucket);
    }
    if (hit !== undefined) return hit.key;
    const key = contentKey(text).key;
    if (text.length > this.maxUnits / 16) return key;
    const into = bucket ?? [];
    into.unshift({ text, key });
    this.units += text.length;
    if (into.length > this.perBucket) this.units -= (into.pop() as { text: string }).text.length;
    if (bucket === undefined) this.buckets.set(id, into);
    for (const [oldest, entries] of this.buckets) {
      if (this.units <= this.maxUnits) break;
      this.buckets.delete(oldest);
      for (const e of entries) this.units -= e.text.length;
    }
    return key;
  }
}

/** UTF-16 code units of replacement texts whose token counts are kept (64 MB). */
const REPLACEMENT_CACHE_UNITS = 1 << 25;

/** Replacements shorter than this (tags) are counted without asking the shared table. */
const SHORT_REPLACEMENT = 256;

/**
 * Measures replaced contents: tokens (real BPE, loaded on first use, so a run that replaces
 * nothing never pays for the vocabulary) and previews. Originals are cached by content key
 * (LRU), replacements (tags, or with blocks rewritten messages) by their text, up to
 * {@link REPLACEMENT_CACHE_UNITS}: the same contents and tags recur across sessions. With a
 * {@link SharedCounts} table, counts of long texts are shared with the run's other threads.
 */
export class ReplacementMeter {
  private count: TokenCounter | undefined;
  private readonly cache = new Map<string, { tokens: number; preview: string }>();
  private readonly replacements = new Map<string, number>();
  private replacementUnits = 0;
  private readonly keys = new KeyCache();

  /**
   * @param counter - a token counter, or the encoding to load when the first content is measured
   * @param shared - counts shared with the other threads of the run (same encoding)
   */
  constructor(
    private readonly counter: TokenCounter | TokenEncoding,
    private readonly shared?: SharedCounts,
  ) {}

  /** Tokens of `text`, whose content key is `key` (computed on demand). */
  private tokensOf(text: string, key: () => string): number {
    if (this.shared === undefined || text.length < SHORT_REPLACEMENT) return this.counterFn()(text);
    const k = key();
    let n = this.shared.get(k);
    if (n === undefined) {
      n = this.counterFn()(text);
      this.shared.set(k, n);
    }
    return n;
  }

  private counterFn(): TokenCounter {
    if (this.count === undefined) this.count = typeof this.counter === 'function' ? this.counter : tokenCounter(this.counter);
    return this.count;
  }

  private replacementTokens(text: string): number {
    let n = this.replacements.get(text);
    if (n === undefined) {
      n = this.tokensOf(text, () => contentKey(text).key);
      if (this.replacementUnits + text.length > REPLACEMENT_CACHE_UNITS) {
        this.replacements.clear();
        this.replacementUnits = 0;
      }
      if (text.length <= REPLACEMENT_CACHE_UNITS / 16) {
        this.replacements.set(text, n);
        this.replacementUnits += text.length;
      }
    }
    return n;
  }

  /** The {@link contentKey} of `text` (cached). */
  key(text: string): string {
    return this.keys.key(text);
  }

  /** Measures `original` replaced by `replacement`. */
  measure(original: string, replacement: string): Replaced {
    const key = this.keys.key(original);
    let hit = this.cache.get(key);
    if (hit === undefined) {
      hit = { tokens: this.tokensOf(original, () => key), preview: preview(original) };
      if (this.cache.size >= TOKEN_CACHE_CAP) this.cache.delete(this.cache.keys().next().value as string);
    } else {
      // Refresh recency (LRU).
      this.cache.delete(key);
    }
    this.cache.set(key, hit);
    const saved = Math.max(0, hit.tokens - this.replacementTokens(replacement));
    return { key, chars: original.length, tokens: hit.tokens, preview: hit.preview, saved };
  }
}

/**
 * Peak resident set size of this process (worker threads included) in MB. On Linux this is
 * VmHWM: `resourceUsage().maxRSS` (getrusage) survives fork + exec, so a process started by a
 * big parent would report the parent's size at fork time as its own peak. Elsewhere, maxRSS.
 */
export function peakRssMb(): number {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (match !== null) return Number(match[1]) / 1024;
  } catch {
    // No procfs: getrusage below.
  }
  return process.resourceUsage().maxRSS / 1024;
}

/** Accumulates a report while sessions stream by. */
export class ReportBuilder {
  readonly report: DedupeReport;
  private readonly offenders = new Map<string, Offender>();
  private readonly started = process.hrtime.bigint();

  /**
   * @param meter - counts the tokens of replaced contents
   * @param tokenizer - the encoding name shown in the report
   * @param dryRun - whether nothing is written
   */
  constructor(
    private readonly meter: ReplacementMeter,
    tokenizer: string,
    dryRun: boolean,
  ) {
    this.report = {
      version: 1,
      dryRun,
      files: 0,
      sessions: 0,
      messages: 0,
      contents: 0,
      exactDuplicates: 0,
      nearDuplicates: 0,
      crossSessionDuplicates: 0,
      blockReferences: 0,
      blockCharsSaved: 0,
      blockTokensSaved: 0,
      keptInWindow: 0,
      charsBefore: 0,
      charsAfter: 0,
      charsSaved: 0,
      tokensSaved: 0,
      tokenizer,
      formats: {},
      topRepeated: [],
      topSessions: [],
      errors: [],
      errorCount: 0,
      throughput: { seconds: 0, bytesIn: 0, bytesParsed: 0, bytesOut: 0, mbPerSec: 0, sessionsPerSec: 0, peakRssMb: 0 },
    };
  }

  /** Counts a file of `format`. */
  file(format: FormatName): void {
    this.formatEntry(format).files++;
  }

  private formatEntry(format: FormatName): { files: number; sessions: number; messages: number } {
    return (this.report.formats[format] ??= { files: 0, sessions: 0, messages: 0 });
  }

  /** Records one replaced content; returns the tokens it saved. */
  replaced(original: string, tag: string): number {
    return this.record(this.meter.measure(original, tag));
  }

  /** Records one replaced content measured elsewhere (call in input order); returns the tokens it saved. */
  record(rep: Replaced): number {
    let entry = this.offenders.get(rep.key);
    if (entry === undefined) {
      entry = { preview: rep.preview, copies: 0, chars: rep.chars, tokens: rep.tokens, tokensWasted: 0 };
      if (!rep.key.startsWith('u16:')) entry.sha256 = rep.key;
      this.offenders.set(rep.key, entry);
      if (this.offenders.size > OFFENDER_CAP) this.pruneOffenders(OFFENDER_CAP / 2);
    }
    entry.copies++;
    entry.tokensWasted += rep.saved;
    return rep.saved;
  }

  private pruneOffenders(keep: number): void {
    const sorted = [...this.offenders.entries()].sort((a, b) => b[1].tokensWasted - a[1].tokensWasted);
    this.offenders.clear();
    for (const [k, v] of sorted.slice(0, keep)) this.offenders.set(k, v);
  }

  /** Adds one finished session. */
  session(
    s: SessionSaving & {
      contents: number;
      charsBefore: number;
      exact: number;
      near: number;
      cross: number;
      keptInWindow: number;
      blocks?: number;
      blockCharsSaved?: number;
      blockTokensSaved?: number;
    },
  ): void {
    const r = this.report;
    r.sessions++;
    r.messages += s.messages;
    r.contents += s.contents;
    r.exactDuplicates += s.exact;
    r.nearDuplicates += s.near;
    r.crossSessionDuplicates += s.cross;
    r.blockReferences += s.blocks ?? 0;
    r.blockCharsSaved += s.blockCharsSaved ?? 0;
    r.blockTokensSaved += s.blockTokensSaved ?? 0;
    r.keptInWindow += s.keptInWindow;
    r.charsBefore += s.charsBefore;
    r.charsSaved += s.charsSaved;
    r.tokensSaved += s.tokensSaved;
    const f = this.formatEntry(s.format);
    f.sessions++;
    f.messages += s.messages;
    if (s.tokensSaved > 0 || s.charsSaved > 0) {
      r.topSessions.push({
        session: s.session,
        format: s.format,
        messages: s.messages,
        replaced: s.replaced,
        charsSaved: s.charsSaved,
        tokensSaved: s.tokensSaved,
      });
      if (r.topSessions.length > SESSION_CAP * 4) this.pruneSessions();
    }
  }

  private pruneSessions(): void {
    this.report.topSessions.sort((a, b) => b.tokensSaved - a.tokensSaved || b.charsSaved - a.charsSaved);
    this.report.topSessions.length = Math.min(this.report.topSessions.length, SESSION_CAP);
  }

  /** Records a skipped input. */
  error(file: string, line: number | undefined, message: string): void {
    this.report.errorCount++;
    if (this.report.errors.length < ERROR_CAP) this.report.errors.push(line === undefined ? { file, message } : { file, line, message });
  }

  /** Closes the report with throughput figures. */
  finish(files: number, bytesIn: number, bytesParsed: number, bytesOut: number): DedupeReport {
    const r = this.report;
    r.files = files;
    r.charsAfter = r.charsBefore - r.charsSaved;
    this.pruneSessions();
    r.topRepeated = [...this.offenders.values()]
      .filter((o) => o.copies > 0 && o.tokensWasted > 0)
      .sort((a, b) => b.tokensWasted - a.tokensWasted || b.copies - a.copies)
      .slice(0, TOP_KEEP);
    const seconds = Number(process.hrtime.bigint() - this.started) / 1e9;
    r.throughput = {
      seconds: round(seconds, 3),
      bytesIn,
      bytesParsed,
      bytesOut,
      mbPerSec: round(bytesParsed / 1e6 / Math.max(seconds, 1e-9), 1),
      sessionsPerSec: round(r.sessions / Math.max(seconds, 1e-9), 1),
      peakRssMb: round(peakRssMb(), 1),
    };
    return r;
  }
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Human-readable size: `1.2 MB`. */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = -1;
  do {
    v /= 1000;
    u++;
  } while (v >= 1000 && u < units.length - 1);
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

const int = (n: number): string => n.toLocaleString('en-US');
const pct = (part: number, whole: number): string => (whole === 0 ? '0.0%' : `${((100 * part) / whole).toFixed(1)}%`);

/** The report as terminal text. */
export function renderText(r: DedupeReport): string {
  const out: string[] = [];
  const t = r.throughput;
  out.push(`ctxdedup ${r.dryRun ? 'dry run' : 'dedupe'}: ${int(r.files)} files, ${int(r.sessions)} sessions, ${int(r.messages)} messages`);
  out.push(
    `  replaced     ${int(r.exactDuplicates)} exact + ${int(r.nearDuplicates)} near duplicates` +
      (r.crossSessionDuplicates > 0 ? ` + ${int(r.crossSessionDuplicates)} cross-session` : '') +
      (r.blockReferences > 0 ? ` + ${int(r.blockReferences)} line blocks (${int(r.blockCharsSaved)} chars, ${int(r.blockTokensSaved)} tokens)` : '') +
      (r.keptInWindow > 0 ? ` (${int(r.keptInWindow)} kept in the recency window)` : ''),
  );
  out.push(`  characters   ${int(r.charsBefore)} -> ${int(r.charsAfter)} (${int(r.charsSaved)} saved, ${pct(r.charsSaved, r.charsBefore)})`);
  out.push(`  tokens saved ${int(r.tokensSaved)} (${r.tokenizer})`);
  const formats = Object.entries(r.formats).map(([name, f]) => `${name} ${int(f.files)} files / ${int(f.sessions)} sessions`);
  if (formats.length > 0) out.push(`  formats      ${formats.join(', ')}`);
  out.push(
    `  throughput   ${formatBytes(t.bytesParsed)} in ${t.seconds.toFixed(2)} s: ${t.mbPerSec} MB/s, ${t.sessionsPerSec} sessions/s, peak RSS ${t.peakRssMb} MB`,
  );
  if (r.topRepeated.length > 0) {
    out.push('', '  top repeated contents (tokens wasted, copies replaced):');
    for (const o of r.topRepeated.slice(0, 10)) {
      out.push(`  ${int(o.tokensWasted).padStart(12)}  ×${String(o.copies).padEnd(5)} ${o.preview.slice(0, 70)}`);
    }
  }
  if (r.errorCount > 0) {
    out.push('', `  ${int(r.errorCount)} input error(s) skipped:`);
    for (const e of r.errors.slice(0, 10)) out.push(`    ${e.file}${e.line === undefined ? '' : `:${e.line}`}: ${e.message}`);
  }
  return `${out.join('\n')}\n`;
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/** A bar chart (inline SVG) of tokens saved per session, largest first. */
function chart(sessions: readonly SessionSaving[]): string {
  const rows = sessions.slice(0, 40);
  if (rows.length === 0) return '<p class="muted">No session had duplicates.</p>';
  const max = Math.max(1, ...rows.map((s) => s.tokensSaved));
  const rowH = 22;
  const labelW = 260;
  const barW = 560;
  const h = rows.length * rowH + 10;
  const bars = rows
    .map((s, i) => {
      const w = Math.max(1, Math.round((s.tokensSaved / max) * barW));
      const y = i * rowH + 5;
      const label = s.session.length > 38 ? `…${s.session.slice(-37)}` : s.session;
      return (
        `<text x="${labelW - 8}" y="${y + 15}" text-anchor="end">${esc(label)}</text>` +
        `<rect x="${labelW}" y="${y + 3}" width="${w}" height="${rowH - 6}" rx="3"><title>${esc(s.session)}: ${int(s.tokensSaved)} tokens</title></rect>` +
        `<text x="${labelW + w + 6}" y="${y + 15}">${int(s.tokensSaved)}</text>`
      );
    })
    .join('');
  return `<svg role="img" aria-label="tokens saved per session" width="${labelW + barW + 90}" height="${h}" viewBox="0 0 ${labelW + barW + 90} ${h}">${bars}</svg>`;
}

/** The report as a self-contained HTML page (no scripts, no external resources). */
export function renderHtml(r: DedupeReport): string {
  const t = r.throughput;
  const cards = [
    ['sessions', int(r.sessions)],
    ['messages', int(r.messages)],
    ['exact duplicates', int(r.exactDuplicates)],
    ['near duplicates', int(r.nearDuplicates)],
    ['cross-session', int(r.crossSessionDuplicates)],
    ['line blocks', `${int(r.blockReferences)} (${int(r.blockCharsSaved)} chars, ${int(r.blockTokensSaved)} tokens)`],
    ['characters saved', `${int(r.charsSaved)} (${pct(r.charsSaved, r.charsBefore)})`],
    ['tokens saved', int(r.tokensSaved)],
    ['throughput', `${t.mbPerSec} MB/s`],
  ]
    .map(([k, v]) => `<div class="card"><div class="v">${esc(v as string)}</div><div class="k">${esc(k as string)}</div></div>`)
    .join('');
  const top = r.topRepeated
    .map(
      (o) =>
        `<tr><td class="n">${int(o.tokensWasted)}</td><td class="n">${int(o.copies)}</td><td class="n">${int(o.tokens)}</td><td><code>${esc(o.preview)}</code></td></tr>`,
    )
    .join('');
  const formats = Object.entries(r.formats)
    .map(
      ([name, f]) =>
        `<tr><td>${esc(name)}</td><td class="n">${int(f.files)}</td><td class="n">${int(f.sessions)}</td><td class="n">${int(f.messages)}</td></tr>`,
    )
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ctxdedup report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2430;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}.muted{color:#667}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d8dde6;border-radius:8px;padding:10px 14px;min-width:130px;background:#f7f9fc}
.card .v{font-size:20px;font-weight:600}.card .k{color:#667;font-size:12px}
svg text{font-size:12px;fill:#1d2430}svg rect{fill:#3b7ddd}
table{border-collapse:collapse}td,th{border-bottom:1px solid #e3e7ee;padding:4px 10px;text-align:left;vertical-align:top}.n{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px;white-space:pre-wrap;word-break:break-all}
</style></head><body>
<h1>ctxdedup report</h1>
<p class="muted">${r.dryRun ? 'Dry run — nothing was written. ' : ''}${int(r.files)} files, ${esc(formatBytes(t.bytesParsed))} in ${t.seconds.toFixed(2)} s; tokens counted with ${esc(r.tokenizer)}.</p>
<div class="cards">${cards}</div>
<h2>Tokens saved per session</h2>
${chart(r.topSessions)}
<h2>Top repeated contents</h2>
${top ? `<table><thead><tr><th>tokens wasted</th><th>copies</th><th>tokens each</th><th>preview</th></tr></thead><tbody>${top}</tbody></table>` : '<p class="muted">None.</p>'}
<h2>Formats</h2>
<table><thead><tr><th>format</th><th>files</th><th>sessions</th><th>messages</th></tr></thead><tbody>${formats}</tbody></table>
${r.errorCount > 0 ? `<h2>Skipped inputs (${int(r.errorCount)})</h2><ul>${r.errors.map((e) => `<li><code>${esc(`${e.file}${e.line === undefined ? '' : `:${e.line}`}`)}</code> ${esc(e.message)}</li>`).join('')}</ul>` : ''}
</body></html>
`;
}
