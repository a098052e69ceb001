import { generateText, jsonSchema, stepCountIs, tool, wrapLanguageModel, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { dedupeMiddleware, dedupePrompt } from '../../src/adapters/ai-sdk.js';
import { unsafe } from '../support/assertions.js';

type Prompt = Parameters<MockLanguageModelV3['doGenerate']>[0]['prompt'];

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** What a provider-executed web search (Anthropic `web_search`) returns: JSON the provider reads back. */
const RESULTS = Array.from({ length: 8 }, (_, i) => ({
  type: 'web_search_result',
  url: `https://example.com/${i}`,
  title: `Result ${i} with a long enough title`,
  encryptedContent: `Eo8BCioIAhgBIiQ${'x'.repeat(40)}`,
}));

/** An assistant turn with a provider-executed tool call and its result (both inside the assistant message). */
function searchTurn(id: string): ModelMessage {
  return {
    role: 'assistant',
    content: [
      { type: 'tool-call', toolCallId: id, toolName: 'web_search', input: { query: 'q' }, providerExecuted: true },
      { type: 'tool-result', toolCallId: id, toolName: 'web_search', output: { type: 'json', value: RESULTS } },
      { type: 'text', text: 'Summary.' },
    ],
  };
}

const conversation: ModelMessage[] = [
  { role: 'user', content: 'search' },
  searchTurn('srvtoolu_1'),
  { role: 'user', content: 'again' },
  searchTurn('srvtoolu_2'),
  { role: 'user', content: 'thanks' },
];

function recordingModel(prompts: Prompt[]): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(structuredClone(options.prompt));
      return { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

describe('AI SDK middleware: provider-executed tool results are never rewritten', () => {
  it('tool-result parts of assistant messages reach the provider byte-identical (real ai package)', async () => {
    const raw: Prompt[] = [];
    await generateText({ model: recordingModel(raw), messages: conversation });
    const seen: Prompt[] = [];
    await generateText({ model: wrapLanguageModel({ model: recordingModel(seen), middleware: dedupeMiddleware() }), messages: conversation });
    const before = raw[0] as Prompt;
    const after = seen[0] as Prompt;
    // The AI SDK puts provider-executed results inside the assistant message.
    const results = (p: Prompt) => p.flatMap((m) => (m.role === 'assistant' ? m.content.filter((c) => c.type === 'tool-result') : []));
    expect(results(before)).toHaveLength(2);
    expect(results(after)).toEqual(results(before));
    expect(after).toEqual(before);
  });

  it('dedupePrompt leaves them out of dedup entirely (neither rewritten nor a reference target)', () => {
    const prompt = unsafe<Prompt>([
      { role: 'user', content: [{ type: 'text', text: 'search' }] },
      searchTurn('srvtoolu_1'),
      { role: 'user', content: [{ type: 'text', text: 'again' }] },
      searchTurn('srvtoolu_2'),
    ]);
    const { prompt: out, decisions, stats } = dedupePrompt(prompt);
    expect(out).toEqual(prompt);
    expect(decisions).toEqual([]);
    expect(stats.rewritten).toBe(0);
    const json = JSON.stringify(RESULTS);
    // A client tool's identical JSON output is not turned into a reference to the provider's result.
    const mixed = unsafe<Prompt>([
      searchTurn('srvtoolu_1'),
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'fetch', input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'fetch', output: { type: 'text', value: json } }] },
    ]);
    expect(dedupePrompt(mixed).prompt).toEqual(mixed);
  });

  it('a tool-result in a tool message whose call was provider-executed is left alone too', () => {
    const prompt = unsafe<Prompt>([
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 's1', toolName: 'web_search', input: {}, providerExecuted: true }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 's1', toolName: 'web_search', output: { type: 'json', value: RESULTS } }] },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 's2', toolName: 'web_search', input: {}, providerExecuted: true }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 's2', toolName: 'web_search', output: { type: 'json', value: RESULTS } }] },
    ]);
    expect(dedupePrompt(prompt).prompt).toEqual(prompt);
  });

  it('client tool results are still deduplicated', () => {
    const text = Array.from({ length: 20 }, (_, i) => `line ${i} of a file that is long enough to matter`).join('\n');
    const call = (id: string): Prompt[number] => unsafe({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: id, toolName: 'read', input: {} }] });
    const result = (id: string): Prompt[number] =>
      unsafe({ role: 'tool', content: [{ type: 'tool-result', toolCallId: id, toolName: 'read', output: { type: 'text', value: text } }] });
    const r = dedupePrompt(unsafe<Prompt>([call('a'), result('a'), call('b'), result('b')]));
    expect(r.stats.rewritten).toBe(1);
  });
});

