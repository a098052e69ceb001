import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  dedupeMessages,
  dedupeAnthropicMessages,
  dedupeOpenAIChat,
  restoreAnthropicMessages,
  restoreOpenAIChat,
  type AnthropicMessagesRequest,
  type OpenAIChatRequest,
} from '../../src/index.js';
import { extractMessages } from '../../src/cli/formats.js';
import { thrown, unsafe } from '../support/assertions.js';
import { diffPaths, sourceFile } from '../support/adapters-shared.js';

const A = sourceFile('alpha');
const B = sourceFile('beta');

function openaiRequest(): OpenAIChatRequest {
  return {
    model: 'gpt-4.1',
    temperature: 0,
    messages: [
      { role: 'system', content: 'You are a coding agent.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: `Please review:\n${A}` },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
      {
        role: 'assistant',
        content: 'Reading the files.',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{"path":"a.ts"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: A },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c2', type: 'function', function: { name: 'read', arguments: '{"path":"b.ts"}' } }] },
      { role: 'tool', tool_call_id: 'c2', content: [{ type: 'text', text: B }] },
      {
        role: 'user',
        content: [
          { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } },
          { type: 'text', text: A },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'refusal', refusal: 'no' },
          { type: 'text', text: B },
        ],
      },
    ],
  };
}

function anthropicRequest(): AnthropicMessagesRequest {
  return {
    model: 'claude-sonnet-4-5',
    max_tokens: 1024,
    system: [{ type: 'text', text: 'You are a coding agent.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: `Please review:\n${A}` },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'read it', signature: 'sig' },
          { type: 'text', text: A },
          { type: 'tool_use', id: 't1', name: 'read', input: { path: 'a.ts' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: A, cache_control: { type: 'ephemeral' } }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't2', name: 'read', input: { path: 'b.ts' } }] },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 't2',
            content: [
              { type: 'text', text: B },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            ],
          },
          { type: 'text', text: B },
        ],
      },
    ],
  };
}

