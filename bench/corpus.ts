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

function grepOutput(rng: Rng, files: readonly SourceFile[]): string {
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

/**
 * A synthetic agent transcript of `count` messages (about 2-4 KB per eligible message).
 * Generation is sequential, so a shorter transcript with the same seed is a prefix of a longer one.
 */
export function transcript(count: number, seed: number): TranscriptMessage[] {
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
// Adversarial message sets (issue 3)
// ---------------------------------------------------------------------------------------------

/** Names of the adversarial corpora, see {@link adversarialCorpus}. */
export const ADVERSARIAL_CASES = ['shared-prefix-20k', 'near-identical-4k', 'long-equal-4k'] as const;
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
        : longEqual(rng, 4_000, 20_000);
  for (const m of messages) m.content = freshCopy(m.content);
  return messages;
}
