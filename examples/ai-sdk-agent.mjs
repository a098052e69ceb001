#!/usr/bin/env node
// An AI SDK agent loop, offline: a mock model (from `ai/test`) reads files through a tool, some of
// them twice; the ctxdedup middleware rewrites the prompt of every step and prints what it saved.
// Usage: npm run build:ts && node examples/ai-sdk-agent.mjs   (needs the `ai` package installed)
import { generateText, jsonSchema, stepCountIs, tool, wrapLanguageModel } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { dedupeMiddleware } from '../dist/adapters/ai-sdk.js';

const file = (name) => Array.from({ length: 60 }, (_, i) => `export function ${name}${i}(x: number): number { return x * ${i}; } // ${name}`).join('\n');
const FILES = { 'src/math.ts': file('scale'), 'src/util.ts': file('shift') };
const READS = ['src/math.ts', 'src/util.ts', 'src/math.ts', 'src/util.ts', 'src/math.ts'];
const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } };

let step = 0;
const mock = new MockLanguageModelV3({
  doGenerate: async () => {
    const path = READS[step++];
    if (path === undefined) return { content: [{ type: 'text', text: 'Both files look fine.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    const input = JSON.stringify({ path });
    return { content: [{ type: 'tool-call', toolCallId: `call-${step}`, toolName: 'readFile', input }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
  },
});

const model = wrapLanguageModel({
  model: mock,
  middleware: dedupeMiddleware({
    onDedupe: (r) =>
      console.log(`step ${String(step).padStart(2)}: ${r.texts} texts, ${r.rewritten} rewritten, ${r.charsBefore} -> ${r.charsAfter} chars, ~${r.tokensSaved} tokens saved`),
  }),
});

const result = await generateText({
  model,
  system: 'You review TypeScript files.',
  prompt: 'Read src/math.ts and src/util.ts and review them.',
  tools: {
    readFile: tool({
      description: 'Reads a file of the repository',
      inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
      execute: async ({ path }) => FILES[path] ?? `no such file: ${path}`,
    }),
  },
  stopWhen: stepCountIs(10),
});
console.log(`answer: ${result.text}`);
