/**
 * Seeded, deterministic corpora for the benchmarks.
 *
 * - Scored items (issue 2): random-length items with a share of duplicates, and long items of
 *   one equal length that differ only late in the string.
 * - Agent transcripts (issue 3): file reads, unchanged re-reads, re-reads after small edits,
 *   grep output, test logs sharing a header line, prose, system and tool-calling messages.
 * - Adversarial message sets: shared first lines, mutually near-identical texts, long texts of
 *   one equal length.
 *
 * Every duplicate is a separate string object with equal content (see {@link freshCopy}), and
 * every content is passed through a JSON round trip at the end, so strings are flat and
 * unhashed, as they would be right after `JSON.parse` of a request body.
 * @module
 */
import { freshCopy, mulberry32, type Rng } from './prng.js';
import { codeBlock, codeLine, identifier, prose, sentence, sourcePath } from './text.js';

/** A scored context item as `deduplicate()` takes it. */
export interface ScoredEntry {
  item: { id: string; content: string };
  score: number;
}

/** A tool call as chat APIs send it (only its presence matters to dedup). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * A conversation message as `dedupeMessages()` and the CCE functions take it (a type alias, not
 * an interface, so it is assignable to their index-signature message types).
 */
export type TranscriptMessage = {
  id: string;
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
};

/** Total `content.length` (UTF-16 code units) of a list of contents. */
export function totalChars(contents: Iterable<string>): number {
  let total = 0;
  for (const c of contents) total += c.length;
  return total;
}

