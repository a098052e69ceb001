import { generateText, jsonSchema, stepCountIs, streamText, tool, wrapLanguageModel, type ModelMessage } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { dedupeMiddleware, dedupePrompt, type DedupeCallReport } from '../../src/adapters/ai-sdk.js';
import { thrown, unsafe } from '../support/assertions.js';
import { diffPaths, sourceFile } from '../support/adapters-shared.js';

type CallOptions = Parameters<MockLanguageModelV3['doGenerate']>[0];
type Prompt = CallOptions['prompt'];
type StreamPart = Awaited<ReturnType<MockLanguageModelV3['doStream']>>['stream'] extends ReadableStream<infer T> ? T : never;

const FILES: Record<string, string> = { 'a.ts': sourceFile('alpha'), 'b.ts': sourceFile('beta') };
/** The files the model asks for, one per step; then it answers. */
const READS = ['a.ts', 'b.ts', 'a.ts', 'a.ts'];

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

const tools = {
  readFile: tool({
    description: 'Reads a file',
    inputSchema: jsonSchema<{ path: string }>({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
    execute: ({ path }) => FILES[path] ?? '',
  }),
  stat: tool({
    description: 'File facts as JSON',
    inputSchema: jsonSchema<{ path: string }>({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
    execute: ({ path }) => ({ path, lines: (FILES[path] ?? '').split('\n'), mode: '0644' }),
  }),
};

const messages: ModelMessage[] = [
  { role: 'system', content: `You are a careful agent.\n${FILES['b.ts']}` },
  {
    role: 'user',
    content: [
      { type: 'text', text: 'Review a.ts and b.ts.' },
      { type: 'file', data: new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]), mediaType: 'image/png' },
    ],
  },
];

/** A mock model that calls `readFile` once per step (the READS list), then answers. */
function generatingModel(prompts: Prompt[]): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(structuredClone(options.prompt));
      const step = prompts.length - 1;
      if (step < READS.length) {
        return {
          content: [{ type: 'tool-call', toolCallId: `call-${step}`, toolName: 'readFile', input: JSON.stringify({ path: READS[step] }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: 'text', text: 'Looks good.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

/** The same agent, streaming. */
function streamingModel(prompts: Prompt[]): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doStream: async (options) => {
      prompts.push(structuredClone(options.prompt));
      const step = prompts.length - 1;
      const parts: StreamPart[] =
        step < READS.length
          ? [
              { type: 'stream-start' as const, warnings: [] },
              { type: 'tool-call' as const, toolCallId: `call-${step}`, toolName: 'readFile', input: JSON.stringify({ path: READS[step] }) },
              { type: 'finish' as const, finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' }, usage },
            ]
          : [
              { type: 'stream-start' as const, warnings: [] },
              { type: 'text-start' as const, id: 't' },
              { type: 'text-delta' as const, id: 't', delta: 'Looks ' },
              { type: 'text-delta' as const, id: 't', delta: 'good.' },
              { type: 'text-end' as const, id: 't' },
              { type: 'finish' as const, finishReason: { unified: 'stop' as const, raw: 'stop' }, usage },
            ];
      return { stream: convertArrayToReadableStream(parts) };
    },
  });
}

/** The text the model sees as the output of the tool result of `toolCallId`. */
function toolOutput(prompt: Prompt, toolCallId: string): unknown {
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const part of m.content) if (part.type === 'tool-result' && part.toolCallId === toolCallId) return part.output;
  }
  return undefined;
}

function expectPrefixChain(prompts: Prompt[]): void {
  for (let k = 0; k + 1 < prompts.length; k++) {
    const now = prompts[k] as Prompt;
    expect((prompts[k + 1] as Prompt).slice(0, now.length)).toEqual(now);
  }
}

/** Diff paths between the plain and the deduplicated prompt are all texts or tool outputs. */
function expectOnlyTextsChanged(plain: Prompt, deduped: Prompt): string[] {
  const changed = diffPaths(plain, deduped);
  for (const path of changed) expect(path).toMatch(/^\$\[\d+\]\.content\[\d+\]\.(text|output\.value)$/);
  return changed;
}

describe('dedupeMiddleware (real ai package, MockLanguageModelV3)', () => {
  it('rewrites every step of a generateText tool loop; step n+1 begins with exactly step n', async () => {
    const plainPrompts: Prompt[] = [];
    await generateText({ model: generatingModel(plainPrompts), tools, messages, stopWhen: stepCountIs(10) });

    const prompts: Prompt[] = [];
    const reports: DedupeCallReport[] = [];
    const model = wrapLanguageModel({ model: generatingModel(prompts), middleware: dedupeMiddleware({ onDedupe: (r) => reports.push(r) }) });
    const result = await generateText({ model, tools, messages, stopWhen: stepCountIs(10) });

    expect(result.text).toBe('Looks good.');
    expect(prompts).toHaveLength(READS.length + 1);
    expect(reports).toHaveLength(READS.length + 1);
    expect(reports.every((r) => r.type === 'generate')).toBe(true);
    expectPrefixChain(prompts);

    const last = prompts[prompts.length - 1] as Prompt;
    const plain = plainPrompts[plainPrompts.length - 1] as Prompt;
    // The first read of a.ts is delivered in full; the later reads of a.ts are references.
    expect(toolOutput(last, 'call-0')).toEqual({ type: 'text', value: FILES['a.ts'] });
    for (const id of ['call-2', 'call-3']) {
      const output = toolOutput(last, id) as { type: string; value: string };
      expect(output.type).toBe('text');
      expect(output.value).toContain('ctxdedup');
      expect(output.value.length).toBeLessThan((FILES['a.ts'] as string).length / 2);
    }
    // System message, the image, tool-call inputs: untouched.
    expect(last[0]).toEqual(plain[0]);
    expect(last[1]).toEqual(plain[1]);
    expectOnlyTextsChanged(plain, last);
    for (let i = 0; i < last.length; i++) {
      const m = last[i] as Prompt[number];
      if (m.role === 'assistant') expect(m).toEqual(plain[i]);
    }
    expect(reports[reports.length - 1]?.tokensSaved).toBeGreaterThan(0);
    expect(reports[0]?.charsSaved).toBe(0);
    expect(reports[reports.length - 1]?.decisions.length).toBeGreaterThanOrEqual(2);
  });

  it('rewrites every step of a streamText tool loop; nothing but the prompt changes', async () => {
    const prompts: Prompt[] = [];
    const reports: DedupeCallReport[] = [];
    const model = wrapLanguageModel({ model: streamingModel(prompts), middleware: dedupeMiddleware({ onDedupe: (r) => reports.push(r) }) });
    const result = streamText({ model, tools, messages, stopWhen: stepCountIs(10) });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe('Looks good.');
    expect(prompts).toHaveLength(READS.length + 1);
    expect(reports.map((r) => r.type)).toEqual(Array(READS.length + 1).fill('stream'));
    expectPrefixChain(prompts);
    const last = prompts[prompts.length - 1] as Prompt;
    expect((toolOutput(last, 'call-3') as { value: string }).value).toContain('ctxdedup');

    // The same conversation through generateText gives the same prompts: stateless, deterministic.
    const again: Prompt[] = [];
    await generateText({
      model: wrapLanguageModel({ model: generatingModel(again), middleware: dedupeMiddleware() }),
      tools,
      messages,
      stopWhen: stepCountIs(10),
    });
    expect(again).toEqual(prompts);
  });

  it('a failure in the middleware surfaces before the first chunk of a stream, never after', async () => {
    const prompts: Prompt[] = [];
    const middleware = dedupeMiddleware({
      onDedupe: () => {
        throw new Error('report sink failed');
      },
    });
    const result = streamText({ model: wrapLanguageModel({ model: streamingModel(prompts), middleware }), messages, onError: () => {} });
    const parts: string[] = [];
    for await (const part of result.fullStream) parts.push(part.type === 'error' ? `error:${String((part.error as Error).message)}` : part.type);
    expect(prompts).toHaveLength(0); // the model was never called
    const error = parts.findIndex((p) => p.startsWith('error:'));
    expect(parts[error]).toBe('error:report sink failed');
    expect(parts.slice(0, error).filter((p) => p.includes('delta') || p === 'tool-call')).toEqual([]);
  });

  it('deduplicates JSON tool outputs, sending a rewritten one as its JSON text', async () => {
    const prompts: Prompt[] = [];
    const model = wrapLanguageModel({
      model: new MockLanguageModelV3({
        doGenerate: async (options) => {
          prompts.push(structuredClone(options.prompt));
          const step = prompts.length - 1;
          if (step < 2) {
            return {
              content: [{ type: 'tool-call', toolCallId: `s${step}`, toolName: 'stat', input: '{"path":"a.ts"}' }],
              finishReason: { unified: 'tool-calls', raw: undefined },
              usage,
              warnings: [],
            };
          }
          return { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
        },
      }),
      middleware: dedupeMiddleware(),
    });
    await generateText({ model, tools, prompt: 'stat a.ts twice', stopWhen: stepCountIs(5) });
    const last = prompts[prompts.length - 1] as Prompt;
    const first = toolOutput(last, 's0') as { type: string; value: unknown };
    expect(first.type).toBe('json');
    expect((first.value as { mode: string }).mode).toBe('0644');
    const second = toolOutput(last, 's1') as { type: string; value: string };
    expect(second.type).toBe('text');
    expect(second.value).toContain('ctxdedup');
  });

  it('passes unknown part types through and counts them; names the path of a malformed prompt', () => {
    const prompt = unsafe<Prompt>([
      {
        role: 'user',
        content: [
          { type: 'text', text: FILES['a.ts'] },
          { type: 'future-part', data: 1 },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: FILES['a.ts'] }] },
    ]);
    const { prompt: out, stats: report } = dedupePrompt(prompt);
    expect(report.unknown).toBe(1);
    expect(out[0]).toBe(prompt[0]);
    expect((out[1]?.content[0] as { text: string }).text).toContain('ctxdedup');
    const e = thrown(() => dedupePrompt(unsafe([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 5 }] }])));
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/^prompt\[0\]\.content\[1\]\.type must be a string/);
    expect(thrown(() => dedupeMiddleware({ minChars: -1 }))).toBeInstanceOf(RangeError);
    expect(thrown(() => dedupeMiddleware(unsafe({ onDedupe: 3 }))).message).toMatch(/^options\.onDedupe must be a function/);
    expect(thrown(() => dedupeMiddleware(unsafe(5))).message).toMatch(/^options must be an object/);
  });

  it('leaves binary file parts as the same bytes', () => {
    const data = new Uint8Array([0, 159, 146, 150, 255]);
    const prompt = unsafe<Prompt>([
      {
        role: 'user',
        content: [
          { type: 'text', text: FILES['a.ts'] },
          { type: 'file', data, mediaType: 'application/octet-stream' },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'file', data, mediaType: 'application/octet-stream' },
          { type: 'text', text: FILES['a.ts'] },
        ],
      },
    ]);
    const { prompt: out } = dedupePrompt(prompt);
    expect((out[0]?.content[1] as { data: Uint8Array }).data).toBe(data);
    expect((out[1]?.content[0] as { data: Uint8Array }).data).toBe(data);
  });
});
