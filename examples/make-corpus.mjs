#!/usr/bin/env node
// Generates a seeded, synthetic corpus of coding-agent sessions in every format `ctxdedup dedupe`
// reads: OpenAI chat JSON, Anthropic Messages JSON, agent session JSONL (one event per line),
// ctxdedup/CCE message arrays, and JSONL of { session, messages } records (one also gzipped).
// Agents re-read files, re-run tests and repeat greps, within a session and across sessions.
//
//   node examples/make-corpus.mjs [dir]          # the small sample under examples/corpus
//   import { writeSessionsJsonl } from './make-corpus.mjs'  # big corpora for tests and benchmarks
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

/** A small LCG so every run writes the same bytes. */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const WORDS = ['load', 'parse', 'render', 'merge', 'flush', 'fetch', 'cache', 'index', 'score', 'split'];

function sourceFile(rand, name, lines) {
  const pick = (l) => l[Math.floor(rand() * l.length)];
  const out = [`// ${name}`, `import { readFile } from 'node:fs/promises';`, ''];
  for (let i = 0; i < lines; i++) {
    out.push(`export function ${pick(WORDS)}${i}(input: string): string {`);
    out.push(`  return input.${pick(['trim', 'toLowerCase', 'normalize'])}() + '${pick(['a', 'b', 'c'])}${i}';`);
    out.push('}');
  }
  return out.join('\n');
}

function edit(rand, text) {
  const lines = text.split('\n');
  const at = 4 + Math.floor(rand() * (lines.length - 5));
  lines[at] = `  return input.slice(${Math.floor(rand() * 9)}); // edited`;
  return lines.join('\n');
}

function testLog(rand, failing) {
  const files = Array.from({ length: 10 }, (_, i) => ` ✓ tests/module${i}.test.ts (${5 + i} tests) ${20 + Math.floor(rand() * 3) * 7}ms`);
  if (failing) files.push(' ✗ tests/parser.test.ts (4 tests) 31ms', '   → expected "ok" but got undefined');
  return ['> project@1.0.0 test', '> vitest run', '', ' RUN  v4.1.0 /project', '', ...files, '', ` Tests  ${failing ? '1 failed | ' : ''}96 passed`].join('\n');
}

/** A pool of repository files shared by all sessions (agents read the same files again and again). */
export function makePool(seed, size = 24) {
  const rand = rng(seed);
  return Array.from({ length: size }, (_, i) => {
    const name = `src/${WORDS[i % WORDS.length]}${i}.ts`;
    return { name, text: sourceFile(rand, name, 6 + Math.floor(rand() * 18)) };
  });
}

/**
 * One coding-agent session as neutral steps: { role, content } plus tool calls and results,
 * { role: 'assistant', call: { id, name, input } } and { role: 'tool', callId, content }.
 */
export function makeSession(rand, pool, steps = 12) {
  const pick = (l) => l[Math.floor(rand() * l.length)];
  const out = [
    { role: 'system', content: 'You are a coding agent. Read files before editing them, run the tests after every change, and keep answers short.' },
  ];
  const task = pick(['The parser test fails on empty input.', 'Rendering drops the last line.', 'The cache never expires.', 'Index rebuilds are slow.']);
  out.push({ role: 'user', content: `${task} Please fix it and make sure nothing else breaks.` });
  const files = new Map();
  const grep = `${Array.from({ length: 14 }, (_, i) => `src/module${i}.ts:${10 + i}:  const timeout = options.timeout ?? ${1000 + i};`).join('\n')}`;
  let call = 0;
  const tool = (name, input, content) => {
    const id = `call_${++call}`;
    out.push({ role: 'assistant', content: `Running ${name}.`, call: { id, name, input } });
    out.push({ role: 'tool', callId: id, content });
  };
  for (let s = 0; s < steps; s++) {
    const r = rand();
    if (r < 0.45) {
      const file = pick(pool);
      const text = files.get(file.name) ?? file.text;
      files.set(file.name, text);
      tool('read_file', { path: file.name }, text);
    } else if (r < 0.6) {
      const file = pick(pool);
      files.set(file.name, edit(rand, files.get(file.name) ?? file.text));
      out.push({ role: 'assistant', content: `Edited ${file.name}: handle the empty case before parsing.` });
    } else if (r < 0.85) {
      tool('run_tests', {}, testLog(rand, rand() < 0.5));
    } else {
      tool('grep', { pattern: 'timeout' }, grep);
    }
  }
  out.push({ role: 'assistant', content: 'Done: the fix is in and the tests pass.' });
  return out;
}

/** OpenAI chat: { messages } with tool_calls and tool messages. */
export function toOpenAI(steps) {
  return {
    model: 'gpt-4o',
    messages: steps.map((m) =>
      m.call
        ? {
            role: 'assistant',
            content: m.content,
            tool_calls: [{ id: m.call.id, type: 'function', function: { name: m.call.name, arguments: JSON.stringify(m.call.input) } }],
          }
        : m.role === 'tool'
          ? { role: 'tool', tool_call_id: m.callId, content: m.content }
          : { role: m.role, content: m.content },
    ),
  };
}