describe('dedupeOpenAIChat', () => {
  it('replaces later copies, keeps the earliest, leaves everything else untouched, and restores', () => {
    const request = openaiRequest();
    const before = structuredClone(request);
    const { request: out, verbatim, decisions, stats: report } = dedupeOpenAIChat(request);
    expect(request).toEqual(before); // the input is not mutated
    // Only texts of messages that may be rewritten change: never the system message, the text
    // of the message that calls tools, images, audio, refusals or any other field.
    const texts = /^\$\.messages\[(3|5|6|7)\]\.content(\[0\]\.text|\[1\]\.text)?$/;
    const changed = diffPaths(request, out);
    for (const path of changed) expect(path).toMatch(texts);
    // Exact later copies of A and B are replaced (the earliest copies stay).
    expect(changed).toEqual(expect.arrayContaining(['$.messages[6].content[1].text', '$.messages[7].content[1].text']));
    expect(Object.keys(verbatim)).toEqual(expect.arrayContaining(['m6.1', 'm7.1']));
    expect(Object.keys(verbatim)).toHaveLength(changed.length);
    expect(decisions.map((d) => d.path)).toEqual(expect.arrayContaining([['messages', 6, 'content', 1, 'text']]));
    expect(report.texts).toBe(7);
    expect(report.rewritten).toBe(changed.length);
    expect(report.charsSaved).toBeGreaterThan(A.length);
    expect(restoreOpenAIChat(out, verbatim)).toEqual(request);
    // Untouched subtrees are the input's own objects (nothing is re-serialized).
    expect(out.messages[1]).toBe(request.messages[1]);
    expect(out.messages[2]).toBe(request.messages[2]);
  });

  it('never rewrites system messages or the text of a message that calls tools', () => {
    const request: OpenAIChatRequest = {
      messages: [
        { role: 'user', content: A },
        { role: 'system', content: A },
        { role: 'developer', content: A },
        { role: 'assistant', content: A, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'assistant', content: A },
      ],
    };
    const { request: out } = dedupeOpenAIChat(request);
    expect(out.messages.slice(0, 4)).toEqual(request.messages.slice(0, 4));
    expect(out.messages[4]?.content).not.toBe(A);
  });

  it('is prefix-stable: the output for a prefix is a prefix of the output for the whole request', () => {
    const request = openaiRequest();
    const full = dedupeOpenAIChat(request).request.messages;
    for (let k = 0; k <= request.messages.length; k++) {
      const part = dedupeOpenAIChat({ ...request, messages: request.messages.slice(0, k) }).request.messages;
      expect(part).toEqual(full.slice(0, k));
    }
  });

  it('passes unknown part types through untouched and counts them', () => {
    const request: OpenAIChatRequest = {
      messages: [
        { role: 'user', content: [{ type: 'text', text: A }] },
        {
          role: 'user',
          content: [
            { type: 'hologram', beam: { x: 1 } },
            { type: 'text', text: A },
          ],
        },
      ],
    };
    const { request: out, stats: report } = dedupeOpenAIChat(request);
    expect(report.unknown).toBe(1);
    expect(out.messages[1]?.content?.[0]).toBe((request.messages[1]?.content as unknown[])[0]);
  });

  it('names the path of a malformed request', () => {
    const bad = (messages: unknown): Error => thrown(() => dedupeOpenAIChat(unsafe<OpenAIChatRequest>({ messages })));
    expect(thrown(() => dedupeOpenAIChat(unsafe<OpenAIChatRequest>(null)))).toBeInstanceOf(TypeError);
    expect(thrown(() => dedupeOpenAIChat(unsafe<OpenAIChatRequest>({ messages: 'x' }))).message).toMatch(/^request\.messages must be an array/);
    const e = bad([{ role: 'user', content: 'a' }, 1, 2, { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 7 }] }]);
    expect(e.message).toMatch(/^request\.messages\[1\] must be an object/);
    const typed = bad([
      { role: 'user', content: 'a' },
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 7 }] },
    ]);
    expect(typed).toBeInstanceOf(TypeError);
    expect(typed.message).toMatch(/^request\.messages\[1\]\.content\[1\]\.type must be a string/);
    expect(bad([{ role: 'user', content: [{ type: 'text', text: 5 }] }]).message).toMatch(/^request\.messages\[0\]\.content\[0\]\.text must be a string/);
    expect(bad([{ role: 'user', content: 5 }]).message).toMatch(/^request\.messages\[0\]\.content must be a string, an array or null/);
    expect(bad([{ role: 3, content: 'x' }]).message).toMatch(/^request\.messages\[0\]\.role must be a string/);
    expect(thrown(() => dedupeOpenAIChat({ messages: [] }, { minChars: -1 }))).toBeInstanceOf(RangeError);
  });

  it('restore rejects a verbatim entry that names no text of the request', () => {
    const { request: out, verbatim } = dedupeOpenAIChat(openaiRequest());
    const e = thrown(() => restoreOpenAIChat({ ...out, messages: out.messages.slice(0, 2) }, verbatim));
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/^verbatim\["m[3-7][.0-9]*"\] names no text of the request/);
  });

  it('is lossless with the near pass on', () => {
    const request: OpenAIChatRequest = {
      messages: [
        { role: 'user', content: A },
        { role: 'tool', tool_call_id: 'x', content: A.replace('line 3 of', 'line three of') },
        { role: 'tool', tool_call_id: 'y', content: A },
      ],
    };
    const { request: out, verbatim, stats: report } = dedupeOpenAIChat(request, { near: true });
    expect(report.rewritten).toBe(2);
    expect(restoreOpenAIChat(out, verbatim)).toEqual(request);
  });
});

/** A request of tool results, one per content (tool call ids a, b, c, ...). */
function reads(...contents: string[]): OpenAIChatRequest {
  return { messages: contents.map((content, i) => ({ role: 'tool', tool_call_id: String.fromCharCode(97 + i), content })) };
}

/** `A` with one line edited. */
const EDITED = A.replace('line 20 of alpha', 'line twenty of alpha (edited)');