function shuffle<T>(rng: Rng, items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const tmp = items[i] as T;
    items[i] = items[j] as T;
    items[j] = tmp;
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// Scored items (issue 2)
// ---------------------------------------------------------------------------------------------

/** Options of {@link scoredCorpus}. */
export interface ScoredCorpusOptions {
  count: number;
  minChars: number;
  maxChars: number;
  /** Share of entries whose content repeats an earlier unique content, e.g. 0.3. */
  duplicateRate: number;
  seed: number;
}

/** `count` scored items: unique contents of random length plus fresh copies of some of them. */
export function scoredCorpus(o: ScoredCorpusOptions): ScoredEntry[] {
  const rng = mulberry32(o.seed);
  const uniqueCount = Math.max(1, Math.round(o.count * (1 - o.duplicateRate)));
  const uniques: string[] = [];
  for (let i = 0; i < uniqueCount; i++) {
    const length = rng.range(o.minChars, o.maxChars);
    // A per-item tag in the first line keeps unique contents unique even if the text repeats.
    uniques.push(`item ${i}\n${codeBlock(rng, length)}`.slice(0, length));
  }
  const contents = uniques.slice();
  for (let i = uniqueCount; i < o.count; i++) contents.push(rng.pick(uniques));
  shuffle(rng, contents);
  // Scores with 3 decimals, so equal scores (ties to the lowest index) occur too.
  return contents.map((content, i) => ({
    item: { id: `s${i}`, content: freshCopy(content) },
    score: Math.round(rng.next() * 1000) / 1000,
  }));
}

/**
 * `count` distinct items of exactly `length` characters: one shared text with an 8-character
 * tag overwritten at a random position in its second half. Equal lengths defeat any
 * length-based bucketing, and late differences make every equality check read most of both
 * strings (V8 also stops hashing strings longer than 16,383 characters, hashing their length).
 */
export function longScoredCorpus(count: number, length: number, seed: number): ScoredEntry[] {
  const rng = mulberry32(seed);
  const base = codeBlock(rng, length).slice(0, length);
  const out: ScoredEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = rng.range(Math.floor(length / 2), length - 8);
    const tag = `#${i.toString(36).padStart(6, '0')}#`;
    const content = base.slice(0, at) + tag + base.slice(at + tag.length);
    out.push({ item: { id: `l${i}`, content: freshCopy(content) }, score: rng.next() });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Agent transcripts (issue 3)
// ---------------------------------------------------------------------------------------------

interface SourceFile {
  path: string;
  lines: string[];
  /** Read with `cat -n`: an inserted line shifts every later number, so inserts hurt Jaccard. */
  numbered: boolean;
  edits: number;
}

const SYSTEM_PROMPT =
  'You are a coding agent working in a TypeScript monorepo. Use the tools to read, search, edit and test the ' +
  'repository. Keep answers short, show diffs when you change code, and never run destructive commands ' +
  'without asking first.';

const TEST_HEADER = ' RUN  v1.6.0 /work/repo';

function render(file: SourceFile): string {
  if (!file.numbered) return file.lines.join('\n');
  return file.lines.map((line, i) => `${String(i + 1).padStart(6)}\t${line}`).join('\n');
}

function newFile(rng: Rng, serial: number): SourceFile {
  const path = sourcePath(rng, serial);
  const lines = [`// ${path}`, `import { ${identifier(rng)}, ${identifier(rng)} } from './${identifier(rng)}.js';`, ''];
  for (let i = rng.range(55, 95); i > 0; i--) lines.push(rng.chance(0.08) ? '' : codeLine(rng));
  lines.push('}');
  return { path, lines, numbered: rng.chance(0.2), edits: 0 };
}

/** One or two lines replaced, sometimes one inserted: what an agent's edit tool does. */
function editFile(rng: Rng, file: SourceFile): void {
  file.edits++;
  const tag = `e${file.edits}_`;
  for (let k = rng.range(1, 2); k > 0; k--) {
    const at = rng.range(3, file.lines.length - 1);
    if (rng.chance(0.15)) file.lines.splice(at, 0, codeLine(rng, tag));
    else file.lines[at] = codeLine(rng, tag);
  }
}

function grepOutput(rng: Rng, files: readonly { path: string }[]): string {
  const pattern = identifier(rng);
  const out = [`$ rg -n "${pattern}" src/`];
  const hits = rng.range(25, 60);
  for (let i = 0; i < hits; i++) {
    const path = files.length > 0 ? rng.pick(files).path : sourcePath(rng, i);
    out.push(`${path}:${rng.range(1, 400)}:${codeLine(rng)}`);
  }
  out.push(`${hits} matches`);
  return out.join('\n');
}

function testLog(rng: Rng): string {
  // Only the RUN line is shared by every log: a fingerprint bucket that grows with the
  // transcript, but two logs never reach the 3-line overlap, so they are never compared.
  const out = [TEST_HEADER, ''];
  const suites = rng.range(20, 45);
  let tests = 0;
  for (let i = 0; i < suites; i++) {
    const n = rng.range(1, 40);
    tests += n;
    const mark = rng.chance(0.05) ? '×' : '✓';
    out.push(` ${mark} test/${identifier(rng)}.test.ts (${n} tests) ${rng.range(2, 900)}ms`);
  }
  out.push('', ` Test Files  ${suites} passed (${suites})`, `      Tests  ${tests} passed (${tests})`);
  out.push(`   Start at  ${rng.range(10, 23)}:${rng.range(10, 59)}:${rng.range(10, 59)}`);
  out.push(`   Duration  ${(rng.range(100, 9000) / 100).toFixed(2)}s`);
  return out.join('\n');
}

function toolCall(rng: Rng, id: number, name: string, argument: string): ToolCall {
  return { id: `call_${id}`, type: 'function', function: { name, arguments: JSON.stringify({ arg: argument, n: rng.int(100) }) } };
}

/** Options of {@link transcript}. */
export interface TranscriptOptions {
  /**
   * Block redundancy (issue 14): generate the conversation with {@link blockTranscript}'s rules
   * instead (partial and line-numbered re-reads, edit snippets, repeated log blocks, code re-sent
   * in review). Default `false`: the issue-3 transcript, unchanged.
   */
  blocks?: boolean;
}

/**
 * A synthetic agent transcript of `count` messages (about 2-4 KB per eligible message).
 * Generation is sequential, so a shorter transcript with the same seed is a prefix of a longer one.
 * With `{ blocks: true }` it is {@link blockTranscript}'s transcript instead.
 */
export function transcript(count: number, seed: number, options: TranscriptOptions = {}): TranscriptMessage[] {
  if (options.blocks === true) return blockTranscript(count, seed);
  const rng = mulberry32(seed);
  const out: TranscriptMessage[] = [];
  const files: SourceFile[] = [];
  const userTexts: string[] = [];
  const push = (m: Omit<TranscriptMessage, 'id'>): void => {
    if (out.length < count) out.push({ id: `m${out.length}`, ...m });
  };
  push({ role: 'system', content: SYSTEM_PROMPT });
  while (out.length < count) {
    const r = rng.next();
    if (r < 0.08) {
      // Users sometimes paste the same thing twice: an exact duplicate, as a fresh string.
      const again = userTexts.length > 0 && rng.chance(0.05);
      const text = again ? freshCopy(rng.pick(userTexts)) : prose(rng, rng.range(300, 1500));
      if (!again) userTexts.push(text);
      push({ role: 'user', content: text });
    } else if (r < 0.18) {
      push({ role: 'assistant', content: prose(rng, rng.range(800, 3000)) });
    } else if (r < 0.19) {
      // A repeated system reminder: identical, but preserved by role, so never deduplicated.
      push({ role: 'system', content: `${SYSTEM_PROMPT}\n\n${'Reminder: run the tests before you finish. '.repeat(8)}` });
    } else {
      const t = rng.next();
      const callId = out.length;
      let name: string;
      let result: string;
      if (t < 0.55) {
        // File reads, biased towards recently touched files; some were edited in between.
        let file: SourceFile;
        if (files.length > 0 && rng.chance(0.55)) {
          file = files[files.length - 1 - Math.floor(rng.next() ** 3 * files.length)] as SourceFile;
          if (rng.chance(0.4)) editFile(rng, file);
        } else {
          file = newFile(rng, files.length);
          files.push(file);
        }
        name = 'read_file';
        result = render(file);
        push({ role: 'assistant', content: `Reading ${file.path}.`, tool_calls: [toolCall(rng, callId, name, file.path)] });
      } else if (t < 0.75) {
        name = 'grep';
        result = grepOutput(rng, files);
        push({ role: 'assistant', content: sentence(rng), tool_calls: [toolCall(rng, callId, name, 'pattern')] });
      } else if (t < 0.9) {
        name = 'run_tests';
        result = testLog(rng);
        push({ role: 'assistant', content: 'Running the tests.', tool_calls: [toolCall(rng, callId, name, 'vitest')] });
      } else {
        name = 'shell';
        result = `$ npx tsc --noEmit\n${codeBlock(rng, rng.range(600, 2500))}`;
        push({ role: 'assistant', content: sentence(rng), tool_calls: [toolCall(rng, callId, name, 'tsc')] });
      }
      push({ role: 'tool', content: result, tool_call_id: `call_${callId}` });
    }
  }
  for (const m of out) m.content = freshCopy(m.content);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Agent transcripts with block redundancy (issue 14)
// ---------------------------------------------------------------------------------------------

/** How a tool shows a file: as is (`cat`, `sed -n`), `cat -n` (`%6d\t`), or an agent's read (`%6d→`). */
type View = 'plain' | 'cat-n' | 'arrow';

interface BlockFile {
  path: string;
  lines: string[];
  edits: number;
}

/** `lines` as `view` shows them, the first one numbered `first`. */
function viewLines(lines: readonly string[], first: number, view: View): string[] {
  if (view === 'plain') return lines.slice();
  const separator = view === 'cat-n' ? '\t' : '→';
  return lines.map((line, k) => `${String(first + k).padStart(6)}${separator}${line}`);
}

function pickView(rng: Rng): View {
  const r = rng.next();
  return r < 0.45 ? 'arrow' : r < 0.7 ? 'cat-n' : 'plain';
}

function newBlockFile(rng: Rng, serial: number): BlockFile {
  const path = sourcePath(rng, serial);
  const lines = [`// ${path}`, `import { ${identifier(rng)}, ${identifier(rng)} } from './${identifier(rng)}.js';`, ''];
  for (let i = rng.range(40, 160); i > 0; i--) {
    const r = rng.next();
    lines.push(r < 0.07 ? '' : r < 0.12 ? `  // ${sentence(rng)}` : r < 0.15 ? '}' : codeLine(rng));
  }
  lines.push('}');
  return { path, lines, edits: 0 };
}

/**
 * One to three changes (a line replaced, one or two inserted, or one deleted): what an agent's
 * edit tool does. Inserts and deletes shift the numbers of every later line. Returns the first
 * changed line.
 */
function editBlockFile(rng: Rng, file: BlockFile): number {
  file.edits++;
  const tag = `e${file.edits}_`;
  let first = file.lines.length;
  for (let k = rng.range(1, 3); k > 0; k--) {
    const at = rng.range(3, file.lines.length - 1);
    first = Math.min(first, at);
    const r = rng.next();
    if (r < 0.25) file.lines.splice(at, 0, ...Array.from({ length: rng.range(1, 2) }, () => codeLine(rng, tag)));
    else if (r < 0.4 && file.lines.length > 20) file.lines.splice(at, 1);
    else file.lines[at] = codeLine(rng, tag);
  }
  return first;
}

/** A failing test as vitest prints it: header, assertion, a numbered code frame (`  41|`), stack. */
function failureBlock(rng: Rng): string[] {
  const file = `test/${identifier(rng)}.test.ts`;
  const line = rng.range(20, 300);
  const out = [
    ` FAIL  ${file} > ${identifier(rng)} > ${sentence(rng).toLowerCase().slice(0, -1)}`,
    `AssertionError: expected ${rng.int(100)} to be ${rng.int(100)} // Object.is equality`,
    '',
    '- Expected',
    '+ Received',
    '',
    ` ❯ ${file}:${line}:${rng.range(5, 30)}`,
  ];
  for (let k = -3; k <= 2; k++) out.push(`${String(line + k).padStart(6)}| ${codeLine(rng)}`);
  for (let k = rng.range(2, 6); k > 0; k--) out.push(` ❯ ${sourcePath(rng, rng.int(500))}:${rng.range(1, 400)}:${rng.range(1, 40)}`);
  out.push('', '⎯'.repeat(40));
  return out;
}

/** Test suites and failures that persist from one run to the next until they are fixed. */
interface TestState {
  suites: string[];
  failures: string[][];
}

function testRun(rng: Rng, state: TestState, run: number): string {
  // Failures come and go between runs; the ones that stay are printed again, verbatim.
  if (state.failures.length > 0 && rng.chance(0.3)) state.failures.splice(rng.int(state.failures.length), 1);
  if (state.failures.length === 0 || rng.chance(0.2)) state.failures.push(failureBlock(rng));
  const filter = rng.chance(0.3) ? ` ${rng.pick(state.suites)}` : '';
  const out = [`$ npx vitest run${filter} # run ${run}`, TEST_HEADER, ''];
  let tests = 0;
  for (const suite of state.suites) {
    const n = rng.range(1, 40);
    tests += n;
    out.push(` ✓ ${suite} (${n} tests) ${rng.range(2, 900)}ms`);
  }
  const failed = state.failures.length;
  out.push('', `⎯⎯⎯⎯⎯⎯⎯ Failed Tests ${failed} ⎯⎯⎯⎯⎯⎯⎯`, '');
  for (const block of state.failures) out.push(...block);
  if (rng.chance(0.15)) {
    // A retrying reporter prints the same failures again in the same output.
    out.push('', 'Retry 1/1', '');
    for (const block of state.failures) out.push(...block);
  }
  out.push('', ` Test Files  ${failed} failed | ${state.suites.length - failed} passed (${state.suites.length})`);
  out.push(`      Tests  ${failed} failed | ${tests} passed (${tests + failed})`);
  out.push(`   Start at  ${rng.range(10, 23)}:${rng.range(10, 59)}:${rng.range(10, 59)}`);
  out.push(`   Duration  ${(rng.range(100, 9000) / 100).toFixed(2)}s`);
  return out.join('\n');
}

function tscError(rng: Rng): string {
  return `${sourcePath(rng, rng.int(300))}(${rng.range(1, 400)},${rng.range(1, 60)}): error TS${rng.range(2300, 2800)}: Argument of type '${identifier(rng)}' is not assignable to parameter of type '${identifier(rng)}'.`;
}

/** `tsc` errors persist until fixed: each run prints most of the previous run's lines again. */
function tscRun(rng: Rng, errors: string[], run: number): string {
  for (let k = rng.range(0, 2); k > 0 && errors.length > 0; k--) errors.splice(rng.int(errors.length), 1);
  for (let k = rng.range(0, 2); k > 0; k--) errors.splice(rng.int(errors.length + 1), 0, tscError(rng));
  if (errors.length < 6) for (let k = rng.range(6, 20); k > 0; k--) errors.push(tscError(rng));
  return [`$ npx tsc --noEmit -p tsconfig.json # attempt ${run}`, ...errors, '', `Found ${errors.length} errors.`].join('\n');
}

/** A run of 10-40 consecutive lines of `file` (what a review quotes), and where it starts. */
function excerpt(rng: Rng, file: BlockFile): { from: number; lines: string[] } {
  const length = Math.min(file.lines.length, rng.range(10, 40));
  const from = rng.int(file.lines.length - length + 1);
  return { from, lines: file.lines.slice(from, from + length) };
}

/**
 * A synthetic agent transcript of `count` messages with the redundancy block dedup targets
 * (issue 14), on top of issue 3's kinds of messages:
 * - file re-reads after small edits (1-3 lines replaced, inserted or deleted), whole or partial
 *   (an offset and a limit), shown plain (`cat`, `sed -n`), as `cat -n` (`%6d\t`) or as an agent's
 *   read (`%6d→`): the view is drawn per read, so a file first shown unnumbered is often read
 *   numbered later, and an insertion shifts the numbers of every later line;
 * - edit results that show a numbered snippet of the edited file;
 * - test runs under new headers that print the persisting failures (numbered code frames
 *   included) again, verbatim, sometimes twice in one output (a retry);
 * - `tsc` runs that print most of the previous run's errors again;
 * - code re-sent in review: users paste, and assistants quote, 10-40 lines of a file.
 * Generation is sequential, so a shorter transcript with the same seed is a prefix of a longer one.
 */
export function blockTranscript(count: number, seed: number): TranscriptMessage[] {
  const rng = mulberry32(seed);
  const out: TranscriptMessage[] = [];
  const files: BlockFile[] = [];
  const userTexts: string[] = [];
  const tests: TestState = { suites: [], failures: [] };
  for (let k = rng.range(20, 45); k > 0; k--) tests.suites.push(`test/${identifier(rng)}.test.ts`);
  const tscErrors: string[] = [];
  let runs = 0;
  const push = (m: Omit<TranscriptMessage, 'id'>): void => {
    if (out.length < count) out.push({ id: `m${out.length}`, ...m });
  };
  const recentFile = (): BlockFile => files[files.length - 1 - Math.floor(rng.next() ** 3 * files.length)] as BlockFile;
  push({ role: 'system', content: SYSTEM_PROMPT });
  while (out.length < count) {
    const r = rng.next();
    if (r < 0.06) {
      const again = userTexts.length > 0 && rng.chance(0.05);
      let text: string;
      if (again) text = freshCopy(rng.pick(userTexts));
      else if (files.length > 0 && rng.chance(0.3)) {
        const file = recentFile();
        text = `Can you review this part of ${file.path}?\n\n\`\`\`ts\n${excerpt(rng, file).lines.join('\n')}\n\`\`\`\n\n${prose(rng, rng.range(100, 400))}`;
      } else text = prose(rng, rng.range(300, 1500));
      if (!again) userTexts.push(text);
      push({ role: 'user', content: text });
    } else if (r < 0.16) {
      let text = prose(rng, rng.range(400, 2000));
      if (files.length > 0 && rng.chance(0.35)) {
        const file = recentFile();
        const { from, lines } = excerpt(rng, file);
        text = `Lines ${from + 1}-${from + lines.length} of ${file.path} as they are now:\n\n\`\`\`ts\n${lines.join('\n')}\n\`\`\`\n\n${text}`;
      }
      push({ role: 'assistant', content: text });
    } else if (r < 0.17) {
      push({ role: 'system', content: `${SYSTEM_PROMPT}\n\n${'Reminder: run the tests before you finish. '.repeat(8)}` });
    } else {
      const t = rng.next();
      const callId = out.length;
      let name: string;
      let result: string;
      let intro: string;
      if (t < 0.45 || files.length === 0) {
        let file: BlockFile;
        if (files.length > 0 && rng.chance(0.6)) {
          file = recentFile();
          if (rng.chance(0.4)) editBlockFile(rng, file);
        } else {
          file = newBlockFile(rng, files.length);
          files.push(file);
        }
        const view = pickView(rng);
        if (rng.chance(0.25) && file.lines.length > 30) {
          const from = rng.int(file.lines.length - 20);
          const lines = file.lines.slice(from, from + rng.range(20, 80));
          result = viewLines(lines, from + 1, view).join('\n');
        } else result = viewLines(file.lines, 1, view).join('\n');
        name = 'read_file';
        intro = `Reading ${file.path}.`;
      } else if (t < 0.55) {
        const file = recentFile();
        const at = editBlockFile(rng, file);
        const from = Math.max(0, at - 5);
        const snippet = viewLines(file.lines.slice(from, from + rng.range(10, 16)), from + 1, 'arrow');
        result = `The file ${file.path} has been updated. Here's the result of running \`cat -n\` on a snippet of the edited file:\n${snippet.join('\n')}`;
        name = 'edit_file';
        intro = `Editing ${file.path}.`;
      } else if (t < 0.68) {
        name = 'grep';
        result = grepOutput(rng, files);
        intro = sentence(rng);
      } else if (t < 0.86) {
        name = 'run_tests';
        result = testRun(rng, tests, ++runs);
        intro = 'Running the tests.';
      } else {
        name = 'shell';
        result = tscRun(rng, tscErrors, ++runs);
        intro = sentence(rng);
      }
      push({ role: 'assistant', content: intro, tool_calls: [toolCall(rng, callId, name, name)] });
      push({ role: 'tool', content: result, tool_call_id: `call_${callId}` });
    }
  }
  for (const m of out) m.content = freshCopy(m.content);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Adversarial message sets (issue 3)
// ---------------------------------------------------------------------------------------------

/** Names of the adversarial corpora, see {@link adversarialCorpus}. */
export const ADVERSARIAL_CASES = ['shared-prefix-20k', 'near-identical-4k', 'long-equal-4k', 'near-identical-16k', 'shared-pool-8k'] as const;
export type AdversarialCase = (typeof ADVERSARIAL_CASES)[number];

const LICENSE = [
  '// Copyright (c) 2024 Example Corp. All rights reserved.',
  '// Licensed under the Apache License, Version 2.0 (the "License");',
  '// you may not use this file except in compliance with the License.',
  '// You may obtain a copy of the License at https://www.apache.org/licenses/LICENSE-2.0',
  '// Unless required by applicable law, software is distributed on an "AS IS" BASIS.',
];

/** `count` messages with the same first five lines and distinct bodies of similar length. */
function sharedPrefix(rng: Rng, count: number): TranscriptMessage[] {
  // Every pair has fingerprint overlap 5 and a length ratio above 0.7, so a fingerprint-bucket
  // implementation compares all count^2/2 pairs; none of them is a near duplicate.
  const out: TranscriptMessage[] = [];
  for (let i = 0; i < count; i++) {
    const body: string[] = [];
    for (let k = rng.range(22, 28); k > 0; k--) body.push(codeLine(rng, `p${i}_`));
    out.push({ id: `a${i}`, role: 'tool', content: [...LICENSE, ...body].join('\n') });
  }
  return out;
}

/** `count` copies of one ~3 KB text, each with 1-2 random lines replaced: one big component. */
function nearIdentical(rng: Rng, count: number): TranscriptMessage[] {
  const base: string[] = [];
  for (let k = 70; k > 0; k--) base.push(codeLine(rng));
  const out: TranscriptMessage[] = [];
  for (let i = 0; i < count; i++) {
    const lines = base.slice();
    for (let k = rng.range(1, 2); k > 0; k--) lines[rng.int(lines.length)] = codeLine(rng, `n${i}_`);
    out.push({ id: `a${i}`, role: 'tool', content: lines.join('\n') });
  }
  return out;
}

/**
 * `count` messages of five shared header lines and 35 lines drawn from one pool of 70: every
 * line is frequent, so every pair shares probe lines and passes the fingerprint and length
 * checks, and none is a near duplicate (Jaccard ~0.4).
 */
function sharedPool(rng: Rng, count: number): TranscriptMessage[] {
  const header = LICENSE.slice(0, 5);
  const pool: string[] = [];
  for (let k = 70; k > 0; k--) pool.push(codeLine(rng));
  const out: TranscriptMessage[] = [];
  for (let i = 0; i < count; i++) {
    const body = pool.filter(() => rng.int(2) === 0).slice(0, 35);
    out.push({ id: `a${i}`, role: 'tool', content: [...header, ...body].join('\n') });
  }
  return out;
}

/**
 * `count` distinct messages of exactly `length` characters: three shared header lines (overlap
 * 3, the minimum that makes a pair a candidate), then ~100-character lines unique to the message.
 */
function longEqual(rng: Rng, count: number, length: number): TranscriptMessage[] {
  const header = LICENSE.slice(0, 3).join('\n');
  const out: TranscriptMessage[] = [];
  for (let i = 0; i < count; i++) {
    const lines = [header];
    let size = header.length;
    while (size < length) {
      const line = `${codeLine(rng, `q${i}_`)} // ${sentence(rng)}`.slice(0, 99);
      lines.push(line);
      size += line.length + 1;
    }
    out.push({ id: `a${i}`, role: 'tool', content: lines.join('\n').slice(0, length) });
  }
  return out;
}

/** One of the adversarial corpora, as fresh (JSON-parsed-like) strings. */
export function adversarialCorpus(name: AdversarialCase, seed = 7): TranscriptMessage[] {
  const rng = mulberry32(seed);
  const messages =
    name === 'shared-prefix-20k'
      ? sharedPrefix(rng, 20_000)
      : name === 'near-identical-4k'
        ? nearIdentical(rng, 4_000)
        : name === 'near-identical-16k'
          ? nearIdentical(rng, 16_000)
          : name === 'shared-pool-8k'
            ? sharedPool(rng, 8_000)
            : longEqual(rng, 4_000, 20_000);
  for (const m of messages) m.content = freshCopy(m.content);
  return messages;
}

// ---------------------------------------------------------------------------------------------
// Adversarial message sets for block dedup (issue 14)
// ---------------------------------------------------------------------------------------------

/** Names of the block-dedup adversarial corpora, see {@link blockAdversarialCorpus}. */
export const BLOCK_ADVERSARIAL_CASES = ['one-line-1m', 'identical-lines-20k', 'periodic-3', 'shared-prefix-20k'] as const;
export type BlockAdversarialCase = (typeof BLOCK_ADVERSARIAL_CASES)[number];

/**
 * One of the block-dedup adversarial corpora, as fresh strings:
 * - `one-line-1m`: one message of a million copies of one line;
 * - `identical-lines-20k`: 20,000 messages of 20 identical lines, each after a line of its own
 *   (so the whole-message pass leaves them to the block pass);
 * - `periodic-3`: 20,000 messages of 30-60 lines cycling through the same 3 lines, each from its
 *   own phase, after a line of its own: every window repeats everywhere;
 * - `shared-prefix-20k`: issue 3's 20,000 messages with the same first five lines (~330 chars)
 *   and distinct bodies.
 */
export function blockAdversarialCorpus(name: BlockAdversarialCase, seed = 7): TranscriptMessage[] {
  if (name === 'shared-prefix-20k') return adversarialCorpus(name, seed);
  const rng = mulberry32(seed);
  const messages: TranscriptMessage[] = [];
  if (name === 'one-line-1m') {
    messages.push({ id: 'a0', role: 'tool', content: Array.from({ length: 1_000_000 }, () => 'the same line again').join('\n') });
  } else if (name === 'identical-lines-20k') {
    const body = Array.from({ length: 20 }, () => 'identical line of text in every message').join('\n');
    for (let i = 0; i < 20_000; i++) messages.push({ id: `a${i}`, role: 'tool', content: `output ${i}\n${body}` });
  } else {
    const period = [codeLine(rng), codeLine(rng), codeLine(rng)];
    for (let i = 0; i < 20_000; i++) {
      const lines = [`output ${i}`];
      const phase = rng.int(3);
      for (let k = rng.range(30, 60); k > 0; k--) lines.push(period[(phase + k) % 3] as string);
      messages.push({ id: `a${i}`, role: 'tool', content: lines.join('\n') });
    }
  }
  for (const m of messages) m.content = freshCopy(m.content);
  return messages;
}
