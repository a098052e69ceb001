/**
 * The public input types accept the types users actually have: their own interfaces (which
 * TypeScript never matches against an index signature) and the request types of the real
 * `openai` and `@anthropic-ai/sdk` packages. The type checks are compile-time (`npm run lint`
 * type-checks this file: it failed to compile before the constraints became index-free); the
 * assertions check that the calls do their job on such values.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  dedupeAnthropicMessages,
  dedupeMessages,
  dedupeOpenAIChat,
  dedupeSources,
  deduplicate,
  restoreAnthropicMessages,
  restoreMessages,
  restoreOpenAIChat,
  type DedupeFindingsStats,
  type DedupeSourcesStats,
  type DeduplicateStats,
  type MatchKind,
} from '../../src/index.js';
import { dedupe as cceDedupe } from '../../src/compat/cce.js';
import type { ServerMetrics } from '../../src/server/index.js';

/** A file body long enough to be deduplicated, whole or as a run of lines. */
const FILE = Array.from({ length: 12 }, (_, i) => `export const value${i} = compute(${i}, 'a line of a source file');`).join('\n');

interface ChatMeta {
  source: string;
}

interface ChatMessage {
  id: string;
  role: 'user' | 'assistant' | 'tool';
  content: string;
  metadata?: ChatMeta;
  sentAt: Date;
}

describe('public input types', () => {
  it('dedupeMessages and restoreMessages take a message interface and return it', () => {
    const at = new Date(0);
    const conversation: ChatMessage[] = [
      { id: 'a', role: 'tool', content: FILE, metadata: { source: 'read' }, sentAt: at },
      { id: 'b', role: 'tool', content: FILE, sentAt: at },
    ];
    const { messages, verbatim } = dedupeMessages(conversation, { keep: 'earliest' });
    const second: ChatMessage | undefined = messages[1];
    expect(second?.content).toContain('duplicate of a');
    expect(second?.sentAt).toBe(at);
    const restored: ChatMessage[] = restoreMessages(messages, verbatim);
    expect(restored).toEqual(conversation);
  });

  it('deduplicate, dedupeSources and ctxdedup/cce take interfaces', () => {
    interface Doc {
      content: string;
      title: string;
    }
    const docs: Doc[] = [
      { content: FILE, title: 'one' },
      { content: FILE, title: 'two' },
    ];
    const kept = deduplicate(docs.map((item, i) => ({ item, score: 2 - i })));
    expect(kept.map((s) => s.item.title)).toEqual(['one']);

    interface Src {
      url: string;
      credibility_score: number;
    }
    const sources: Src[] = [
      { url: 'https://a.example/x', credibility_score: 0.2 },
      { url: 'https://a.example/x', credibility_score: 0.9 },
    ];
    const { kept: unique } = dedupeSources(sources);
    const best: Src | undefined = unique[0];
    expect(unique).toHaveLength(1);
    expect(best?.credibility_score).toBe(0.9);

    interface CceLike {
      id: number;
      role: string;
      content: string;
    }
    const cce: CceLike[] = [
      { id: 1, role: 'user', content: FILE },
      { id: 2, role: 'user', content: FILE },
      ...Array.from({ length: 4 }, (_, i) => ({ id: 3 + i, role: 'user', content: `recent ${i}` })),
    ];
    const out = cceDedupe(cce);
    // CCE keeps the latest copy.
    expect(out.messages[0]?.content).not.toBe(FILE);
    expect(out.messages[0]?.id).toBe(1);
    expect(out.messages[1]?.content).toBe(FILE);
  });

  it("dedupeOpenAIChat takes the openai package's request type and returns it", () => {
    const request: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
      model: 'gpt-4o',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: `Review this:\n${FILE}` }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: FILE },
      ],
      temperature: 0,
    };
    const { request: smaller, verbatim, stats } = dedupeOpenAIChat(request);
    // What the SDK's `create` takes: the request's own type comes back.
    const sendable: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = smaller;
    expect(sendable.model).toBe('gpt-4o');
    expect(stats.charsSaved).toBeGreaterThan(0);
    expect(restoreOpenAIChat(smaller, verbatim)).toEqual(request);
  });

  it('dedupeAnthropicMessages takes the @anthropic-ai/sdk request type and returns it', () => {
    const request: Anthropic.MessageCreateParamsNonStreaming = {
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: `Review this:\n${FILE}` },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read', input: { path: 'a.ts' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: FILE }] }] },
      ],
    };
    const { request: smaller, verbatim, stats } = dedupeAnthropicMessages(request);
    const sendable: Anthropic.MessageCreateParamsNonStreaming = smaller;
    expect(sendable.max_tokens).toBe(1024);
    expect(stats.charsSaved).toBeGreaterThan(0);
    expect(restoreAnthropicMessages(smaller, verbatim)).toEqual(request);
  });

  it('names every type the public results use', () => {
    // Compile-time: these were used by public result types but could not be imported.
    const kinds: MatchKind[] = ['exact', 'near'];
    const names: (keyof DeduplicateStats | keyof DedupeSourcesStats | keyof DedupeFindingsStats | keyof ServerMetrics)[] = [];
    expect(kinds).toHaveLength(2);
    expect(names).toEqual([]);
  });
});
