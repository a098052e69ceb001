/**
 * Issue 14: block dedup (`dedupeMessages(messages, { keep: 'earliest', blocks: true })`).
 *
 * - savings: characters and o200k tokens saved by exact, exact+fuzzy and exact+blocks on the
 *   block transcript (`transcript(n, 42, { blocks: true })`, bench/corpus.ts);
 * - speed at 1k, 10k and 100k messages (cold: fresh JSON-parsed input, settled heap): the block
 *   pass alone against today's fuzzy pass alone, exact+blocks against exact+fuzzy (both native),
 *   and exact+blocks native against the plain-JS baseline of the same rules
 *   (bench/reference/blocks.ts) counting tokens with gpt-tokenizer, and with the addon's counter;
 *   the baseline's output is checked equal to native's (messages, verbatim map, decisions);
 * - latency of one 40-message, ~100 KB conversation (p50 / p99 of 2,000 warm calls);
 * - adversarial corpora, one fresh process per run (bench/blocks-case.ts): time and peak RSS;
 * - the real transcripts of /work/shared/corpus (or $CTXDEDUP_CORPUS): characters saved per file by
 *   exact, exact+fuzzy (CCE-style, keep latest) and exact+blocks, `expandMessages` checked to
 *   give every session back, and the total time of exact+blocks against exact+fuzzy.
 * @module
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { dedupeMessages, expandMessages, type DedupeMessagesOptions, type Message } from '../src/index.js';
import type { BlocksCaseReport } from './blocks-case.js';
import { type CaseEngine, type CaseOutcome, referenceCap, spawnCase } from './child-case.js';
import { BLOCK_ADVERSARIAL_CASES, transcript, type BlockAdversarialCase, type TranscriptMessage } from './corpus.js';
import { coldMs, formatNumber, megaChars, msRow, type BenchRow } from './harness.js';
import { jsTokenCounter, nativeTokenCounter, nativeTokenCounts } from './reference/blocks-tokens.js';
import { refDedupeBlocks, type RefBlocksResult, type RefTokenCounter } from './reference/blocks.js';
import { refAnalyzeDuplicates, refAnalyzeFuzzyDuplicates } from './reference/cce.js';

const SUITE = 'blocks';
const SEED = 42;

const EXACT: DedupeMessagesOptions = {};
const FUZZY: DedupeMessagesOptions = { near: true };
const BLOCKS: DedupeMessagesOptions = { keep: 'earliest', blocks: true };
const FUZZY_ONLY: DedupeMessagesOptions = { exact: false, near: true };
const BLOCKS_ONLY: DedupeMessagesOptions = { keep: 'earliest', exact: false, blocks: true };

/** Reads every decision and total of a result (decisions and block token figures are built on first read). */
function readAll(r: { decisions: readonly unknown[]; stats: { blockTokensSaved: number } }): number {
  return r.decisions.length + r.stats.blockTokensSaved;
}

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function pct(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}

/** Throws unless the baseline produced exactly what native did: unequal work is no benchmark. */
function assertSameResult(label: string, native: RefBlocksResult<Message>, baseline: RefBlocksResult<Message>): void {
  for (const key of ['messages', 'verbatim', 'decisions'] as const) {
    if (isDeepStrictEqual(native[key], baseline[key])) continue;
    let detail = '';
    if (key !== 'verbatim') {
      const a = native[key] as unknown[];
      const b = baseline[key] as unknown[];
      const at = a.findIndex((x, i) => !isDeepStrictEqual(x, b[i]));
      detail = ` (first difference at ${key}[${at}]: native ${JSON.stringify(a[at])?.slice(0, 300)} / baseline ${JSON.stringify(b[at])?.slice(0, 300)})`;
    }
    throw new Error(`bench: native and JS baseline disagree on ${label} ${key}${detail}; the comparison would be void`);
  }
}

function nativeBlocks(messages: readonly Message[]): RefBlocksResult<Message> {
  const r = dedupeMessages(messages, BLOCKS);
  return { messages: r.messages, verbatim: r.verbatim, decisions: r.decisions as unknown as Array<Record<string, unknown>> };
}