describe('block dedup through the request adapters', () => {
  it('an edited re-read keeps its new lines verbatim and refers to the unchanged runs; restore gives it back', () => {
    const request = reads(A, EDITED);
    const { request: out, verbatim, stats: report } = dedupeOpenAIChat(request);
    const text = out.messages[1]?.content as string;
    expect(text).toContain('line twenty of alpha (edited)');
    expect(text.length).toBeLessThan(EDITED.length / 2);
    expect(report.rewritten).toBe(1);
    expect(restoreOpenAIChat(out, verbatim)).toEqual(request);
    // Turned off, or replaced by the near pass (the two cannot be combined).
    expect(dedupeOpenAIChat(request, { blocks: false }).stats.rewritten).toBe(0);
    expect(thrown(() => dedupeOpenAIChat(request, { blocks: true, near: true }))).toBeInstanceOf(TypeError);
  });

  it("the stats' token totals are the stage's, counted on first read (a call that never reads them counts nothing)", () => {
    const request = reads(A, EDITED, A);
    const { stats } = dedupeOpenAIChat(request);
    expect(Object.getOwnPropertyDescriptor(stats, 'tokensSaved')?.get).toBeTypeOf('function');
    const stage = dedupeMessages(
      request.messages.map((m, i) => ({ id: `m${i}`, role: m.role, content: m.content })),
      { keep: 'earliest', blocks: true, preserve: ['system', 'developer'] },
    ).stats;
    expect(stats.tokensSaved).toBe(stage.tokensSaved);
    expect(stats.blockTokensSaved).toBe(stage.blockTokensSaved);
    expect(stats.tokensSaved).toBeGreaterThan(stats.blockTokensSaved);
    expect(JSON.parse(JSON.stringify(stats))).toMatchObject({ tokensSaved: stage.tokensSaved, exactDuplicates: 1, texts: 3, rewritten: 2 });
  });
});

describe('dedupeAnthropicMessages', () => {
  it('deduplicates text and tool_result blocks, keeps system, thinking, tool_use, images and cache_control', () => {
    const request = anthropicRequest();
    const before = structuredClone(request);
    const { request: out, verbatim, stats: report } = dedupeAnthropicMessages(request);
    expect(request).toEqual(before);
    // messages[1] calls a tool: its text stays; system, thinking, tool_use and images too.
    const changed = diffPaths(request, out);
    for (const path of changed) expect(path).toMatch(/^\$\.messages\[(0|2|4)\]\.content(\[0\]\.content|\[0\]\.content\[0\]\.text|\[1\]\.text)?$/);
    // The text at messages[4] repeats B from the tool_result just before it.
    expect(changed).toContain('$.messages[4].content[1].text');
    expect(out.system).toBe(request.system);
    expect(out.messages[1]).toBe(request.messages[1]);
    const block = (out.messages[2]?.content as Record<string, unknown>[])[0] as Record<string, unknown>;
    expect(block['cache_control']).toEqual({ type: 'ephemeral' });
    expect(block['tool_use_id']).toBe('t1');
    expect(Object.keys(verbatim)).toHaveLength(changed.length);
    expect(report.unknown).toBe(0);
    expect(restoreAnthropicMessages(out, verbatim)).toEqual(request);
  });

  it('reads tool_result text blocks and a string system', () => {
    const request: AnthropicMessagesRequest = {
      system: A,
      messages: [
        { role: 'user', content: B },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'q', content: [{ type: 'text', text: B }] }] },
      ],
    };
    const { request: out, decisions } = dedupeAnthropicMessages(request);
    expect(out.system).toBe(A);
    expect(decisions.map((d) => d.path)).toEqual([['messages', 1, 'content', 0, 'content', 0, 'text']]);
  });

  it('is prefix-stable', () => {
    const request = anthropicRequest();
    const full = dedupeAnthropicMessages(request).request.messages;
    for (let k = 0; k <= request.messages.length; k++) {
      expect(dedupeAnthropicMessages({ ...request, messages: request.messages.slice(0, k) }).request.messages).toEqual(full.slice(0, k));
    }
  });

  it('counts unknown block types and names malformed paths', () => {
    const request: AnthropicMessagesRequest = {
      messages: [
        {
          role: 'user',
          content: [
            { type: 'future_block', data: 1 },
            { type: 'tool_result', tool_use_id: 'x', content: [{ type: 'future_inner' }] },
          ],
        },
      ],
    };
    expect(dedupeAnthropicMessages(request).stats.unknown).toBe(2);
    const e = thrown(() =>
      dedupeAnthropicMessages(
        unsafe<AnthropicMessagesRequest>({
          messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: 1 }] }] }],
        }),
      ),
    );
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/^request\.messages\[0\]\.content\[0\]\.content\[0\]\.text must be a string/);
    expect(thrown(() => dedupeAnthropicMessages(unsafe<AnthropicMessagesRequest>({ system: 5, messages: [] }))).message).toMatch(/^request\.system must be/);
  });
});