describe('AI SDK middleware: JSON outputs that cannot be serialized', () => {
  const withValue = (value: unknown) =>
    unsafe<Prompt>([{ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 't', output: { type: 'json', value } }] }]);
  const cyclic: Record<string, unknown> = {};
  cyclic['self'] = cyclic;
  const cases: [string, unknown][] = [
    ['a BigInt', { n: 10n }],
    ['a cycle', cyclic],
    [
      'a throwing toJSON',
      {
        toJSON() {
          throw new Error('boom');
        },
      },
    ],
  ];
  for (const [name, value] of cases) {
    it(`${name}: passes through untouched (the provider serializes it its own way)`, () => {
      const prompt = withValue(value);
      const r = dedupePrompt(prompt);
      expect(r.prompt).toBe(prompt);
      expect(r.stats.texts).toBe(0);
    });
  }

  it('a tool loop whose tool returns a BigInt works through the middleware (real ai package)', async () => {
    const seen: Prompt[] = [];
    let step = 0;
    const model = new MockLanguageModelV3({
      doGenerate: async (options) => {
        seen.push(options.prompt);
        step++;
        return step === 1
          ? {
              content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'count', input: '{}' }],
              finishReason: { unified: 'tool-calls', raw: 'tool_use' },
              usage,
              warnings: [],
            }
          : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      },
    });
    const result = await generateText({
      model: wrapLanguageModel({ model, middleware: dedupeMiddleware() }),
      prompt: 'count',
      tools: { count: tool({ inputSchema: jsonSchema({ type: 'object' }), execute: async () => ({ count: 10n }) }) },
      stopWhen: stepCountIs(3),
    });
    expect(result.text).toBe('done');
    const output = (seen[1]?.at(-1)?.content[0] as unknown as { output: { value: { count: bigint } } }).output;
    expect(output.value.count).toBe(10n);
  });
});

describe('AI SDK middleware: what a rewritten output keeps, and which outputs take part per provider', () => {
  const longLines = Array.from({ length: 12 }, (_, i) => `line ${i} of a file that the agent read twice, long enough to matter`).join('\n');
  const json = (id: string, extra: Record<string, unknown> = {}) =>
    ({
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: id, toolName: 'read', output: { type: 'json', value: { text: longLines }, ...extra } }],
    }) as const;

  it('a rewritten json output keeps its providerOptions (a cache breakpoint stays on the wire)', () => {
    const cache = { anthropic: { cacheControl: { type: 'ephemeral' } } };
    const r = dedupePrompt(unsafe<Prompt>([json('a'), json('b', { providerOptions: cache })]));
    expect(r.stats.rewritten).toBe(1);
    const output = (r.prompt[1]?.content[0] as { output: Record<string, unknown> }).output;
    expect(output['type']).toBe('text');
    expect(output['value']).toMatch(/^\[ctxdedup: duplicate of m0\.0/);
    expect(output['providerOptions']).toEqual(cache);
  });

  const contentOutput = (id: string, text: string) =>
    ({
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: id, toolName: 'read', output: { type: 'content', value: [{ type: 'text', text }] } }],
    }) as const;
  const edited = longLines.replace('line 6 of', 'line six of');
  const messages = unsafe<ModelMessage[]>([
    { role: 'user', content: 'read it' },
    contentOutput('a', longLines),
    { role: 'user', content: 'again' },
    contentOutput('b', edited),
  ]);

  async function sentTo(provider: string): Promise<Prompt> {
    const seen: Prompt[] = [];
    const model = new MockLanguageModelV3({
      provider,
      doGenerate: async (options) => {
        seen.push(options.prompt);
        return { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      },
    });
    await generateText({ model: wrapLanguageModel({ model, middleware: dedupeMiddleware() }), messages });
    return seen[0] as Prompt;
  }
  const lastItem = (p: Prompt) => ((p.at(-1)?.content[0] as { output: { value: { text: string }[] } }).output.value[0] as { text: string }).text;

  it('content items become block references for providers that send them as text blocks', async () => {
    for (const provider of ['anthropic.messages', 'amazon-bedrock.anthropic.messages', 'openai.responses']) {
      expect(lastItem(await sentTo(provider)), provider).toMatch(/\[ctxdedup: \d+ lines unchanged, = m1\.0\.0 lines /);
    }
  });

  it('content items pass through for providers that send the output as one JSON string (OpenAI Chat)', async () => {
    for (const provider of ['openai.chat', 'mock-provider']) {
      expect(lastItem(await sentTo(provider)), provider).toBe(edited);
    }
  });
});

describe('AI SDK middleware: an async onDedupe', () => {
  it('is awaited; its rejection fails the model call instead of escaping as an unhandled rejection', async () => {
    const model = new MockLanguageModelV3({
      doGenerate: async () => ({ content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }),
    });
    const order: string[] = [];
    const ok = dedupeMiddleware({
      onDedupe: async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        order.push('onDedupe');
      },
    });
    await generateText({ model: wrapLanguageModel({ model, middleware: ok }), prompt: 'hi' });
    order.push('call');
    expect(order).toEqual(['onDedupe', 'call']);
    const failing = dedupeMiddleware({
      onDedupe: async () => {
        throw new Error('report sink down');
      },
    });
    await expect(generateText({ model: wrapLanguageModel({ model, middleware: failing }), prompt: 'hi' })).rejects.toThrow('report sink down');
  });
});
