import { generateText, wrapLanguageModel, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { dedupeMiddleware, dedupePrompt } from '../../src/adapters/ai-sdk.js';
import { thrown, unsafe } from '../support/assertions.js';

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
    it(`${name}: a TypeError naming the prompt path`, () => {
      const error = thrown(() => dedupePrompt(withValue(value)));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(/^prompt\[0\]\.content\[0\]\.output\.value cannot be serialized as JSON: /);
    });
  }
});