describe('one mapping shared with the CLI readers', () => {
  it('the CLI reads the same texts at the same paths as the request adapters', () => {
    for (const request of [openaiRequest(), anthropicRequest()] as { messages: unknown[] }[]) {
      const cli = extractMessages(request.messages, ['messages']).units.map((u) => [u.message.id, u.path]);
      const texts = new Map(cli.map(([id, path]) => [id as string, path]));
      const result =
        'system' in request ? dedupeAnthropicMessages(unsafe<AnthropicMessagesRequest>(request)) : dedupeOpenAIChat(unsafe<OpenAIChatRequest>(request));
      for (const d of result.decisions) expect(texts.get(d.id)).toEqual(d.path);
    }
  });
});

describe('optional peers', () => {
  const check = fileURLToPath(new URL('../support/fixtures/import-without.mjs', import.meta.url));
  const load = (module: string, name: string): string =>
    execFileSync(
      process.execPath,
      ['--import', 'tsx', check, module.startsWith('data:') ? module : pathToFileURL(fileURLToPath(new URL(module, import.meta.url))).href, name],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ).trim();

  it("import { dedupeMessages } from 'ctxdedup' loads neither ai nor the MCP SDK (nor do the adapter subpaths)", () => {
    expect(load('../../src/index.ts', 'dedupeMessages')).toBe('function');
    expect(load('../../src/index.ts', 'dedupeOpenAIChat')).toBe('function');
    expect(load('../../src/adapters/ai-sdk.ts', 'dedupeMiddleware')).toBe('function');
    expect(load('../../src/adapters/mcp.ts', 'dedupeMcpClient')).toBe('function');
    // The check itself catches a load of a peer.
    expect(() => load(`data:text/javascript,${encodeURIComponent("export { generateText } from 'ai';")}`, 'generateText')).toThrow(/loaded optional peer ai/);
  });
});

describe('request helpers: where a decision and its target sit', () => {
  it('duplicateOfPath locates the target in the request (indexes count texts, not messages)', () => {
    const request: OpenAIChatRequest = {
      model: 'gpt-4.1',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hello' },
            { type: 'text', text: A },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: A },
      ],
    };
    const { decisions } = dedupeOpenAIChat(request);
    expect(decisions).toHaveLength(1);
    const d = unsafe<{ path: (string | number)[]; duplicateOfPath: (string | number)[]; duplicateOfIndex: number; duplicateOfId: string }>(decisions[0]);
    expect(d.path).toEqual(['messages', 1, 'content']);
    expect(d.duplicateOfPath).toEqual(['messages', 0, 'content', 1, 'text']);
    expect(d.duplicateOfId).toBe('m0.1');
    // The index counts texts: text 1 is the second part of message 0.
    expect(d.duplicateOfIndex).toBe(1);
    let at: unknown = request;
    for (const step of d.duplicateOfPath) at = (at as Record<string | number, unknown>)[step];
    expect(at).toBe(A);
  });
});