function anthropicMessages(steps) {
  const messages = [];
  for (const m of steps) {
    if (m.role === 'system') continue;
    if (m.call)
      messages.push({
        role: 'assistant',
        content: [
          { type: 'text', text: m.content },
          { type: 'tool_use', id: m.call.id, name: m.call.name, input: m.call.input },
        ],
      });
    else if (m.role === 'tool')
      messages.push({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: m.callId, content: messages.length % 2 ? m.content : [{ type: 'text', text: m.content }] }],
      });
    else messages.push({ role: m.role, content: m.role === 'user' ? m.content : [{ type: 'text', text: m.content }] });
  }
  return messages;
}

/** Anthropic Messages: { system, messages } with text, tool_use and tool_result blocks. */
export function toAnthropic(steps) {
  return { model: 'claude-sonnet-4-5', max_tokens: 4096, system: steps[0].content, messages: anthropicMessages(steps) };
}

/** Agent session JSONL: one event per line with uuid/parentUuid and the message inside. */
export function toAgentJsonl(steps, sessionId, rand) {
  const hex = () =>
    Math.floor(rand() * 2 ** 32)
      .toString(16)
      .padStart(8, '0');
  let parent = null;
  const lines = [JSON.stringify({ type: 'summary', summary: 'Fix a failing test', leafUuid: null })];
  for (const message of anthropicMessages(steps)) {
    const uuid = `${hex()}-${hex().slice(0, 4)}-4${hex().slice(0, 3)}-8${hex().slice(0, 3)}-${hex()}${hex().slice(0, 4)}`;
    lines.push(JSON.stringify({ type: message.role, uuid, parentUuid: parent, sessionId, cwd: '/project', message }));
    parent = uuid;
  }
  return `${lines.join('\n')}\n`;
}

/** ctxdedup / context-compression-engine messages: [{ id, index, role, content }]. */
export function toCce(steps) {
  return steps.map((m, index) => ({
    id: `m${index}`,
    index,
    role: m.role,
    content: m.content,
    ...(m.call ? { tool_calls: [{ id: m.call.id, type: 'function', function: { name: m.call.name, arguments: JSON.stringify(m.call.input) } }] } : {}),
  }));
}

/** One { session, messages } record (ctxdedup message dialect) as a JSONL line. */
export function sessionRecord(steps, session) {
  return JSON.stringify({ session, messages: toCce(steps) });
}

/** Writes the small sample corpus (a few hundred kB) into `dir`. */
export function writeSampleCorpus(dir, seed = 20261122) {
  const rand = rng(seed);
  const pool = makePool(seed);
  for (const sub of ['openai', 'anthropic', 'agent', 'ctxdedup']) mkdirSync(join(dir, sub), { recursive: true });
  const json = (v) => `${JSON.stringify(v, null, 2)}\n`;
  for (let i = 0; i < 4; i++) writeFileSync(join(dir, 'openai', `chat-${i}.json`), json(toOpenAI(makeSession(rand, pool))));
  for (let i = 0; i < 3; i++) writeFileSync(join(dir, 'anthropic', `conversation-${i}.json`), json(toAnthropic(makeSession(rand, pool))));
  for (let i = 0; i < 3; i++) writeFileSync(join(dir, 'agent', `session-${i}.jsonl`), toAgentJsonl(makeSession(rand, pool), `sess-${i}`, rand));
  writeFileSync(join(dir, 'ctxdedup', 'messages.json'), json(toCce(makeSession(rand, pool))));
  const records = (n, from) => `${Array.from({ length: n }, (_, i) => sessionRecord(makeSession(rand, pool), `s${from + i}`)).join('\n')}\n`;
  writeFileSync(join(dir, 'ctxdedup', 'sessions.jsonl'), records(6, 0));
  writeFileSync(join(dir, 'ctxdedup', 'archive.jsonl.gz'), gzipSync(Buffer.from(records(4, 6))));
}

/**
 * Streams a sessions JSONL file of about `bytes` bytes (for tests and benchmarks); returns counts.
 * Sessions repeat files from a shared pool, so there is plenty to deduplicate.
 */
export async function writeSessionsJsonl(path, bytes, { seed = 7, steps = 16 } = {}) {
  const rand = rng(seed);
  const pool = makePool(seed, 64);
  const out = createWriteStream(path, { highWaterMark: 1 << 20 });
  let written = 0;
  let sessions = 0;
  let batch = [];
  let batchBytes = 0;
  while (written < bytes) {
    const line = `${sessionRecord(makeSession(rand, pool, steps), `s${sessions}`)}\n`;
    sessions++;
    written += Buffer.byteLength(line);
    batch.push(line);
    batchBytes += line.length;
    if (batchBytes > 1 << 20) {
      if (!out.write(batch.join(''))) await once(out, 'drain');
      batch = [];
      batchBytes = 0;
    }
  }
  out.end(batch.join(''));
  await once(out, 'finish');
  return { bytes: written, sessions };
}

if (import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const dir = process.argv[2] ?? new URL('./corpus', import.meta.url).pathname;
  writeSampleCorpus(dir);
  console.log(`wrote the sample corpus to ${dir}`);
}