/** o200k tokens of every content (native counter, one call). */
function tokensOf(messages: readonly Message[]): number {
  return nativeTokenCounts(messages.map((m) => (typeof m.content === 'string' ? m.content : ''))).reduce((s, x) => s + x, 0);
}

// ---------------------------------------------------------------------------------------------
// Savings on the generated corpus
// ---------------------------------------------------------------------------------------------

function savingsRows(count: number): BenchRow[] {
  const messages = transcript(count, SEED, { blocks: true });
  const label = `${count / 1000}k msgs`;
  const tokensBefore = tokensOf(messages);
  const rows: BenchRow[] = [];
  for (const [mode, options] of [
    ['exact', EXACT],
    ['exact+fuzzy', FUZZY],
    ['exact+blocks', BLOCKS],
  ] as const) {
    const r = dedupeMessages(messages, options);
    const tokensSaved = tokensBefore - tokensOf(r.messages);
    const s = r.stats;
    const extra =
      mode === 'exact+blocks'
        ? `; ${s.blockReferences} references for ${s.blockLines} lines`
        : mode === 'exact+fuzzy'
          ? `; ${s.nearDuplicates} near dups (lossy)`
          : '';
    rows.push({
      suite: SUITE,
      case: `${label} block transcript: chars saved, ${mode}`,
      native: pct(s.charsSaved, s.charsBefore),
      baseline: null,
      ratio: null,
      unit: '%',
      note: `${formatNumber(s.charsSaved / 1e6)} of ${formatNumber(s.charsBefore / 1e6)} M chars; o200k tokens saved ${formatNumber(pct(tokensSaved, tokensBefore))}% (${formatNumber(tokensSaved / 1e6)} of ${formatNumber(tokensBefore / 1e6)} M); ${s.exactDuplicates} exact${extra}`,
    });
    console.log(`  ${SUITE} / ${rows.at(-1)?.case}: ${formatNumber(rows.at(-1)?.native ?? 0)}% (${rows.at(-1)?.note})`);
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Speed
// ---------------------------------------------------------------------------------------------

async function speedRows(count: number, counters: { js: RefTokenCounter; native: RefTokenCounter }): Promise<BenchRow[]> {
  const label = `${count / 1000}k msgs`;
  const messages = transcript(count, SEED, { blocks: true });
  const mc = megaChars(messages.map((m) => m.content));
  const runs = count >= 100_000 ? 3 : count >= 10_000 ? 5 : 9;
  const jsRuns = count >= 100_000 ? 1 : count >= 10_000 ? 3 : 5;
  const rows: BenchRow[] = [];
  const fresh = (): TranscriptMessage[] => clone(messages);

  // The baseline must produce exactly native's output before anything is timed.
  const reference = nativeBlocks(messages);
  assertSameResult(`${label} (gpt-tokenizer)`, reference, refDedupeBlocks(messages, counters.js));
  assertSameResult(`${label} (native token counter)`, reference, refDedupeBlocks(messages, counters.native));
  const refs = reference.decisions.filter((d) => d['kind'] === 'block');
  console.log(`  ${SUITE} / ${label}: ${formatNumber(mc)} M chars, ${refs.length} block references; JS baseline output equal to native's`);

  const blocksOnly = coldMs(fresh, (m) => dedupeMessages(m, BLOCKS_ONLY), runs);
  const fuzzyOnly = coldMs(fresh, (m) => dedupeMessages(m, FUZZY_ONLY), runs);
  rows.push(
    msRow(
      SUITE,
      `${label} block pass alone vs fuzzy pass alone (native both), cold`,
      blocksOnly,
      fuzzyOnly,
      mc,
      `baseline = dedupeMessages({ exact: false, near: true }) (${formatNumber(mc / (fuzzyOnly / 1000))} MB/s), not JS; ratio >= 1: blocks at least as fast; median of ${runs}`,
    ),
  );
  const exactBlocks = coldMs(fresh, (m) => dedupeMessages(m, BLOCKS), runs);
  // The JS baseline builds every decision with its token counts; native builds them on first
  // read, so against the baseline native reads them all (the same work).
  const exactBlocksRead = coldMs(fresh, (m) => readAll(dedupeMessages(m, BLOCKS)), runs);
  const exactFuzzy = coldMs(fresh, (m) => dedupeMessages(m, FUZZY), runs);
  rows.push(
    msRow(
      SUITE,
      `${label} exact+blocks vs exact+fuzzy (native both), cold`,
      exactBlocks,
      exactFuzzy,
      mc,
      `baseline = dedupeMessages({ near: true }) (${formatNumber(mc / (exactFuzzy / 1000))} MB/s), not JS; median of ${runs}`,
    ),
  );
  const jsMs = coldMs(fresh, (m) => refDedupeBlocks(m, counters.js), jsRuns);
  rows.push(
    msRow(
      SUITE,
      `${label} exact+blocks vs JS baseline (gpt-tokenizer), cold`,
      exactBlocksRead,
      jsMs,
      mc,
      `reference/blocks.ts, same output; native reads every decision (${formatNumber(exactBlocks)} ms without); median of ${runs} / ${jsRuns}`,
    ),
  );
  const jsNativeTokens = coldMs(fresh, (m) => refDedupeBlocks(m, counters.native), jsRuns);
  rows.push(
    msRow(
      SUITE,
      `${label} exact+blocks vs JS baseline (addon token counter), cold`,
      exactBlocksRead,
      jsNativeTokens,
      mc,
      `the same baseline counting tokens with the addon, one call per text; median of ${runs} / ${jsRuns}`,
    ),
  );
  // How much of the pass is token counting: the texts of the accepted references alone (runs
  // that reached the net-positive test and failed it are not included, so this is a lower bound).
  const texts: string[] = [];
  for (const d of refs) {
    const m = messages[d['index'] as number] as TranscriptMessage;
    const lines = m.content.split('\n').slice((d['lines'] as { from: number }).from - 1, (d['lines'] as { to: number }).to);
    texts.push(lines.join('\n'));
  }
  const tokenMs = coldMs(
    () => texts,
    (t) => nativeTokenCounts(t),
    runs,
  );
  rows.push({
    suite: SUITE,
    case: `${label} o200k counting of the replaced runs alone (addon, one batch call)`,
    native: tokenMs,
    baseline: null,
    ratio: null,
    unit: 'ms',
    note: `${formatNumber(megaChars(texts))} M chars in ${texts.length} runs: ${formatNumber(pct(tokenMs, blocksOnly))}% of the block pass's time`,
  });
  for (const r of rows)
    console.log(`  ${SUITE} / ${r.case}: ${formatNumber(r.native)} ${r.unit} vs ${r.baseline === null ? '–' : formatNumber(r.baseline)} (${r.note ?? ''})`);
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Latency of one conversation
// ---------------------------------------------------------------------------------------------

/** Messages `[s, s + 40)` of a block transcript: the first window of at least 100,000 chars. */
function latencyConversation(): TranscriptMessage[] {
  const long = transcript(5_000, SEED, { blocks: true });
  let size = 0;
  for (let i = 0; i < long.length; i++) {
    size += (long[i] as TranscriptMessage).content.length;
    if (i >= 40) size -= (long[i - 40] as TranscriptMessage).content.length;
    if (i >= 39 && size >= 100_000) return clone(long.slice(i - 39, i + 1));
  }
  throw new Error('bench: no 40-message window of 100 KB');
}

function percentiles(fn: () => unknown, calls: number): { p50: number; p99: number } {
  for (let k = 0; k < 200; k++) fn();
  const times = new Float64Array(calls);
  for (let k = 0; k < calls; k++) {
    const start = performance.now();
    fn();
    times[k] = performance.now() - start;
  }
  times.sort();
  return { p50: times[Math.floor(calls * 0.5)] as number, p99: times[Math.floor(calls * 0.99)] as number };
}

function latencyRows(counters: { js: RefTokenCounter }): BenchRow[] {
  const conversation = latencyConversation();
  const mc = megaChars(conversation.map((m) => m.content));
  assertSameResult('latency conversation', nativeBlocks(conversation), refDedupeBlocks(conversation, counters.js));
  const calls = 2_000;
  const native = percentiles(() => readAll(dedupeMessages(conversation, BLOCKS)), calls);
  const unread = percentiles(() => dedupeMessages(conversation, BLOCKS), calls);
  const js = percentiles(() => refDedupeBlocks(conversation, counters.js), calls);
  const fuzzy = percentiles(() => dedupeMessages(conversation, FUZZY), calls);
  const refs = dedupeMessages(conversation, BLOCKS).stats.blockReferences;
  const note = `${conversation.length} msgs, ${formatNumber(mc * 1000)} K chars, ${refs} references; ${calls} warm calls; native reads every decision (as the baseline builds them); without reading them (the AI SDK middleware) p50/p99 ${formatNumber(unread.p50)} / ${formatNumber(unread.p99)} ms; exact+fuzzy native p50/p99 ${formatNumber(fuzzy.p50)} / ${formatNumber(fuzzy.p99)} ms`;
  return [
    msRow(SUITE, 'one 40-message conversation, exact+blocks p50 vs JS baseline p50', native.p50, js.p50, mc, note),
    msRow(SUITE, 'one 40-message conversation, exact+blocks p99 vs JS baseline p99', native.p99, js.p99, mc),
  ];
}

// ---------------------------------------------------------------------------------------------
// Adversarial corpora, a fresh process per run
// ---------------------------------------------------------------------------------------------

const NATIVE_RUNS = 3;
const NATIVE_CAP_S = 120;

function runChild(name: BlockAdversarialCase, engine: CaseEngine, capSeconds: number): CaseOutcome<BlocksCaseReport> {
  return spawnCase<BlocksCaseReport>('blocks-case.ts', name, engine, capSeconds);
}

function adversarialRow(name: BlockAdversarialCase, capSeconds: number): BenchRow {
  const reports: BlocksCaseReport[] = [];
  for (let r = 0; r < NATIVE_RUNS; r++) {
    const outcome = runChild(name, 'native', NATIVE_CAP_S);
    if (!outcome.ok) {
      console.log(`  ${SUITE} / ${name} native: ${outcome.reason}`);
      return {
        suite: SUITE,
        case: `adversarial ${name}`,
        native: NATIVE_CAP_S * 1000,
        baseline: null,
        ratio: null,
        unit: 'ms',
        note: `native ${outcome.reason}`,
      };
    }
    if (!outcome.report.expands) throw new Error(`bench: expandMessages does not give ${name} back`);
    reports.push(outcome.report);
    console.log(`  ${SUITE} / ${name} native: ${formatNumber(outcome.report.ms)} ms, peak RSS ${formatNumber(outcome.report.peakRssMb)} MB`);
  }
  const first = reports[0] as BlocksCaseReport;
  const sorted = reports.map((r) => r.ms).sort((a, b) => a - b);
  const ms = sorted[Math.floor((sorted.length - 1) / 2)] as number;
  const row: BenchRow = {
    suite: SUITE,
    case: `adversarial ${name} (${first.messages} msgs, ${formatNumber(first.megaChars)} M chars)`,
    native: ms,
    baseline: null,
    ratio: null,
    unit: 'ms',
    mbPerSec: first.megaChars / (ms / 1000),
    peakRssMb: Math.max(...reports.map((r) => r.peakRssMb)),
  };
  const notes = [
    `median of ${NATIVE_RUNS} processes`,
    `RSS before call ${formatNumber(first.rssBeforeMb)} MB`,
    `${first.exact} exact + ${first.references} references, ${formatNumber(pct(first.charsSaved, first.megaChars * 1e6))}% chars saved; expandMessages gives the input back`,
  ];
  if (capSeconds > 0) {
    const ref = runChild(name, 'reference', capSeconds);
    if (ref.ok) {
      row.baseline = ref.report.ms;
      row.ratio = ref.report.ms / ms;
      if (ref.report.references !== first.references || ref.report.charsSaved !== first.charsSaved) notes.push('BASELINE RESULT DIFFERS');
      notes.push(`JS baseline peak RSS ${formatNumber(ref.report.peakRssMb)} MB`);
      console.log(`  ${SUITE} / ${name} JS baseline: ${formatNumber(ref.report.ms)} ms`);
    } else {
      row.baseline = capSeconds * 1000;
      row.ratio = (capSeconds * 1000) / ms;
      row.baselineCapped = true;
      notes.push(`JS baseline ${ref.reason}`);
      console.log(`  ${SUITE} / ${name} JS baseline: ${ref.reason}`);
    }
  }
  row.note = notes.join('; ');
  return row;
}

// ---------------------------------------------------------------------------------------------
// Real transcripts
// ---------------------------------------------------------------------------------------------

interface Session {
  source: string;
  session: string;
  messages: Message[];
}

function corpusDir(): string {
  return process.env['CTXDEDUP_CORPUS'] ?? '/work/shared/corpus';
}

function loadSessions(file: string): Session[] {
  const text = gunzipSync(readFileSync(file)).toString('utf8');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Session);
}

/** Sum of `fn(session)` wall times over all sessions. */
function totalMs(sessions: readonly Session[], fn: (m: Message[]) => unknown): number {
  const start = performance.now();
  for (const s of sessions) fn(s.messages);
  return performance.now() - start;
}

function realRows(counters: { js: RefTokenCounter }): BenchRow[] {
  const dir = corpusDir();
  if (!existsSync(dir)) {
    console.log(`  ${SUITE} / real transcripts: ${dir} not found, skipped`);
    return [];
  }
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl.gz'))
    .sort();
  const rows: BenchRow[] = [];
  const all: Session[] = [];
  const totals = { chars: 0, exact: 0, fuzzy: 0, blocks: 0, tokens: 0, blockTokens: 0 };
  for (const file of files) {
    const sessions = loadSessions(join(dir, file));
    all.push(...sessions);
    const t = { chars: 0, exact: 0, fuzzy: 0, blocks: 0, tokens: 0, blockTokens: 0 };
    for (const s of sessions) {
      const blocks = dedupeMessages(s.messages, BLOCKS);
      // Lossless from the output alone, on every session: fail loudly otherwise.
      if (!isDeepStrictEqual(expandMessages(blocks.messages), s.messages)) {
        throw new Error(`bench: expandMessages(out) differs from the input in ${file} session ${s.session}`);
      }
      assertSameResult(
        `${file} session ${s.session}`,
        { messages: blocks.messages, verbatim: blocks.verbatim, decisions: blocks.decisions as unknown as Array<Record<string, unknown>> },
        refDedupeBlocks(s.messages, counters.js),
      );
      t.chars += blocks.stats.charsBefore;
      t.blocks += blocks.stats.charsSaved;
      t.exact += dedupeMessages(s.messages, EXACT).stats.charsSaved;
      t.fuzzy += dedupeMessages(s.messages, FUZZY).stats.charsSaved;
      const before = tokensOf(s.messages);
      t.tokens += before;
      t.blockTokens += before - tokensOf(blocks.messages);
    }
    for (const k of Object.keys(totals) as Array<keyof typeof totals>) totals[k] += t[k];
    const name = file.replace(/\.jsonl\.gz$/, '');
    rows.push(realRow(`real ${name} (${sessions.length} sessions)`, t));
  }
  rows.push(realRow(`real total (${all.length} sessions)`, totals));
  // Total time over all sessions, one call per session: the median of `reps` totals, each on a
  // fresh JSON-parsed copy of every session with the heap settled first (coldMs).
  const reps = 7;
  const preserve = new Set(['system']);
  const cce = (m: Message[]): unknown => refAnalyzeFuzzyDuplicates(m, m.length, preserve, refAnalyzeDuplicates(m, m.length, preserve), 0.85);
  const total = (fn: (m: Message[]) => unknown): number =>
    coldMs(
      () => clone(all),
      (sessions) => totalMs(sessions, fn),
      reps,
    );
  const mc = totals.chars / 1e6;
  const blocksMs = total((m) => dedupeMessages(m, BLOCKS));
  const blocksReadMs = total((m) => readAll(dedupeMessages(m, BLOCKS)));
  const fuzzyMs = total((m) => dedupeMessages(m, FUZZY));
  const jsMs = total((m) => refDedupeBlocks(m, counters.js));
  const cceMs = total(cce);
  rows.push(
    msRow(
      SUITE,
      `real total: exact+blocks vs exact+fuzzy (native both), all ${all.length} sessions, cold`,
      blocksMs,
      fuzzyMs,
      mc,
      `one call per session; median of ${reps} totals on fresh copies; ratio >= 1: blocks faster`,
    ),
  );
  rows.push(
    msRow(
      SUITE,
      `real total: exact+blocks vs JS baseline (gpt-tokenizer), cold`,
      blocksReadMs,
      jsMs,
      mc,
      `same output on every session; native reads every decision (${formatNumber(blocksMs)} ms without)`,
    ),
  );
  rows.push(
    msRow(
      SUITE,
      `real total: exact+blocks vs CCE-rules exact+fuzzy in JS (reference/cce.ts), cold`,
      blocksMs,
      cceMs,
      mc,
      `CCE returns annotations only, so native does not read its token figures (${formatNumber(blocksReadMs)} ms reading every decision); annotations only (analyzeDuplicates + analyzeFuzzyDuplicates, threshold 0.85): a stand-in for context-compression-engine, which is not installed`,
    ),
  );
  for (const r of rows) console.log(`  ${SUITE} / ${r.case}: ${formatNumber(r.native)} ${r.unit} (${r.note ?? ''})`);
  return rows;
}

function realRow(name: string, t: { chars: number; exact: number; fuzzy: number; blocks: number; tokens: number; blockTokens: number }): BenchRow {
  return {
    suite: SUITE,
    case: `${name}: chars saved, exact+blocks`,
    native: pct(t.blocks, t.chars),
    baseline: null,
    ratio: null,
    unit: '%',
    note: `${formatNumber(t.chars / 1e6)} M chars; exact ${formatNumber(pct(t.exact, t.chars))}%, exact+fuzzy (keep latest, lossy) ${formatNumber(pct(t.fuzzy, t.chars))}%, exact+blocks ${formatNumber(pct(t.blocks, t.chars))}% (o200k tokens ${formatNumber(pct(t.blockTokens, t.tokens))}%); expandMessages gives every session back`,
  };
}

/** Parts of the suite, all by default; BENCH_BLOCKS_PARTS=savings,speed,latency,adversarial,real picks some. */
function parts(): Set<string> {
  const raw = process.env['BENCH_BLOCKS_PARTS'];
  return new Set((raw ?? 'savings,speed,latency,adversarial,real').split(',').map((s) => s.trim()));
}

/** Runs the blocks suite; see the module comment. */
export async function run(): Promise<BenchRow[]> {
  const counters = { js: jsTokenCounter(), native: nativeTokenCounter() };
  // Load both vocabularies before anything is timed.
  counters.js('warm up');
  counters.native('warm up');
  dedupeMessages(transcript(50, SEED, { blocks: true }), BLOCKS);
  const selected = parts();
  const rows: BenchRow[] = [];
  if (selected.has('savings')) rows.push(...savingsRows(10_000));
  if (selected.has('latency')) rows.push(...latencyRows(counters));
  if (selected.has('real')) rows.push(...realRows(counters));
  if (selected.has('speed')) for (const count of [1_000, 10_000, 100_000]) rows.push(...(await speedRows(count, counters)));
  if (selected.has('adversarial')) {
    const cap = referenceCap();
    for (const name of BLOCK_ADVERSARIAL_CASES) rows.push(adversarialRow(name, cap));
  }
  return rows;
}
