#!/usr/bin/env node
// Regenerates sample-transcript.json: a seeded, synthetic coding-agent session in which the agent
// re-reads files (unchanged and after small edits), re-runs tests and repeats a grep.
import { writeFileSync } from 'node:fs';

let seed = 20261121;
const rand = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const pick = (list) => list[Math.floor(rand() * list.length)];

function sourceFile(name, lines) {
  const out = [`// ${name}`, `import { readFile } from 'node:fs/promises';`, ''];
  for (let i = 0; i < lines; i++) {
    out.push(`export function ${pick(['load', 'parse', 'render', 'merge', 'flush'])}${i}(input: string): string {`);
    out.push(`  return input.${pick(['trim', 'toLowerCase', 'normalize'])}() + '${pick(['a', 'b', 'c'])}${i}';`);
    out.push('}');
  }
  return out.join('\n');
}

function edit(text) {
  const lines = text.split('\n');
  const at = 4 + Math.floor(rand() * (lines.length - 5));
  lines[at] = `  return input.slice(${Math.floor(rand() * 9)}); // edited`;
  return lines.join('\n');
}

function testLog(failing) {
  const files = Array.from({ length: 12 }, (_, i) => ` ✓ tests/module${i}.test.ts (${5 + i} tests) ${20 + i * 7}ms`);
  if (failing) files.push(' ✗ tests/parser.test.ts (4 tests) 31ms', '   → expected "ok" but got undefined');
  return ['> project@1.0.0 test', '> vitest run', '', ' RUN  v4.1.0 /project', '', ...files, '', ` Tests  ${failing ? '1 failed | ' : ''}96 passed`].join('\n');
}

const files = { 'src/parser.ts': sourceFile('src/parser.ts', 14), 'src/render.ts': sourceFile('src/render.ts', 10) };
const grep = Array.from({ length: 18 }, (_, i) => `src/module${i}.ts:${10 + i}:  const timeout = options.timeout ?? ${1000 + i};`).join('\n');
const messages = [
  { role: 'system', content: 'You are a coding agent. Read files before editing them, run the tests after every change, and keep answers short.' },
];
const read = (path, content) => {
  messages.push({
    role: 'assistant',
    content: `Reading ${path}.`,
    tool_calls: [{ id: `call_${messages.length}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path }) } }],
  });
  messages.push({ role: 'tool', tool_call_id: `call_${messages.length - 1}`, content });
};
messages.push({ role: 'user', content: 'The parser test fails on empty input. Please fix it and make sure nothing else breaks.' });
read('src/parser.ts', files['src/parser.ts']);
read('src/render.ts', files['src/render.ts']);
messages.push({ role: 'tool', content: testLog(true) });
messages.push({ role: 'tool', content: grep });
read('src/parser.ts', files['src/parser.ts']);
files['src/parser.ts'] = edit(files['src/parser.ts']);
read('src/parser.ts', files['src/parser.ts']);
messages.push({ role: 'tool', content: testLog(true) });
messages.push({ role: 'tool', content: grep });
read('src/render.ts', files['src/render.ts']);
files['src/parser.ts'] = edit(files['src/parser.ts']);
read('src/parser.ts', files['src/parser.ts']);
messages.push({ role: 'tool', content: testLog(false) });
messages.push({ role: 'assistant', content: 'Fixed: the parser now returns an empty document for empty input, and all 96 tests pass.' });

const withIds = messages.map((m, i) => ({ id: `m${i}`, ...m }));
writeFileSync(new URL('./sample-transcript.json', import.meta.url), `${JSON.stringify(withIds, null, 2)}\n`);
console.log(`wrote ${withIds.length} messages`);
