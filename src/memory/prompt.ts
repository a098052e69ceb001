/**
 * The prompt that asks a language model to merge near-duplicate memories into one.
 * @module
 */
import type { Memory } from './store.js';
import { validateMemories } from './validate.js';

/** Memories oldest first; those without a timestamp first, ties kept in input order. */
export function oldestFirst<M extends Memory>(memories: readonly M[]): M[] {
  return memories
    .map((memory, order) => ({ memory, order }))
    .sort((a, b) => (a.memory.timestamp ?? -Infinity) - (b.memory.timestamp ?? -Infinity) || a.order - b.order)
    .map((x) => x.memory);
}

function speakerOf(memory: Memory): string | undefined {
  const meta = memory.metadata;
  if (meta === undefined) return undefined;
  for (const key of ['speaker', 'author', 'user', 'source']) {
    const value = meta[key];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}

/**
 * Builds the merge prompt for two or more memories about the same fact. The rules: combine all
 * distinct facts; on conflict prefer the newer statement; be concise but complete; keep who said
 * it. The memories are listed oldest to newest with their timestamps (and speaker, when the
 * metadata names one as `speaker`, `author`, `user` or `source`). The model is asked to answer
 * with the merged memory text only.
 * @throws TypeError / RangeError naming the offending memory (`memories[2].content must be a
 *   string`), holes included; a timestamp must be a valid `Date` (|t| ≤ 8.64e15 ms).
 */
export function buildMergePrompt(memories: readonly Memory[]): string {
  const clean = validateMemories(memories, 'memories');
  const listed = oldestFirst(clean).map((m, i) => {
    const when = m.timestamp === undefined ? 'time unknown' : new Date(m.timestamp).toISOString();
    const speaker = speakerOf(m);
    return `${i + 1}. [${when}${speaker === undefined ? '' : `, said by ${speaker}`}] ${m.content}`;
  });
  return [
    `The following ${clean.length} memories describe the same fact, listed from oldest to newest.`,
    'Merge them into one memory. Rules:',
    '- Combine all distinct facts: nothing stated in any memory may be lost.',
    '- When they conflict, prefer the newer memory.',
    '- Be concise but complete: state each fact once.',
    '- Keep who said it: preserve attributions and speakers.',
    '',
    'Memories (oldest first):',
    ...listed,
    '',
    'Answer with the merged memory text only.',
  ].join('\n');
}
