/**
 * dedupeMessages / dedupeMessagesAsync / restoreMessages: hand-built conversations, bad input,
 * Unicode traps, and round trips on every golden input and on generated transcripts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  countTokens,
  DEFAULT_TEMPLATES,
  dedupeMessages,
  ASYNC_MIN_UNITS,
  dedupeMessagesAsync,
  restoreMessages,
  type DedupeMessagesOptions,
  type DedupeMessagesResult,
  type Message,
  type MessageDecision,
  type ReferenceInfo,
  type WholeMessageDecision,
} from '../../src/index.js';
import { dedupe as dedupeCce } from '../../src/compat/cce.js';
import { analyze, CCE_SKIP_PREFIXES, jaccard, normalizedLines } from '../support/message-oracle.js';
import { SHARED } from '../support/shared.js';
import { thrown, unsafe, wholeDecisions } from '../support/assertions.js';

// ---------------------------------------------------------------------------------------------
// Helpers

/** A multi-line text of `n` lines, well over 200 UTF-16 units for n >= 6. */
function text(tag: string, n = 12): string {
  return Array.from({ length: n }, (_, i) => `${tag}: line ${i} of the file, const value${i} = ${i * 7};`).join('\n');
}

function msg(id: string, content: unknown, extra: Partial<Message> = {}): Message {
  return { id, role: 'user', content, ...extra };
}

function fill(template: string, info: ReferenceInfo): string {
  const percent = info.similarity === undefined ? 100 : Math.round(info.similarity * 100);
  return template
    .split('{id}')
    .join('\u0000ID')
    .split('{keepId}')
    .join('\u0000KEEP')
    .split('{chars}')
    .join(String(info.chars))
    .split('{percent}')
    .join(String(percent))
    .split('\u0000KEEP')
    .join(info.keepId)
    .split('\u0000ID')
    .join(info.id);
}

/** Checks every invariant of a result against its input; returns the result. */
function checkResult<M extends Message>(input: readonly M[], result: DedupeMessagesResult<M>, options: DedupeMessagesOptions = {}): DedupeMessagesResult<M> {
  const { messages, verbatim, decisions, stats } = result;
  expect(messages).toHaveLength(input.length);
  const replaced = new Map(wholeDecisions(decisions).map((d) => [d.index, d]));
  expect(replaced.size).toBe(decisions.length);
  // Decisions come in index order.
  decisions.forEach((d, k) => {
    if (k > 0) expect(d.index).toBeGreaterThan((decisions[k - 1] as MessageDecision).index);
  });
  input.forEach((original, i) => {
    const out = messages[i] as M;
    const d = replaced.get(i);
    if (d === undefined) {
      expect(out).toBe(original);
      expect(Object.hasOwn(verbatim, original.id)).toBe(false);
      return;
    }
    const keep = input[d.duplicateOfIndex] as M;
    // Visible targets: the message a reference points at is in the output in full.
    expect(replaced.has(d.duplicateOfIndex)).toBe(false);
    expect(messages[d.duplicateOfIndex]).toBe(keep);
    expect(d.id).toBe(original.id);
    expect(d.duplicateOfId).toBe(keep.id);
    expect(d.duplicateOfIndex).not.toBe(i);
    expect(typeof original.content).toBe('string');
    const before = original.content as string;
    expect(d.charsBefore).toBe(before.length);
    expect(d.charsAfter).toBe((out.content as string).length);
    expect(d.charsSaved).toBe(d.charsBefore - d.charsAfter);
    if (d.kind === 'exact') {
      expect(keep.content).toBe(original.content);
      expect(d.similarity).toBeUndefined();
      expect('similarity' in d).toBe(false);
    } else {
      expect(typeof d.similarity).toBe('number');
      expect(Object.is(d.similarity, jaccard(normalizedLines(before), normalizedLines(keep.content as string)))).toBe(true);
    }
    const marker = out.metadata?.['ctxdedup'];
    expect(marker).toEqual(d.kind === 'exact' ? { kind: 'exact', duplicateOf: keep.id } : { kind: 'near', duplicateOf: keep.id, similarity: d.similarity });
    // Every other field is kept; metadata is extended, not replaced.
    const { content: _c, metadata: _m, ...rest } = out;
    const { content: _oc, metadata: _om, ...originalRest } = original;
    expect(rest).toEqual(originalRest);
    expect(out.metadata).toEqual({ ...(original.metadata ?? {}), ctxdedup: marker });
    expect(verbatim[original.id]).toBe(original);
    if (options.reference === undefined) {
      const info: ReferenceInfo = { kind: d.kind, id: original.id, keepId: keep.id, chars: before.length };
      if (d.similarity !== undefined) info.similarity = d.similarity;
      expect(out.content).toBe(fill(DEFAULT_TEMPLATES[d.kind], info));
    }
  });
  expect(Object.keys(verbatim).length).toBe(decisions.length);
  const charsBefore = input.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.length : 0), 0);
  const charsSaved = decisions.reduce((sum, d) => sum + d.charsSaved, 0);
  expect(stats.messages).toBe(input.length);
  expect(stats.exactDuplicates).toBe(decisions.filter((d) => d.kind === 'exact').length);
  expect(stats.nearDuplicates).toBe(decisions.filter((d) => d.kind === 'near').length);
  expect(stats.charsBefore).toBe(charsBefore);
  expect(stats.charsSaved).toBe(charsSaved);
  expect(stats.charsAfter).toBe(charsBefore - charsSaved);
  expect(stats.charsAfter).toBe(messages.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.length : 0), 0));
  // o200k tokens: each message is counted whole, as the stage counts a replaced one and its tag.
  const tokens = (list: readonly Message[]): number => list.reduce((sum, m) => sum + (typeof m.content === 'string' ? countTokens(m.content) : 0), 0);
  expect(stats.tokensSaved).toBe(tokens(input) - tokens(messages));
  // Round trip: the very same input objects come back.
  const restored = restoreMessages(messages, verbatim);
  expect(restored).toHaveLength(input.length);
  restored.forEach((m, i) => expect(m).toBe(input[i]));
  // ... also after the result went through JSON (when the input is JSON-safe).
  return result;
}

interface OracleDecision {
  index: number;
  kind: string;
  of: number;
  similarity: number | undefined;
}

/**
 * ctxdedup's rule on top of CCE's annotations (the oracle): an exact duplicate whose keep target
 * is replaced as a near duplicate points at that near duplicate's keep target instead, with its
 * similarity (its content is the target's). Annotated messages in the window stay in full.
 */
function visibleTargets(annotations: OracleDecision[], inWindow: (i: number) => boolean): OracleDecision[] {
  const near = new Map(annotations.filter((a) => a.kind === 'near' && !inWindow(a.index)).map((a) => [a.index, a]));
  return annotations.map((a) => {
    const via = a.kind === 'exact' ? near.get(a.of) : undefined;
    return via === undefined ? a : { index: a.index, kind: 'near', of: via.of, similarity: via.similarity };
  });
}

/** Compares the decisions with the pure-JS oracle. */
function checkAgainstOracle(input: readonly Message[], result: DedupeMessagesResult, options: DedupeMessagesOptions = {}): void {
  const n = input.length;
  const recencyWindow = options.recencyWindow ?? 0;
  const recencyStart = Math.max(0, n - recencyWindow);
  const { exact, fuzzy } = analyze(input, {
    minChars: options.minChars ?? 200,
    skipPrefixes: options.skipPrefixes ?? CCE_SKIP_PREFIXES,
    preserve: new Set(options.preserve ?? ['system']),
    keep: options.keep ?? 'latest',
    recencyStart,
    exact: options.exact ?? true,
    threshold: options.near === true ? (options.threshold ?? 0.85) : undefined,
  });
  const inWindow = (i: number): boolean => recencyWindow > 0 && i >= recencyStart;
  const expected = visibleTargets(
    [
      ...exact.map((a) => ({ index: a.index, kind: 'exact', of: a.duplicateOfIndex, similarity: undefined as number | undefined })),
      ...fuzzy.map((a) => ({ index: a.index, kind: 'near', of: a.duplicateOfIndex, similarity: a.similarity })),
    ],
    inWindow,
  )
    .filter((a) => !inWindow(a.index))
    .sort((a, b) => a.index - b.index);
  const got = wholeDecisions(result.decisions).map((d) => ({ index: d.index, kind: d.kind as string, of: d.duplicateOfIndex, similarity: d.similarity }));
  expect(got).toEqual(expected);
  expect(result.stats.keptInWindow).toBe(exact.length + fuzzy.length - expected.length);
}

// ---------------------------------------------------------------------------------------------

describe('dedupeMessages: exact', () => {
  const A = text('alpha');
  const B = text('beta');

  it('keeps the latest copy by default and explains the decision', () => {
    const input = [msg('m0', A), msg('m1', B), msg('m2', A), msg('m3', 'short')];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions).toEqual([
      {
        index: 0,
        id: 'm0',
        kind: 'exact',
        duplicateOfIndex: 2,
        duplicateOfId: 'm2',
        charsBefore: A.length,
        charsAfter: `[ctxdedup: duplicate of m2 — ${A.length} chars]`.length,
        charsSaved: A.length - `[ctxdedup: duplicate of m2 — ${A.length} chars]`.length,
      },
    ]);
    expect(r.messages[0]?.content).toBe(`[ctxdedup: duplicate of m2 — ${A.length} chars]`);
    expect(r.messages[0]?.metadata).toEqual({ ctxdedup: { kind: 'exact', duplicateOf: 'm2' } });
    expect(r.stats).toEqual({
      messages: 4,
      exactDuplicates: 1,
      nearDuplicates: 0,
      keptInWindow: 0,
      charsBefore: 2 * A.length + B.length + 5,
      charsAfter: 2 * A.length + B.length + 5 - (r.decisions[0]?.charsSaved ?? 0),
      charsSaved: r.decisions[0]?.charsSaved,
      tokensSaved: countTokens(A) - countTokens(r.messages[0]?.content as string),
      blockReferences: 0,
      blockLines: 0,
      blockCharsSaved: 0,
      blockTokensSaved: 0,
    });
  });

  it("keep: 'earliest' keeps the first copy and replaces later ones", () => {
    const input = [msg('m0', A), msg('m1', A), msg('m2', B), msg('m3', A)];
    const r = checkResult(input, dedupeMessages(input, { keep: 'earliest' }));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex, d.duplicateOfId])).toEqual([
      [1, 0, 'm0'],
      [3, 0, 'm0'],
    ]);
    checkAgainstOracle(input, r, { keep: 'earliest' });
  });

  it('the recency window protects the last N messages and picks the first copy inside it', () => {
    const input = [msg('m0', A), msg('m1', B), msg('m2', A), msg('m3', A)];
    // recencyStart = 2: keep target is m2 (first copy in the window); m3 sits in the window.
    const r = checkResult(input, dedupeMessages(input, { recencyWindow: 2 }));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([[0, 2]]);
    expect(r.stats.keptInWindow).toBe(1);
    expect(r.messages[3]).toBe(input[3]);
    // A window covering everything replaces nothing.
    const all = checkResult(input, dedupeMessages(input, { recencyWindow: 10 }));
    expect(all.decisions).toEqual([]);
    expect(all.stats.keptInWindow).toBe(2);
    // keep 'earliest' with a window: copies inside the window stay in full.
    const early = checkResult(input, dedupeMessages(input, { keep: 'earliest', recencyWindow: 2 }));
    expect(early.decisions).toEqual([]);
    expect(early.stats.keptInWindow).toBe(2);
    const early1 = checkResult(input, dedupeMessages(input, { keep: 'earliest', recencyWindow: 1 }));
    expect(early1.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([[2, 0]]);
    expect(early1.stats.keptInWindow).toBe(1);
    // recencyWindow 0 protects nothing.
    const none = checkResult(input, dedupeMessages(input, { recencyWindow: 0 }));
    expect(none.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([
      [0, 3],
      [2, 3],
    ]);
  });

  it('preserved roles are never replaced nor chosen (default system; custom lists; case-sensitive)', () => {
    const input = [msg('s0', A, { role: 'system' }), msg('u1', A), msg('t2', A, { role: 'tool' }), msg('S3', A, { role: 'System' })];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([
      [1, 3],
      [2, 3],
    ]);
    const custom = checkResult(input, dedupeMessages(input, { preserve: ['tool', 'System'] }));
    expect(custom.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([[0, 1]]);
    const nothing = checkResult(input, dedupeMessages(input, { preserve: [] }));
    expect(nothing.decisions.map((d) => d.index)).toEqual([0, 1, 2]);
  });

  it('messages with tool calls are never replaced; an empty tool_calls array does not block', () => {
    const input = [
      msg('a', A, { role: 'assistant', tool_calls: [{ id: 'call_1' }] }),
      msg('b', A, { role: 'assistant', tool_calls: [] }),
      msg('c', A, { role: 'assistant', tool_calls: null }),
      msg('d', A, { role: 'assistant', tool_calls: [{ id: 'call_2' }] }),
    ];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([[1, 2]]);
    expect(r.messages[0]).toBe(input[0]);
    expect(r.messages[3]).toBe(input[3]);
  });

  it('minChars boundary is 200 UTF-16 units; an emoji counts 2', () => {
    const at200 = `${'x'.repeat(198)}\u{1F600}`;
    const at199 = `${'y'.repeat(197)}\u{1F600}`;
    expect(at200.length).toBe(200);
    expect([...at200].length).toBe(199);
    expect(at199.length).toBe(199);
    const input = [msg('a', at200), msg('b', at199), msg('c', at200), msg('d', at199)];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex, d.charsBefore])).toEqual([[0, 2, 200]]);
    const lower = checkResult(input, dedupeMessages(input, { minChars: 199 }));
    expect(lower.decisions.map((d) => d.index)).toEqual([0, 1]);
    const higher = checkResult(input, dedupeMessages(input, { minChars: 201 }));
    expect(higher.decisions).toEqual([]);
  });

  it('skips summary/truncation markers and honours custom skipPrefixes', () => {
    const input = [
      msg('a', `[summary: ${A}`),
      msg('b', `[summary: ${A}`),
      msg('c', ` [summary: ${A}`),
      msg('d', ` [summary: ${A}`),
      msg('e', `#note ${A}`),
      msg('f', `#note ${A}`),
    ];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions.map((d) => d.index)).toEqual([2, 4]);
    const custom = checkResult(input, dedupeMessages(input, { skipPrefixes: ['#note'] }));
    expect(custom.decisions.map((d) => d.index)).toEqual([0, 2]);
  });

  it('skipPrefixes compare UTF-16 code units: a lone surrogate prefix is not U+FFFD', () => {
    const body = text('surrogate-prefix');
    const input = [msg('a', `\uFFFD${body}`), msg('b', `\uFFFD${body}`), msg('c', `\uD800${body}`), msg('d', `\uD800${body}`)];
    const r = checkResult(input, dedupeMessages(input, { skipPrefixes: ['\uD800'] }));
    // '\uFFFD…' does not start with '\uD800', so it is deduplicated; '\uD800…' is skipped.
    expect(r.decisions.map((d) => d.index)).toEqual([0]);
  });

  it('exact: false turns the exact pass off', () => {
    const input = [msg('a', A), msg('b', A)];
    expect(dedupeMessages(input, { exact: false }).decisions).toEqual([]);
  });

  it('non-string content is left alone and counts 0 chars', () => {
    const input = [
      msg('a', [{ type: 'text', text: A }]),
      msg('b', [{ type: 'text', text: A }]),
      msg('c', null),
      msg('d', undefined),
      msg('e', 42),
      msg('f', A),
      msg('g', A),
    ];
    const r = checkResult(input, dedupeMessages(input, { near: true, minChars: 0 }));
    expect(r.decisions.map((d) => d.index)).toEqual([5]);
    expect(r.stats.charsBefore).toBe(2 * A.length);
  });

  it('replaced messages keep every other field and extend metadata', () => {
    const input = [
      msg('a', A, { role: 'tool', tool_call_id: 'call_9', name: 'read_file', metadata: { source: 'fs', nested: { x: 1 } } }),
      msg('b', A, { role: 'tool', tool_call_id: 'call_10' }),
    ];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.messages[0]).toEqual({
      id: 'a',
      role: 'tool',
      tool_call_id: 'call_9',
      name: 'read_file',
      content: `[ctxdedup: duplicate of b — ${A.length} chars]`,
      metadata: { source: 'fs', nested: { x: 1 }, ctxdedup: { kind: 'exact', duplicateOf: 'b' } },
    });
    expect(input[0]?.metadata).toEqual({ source: 'fs', nested: { x: 1 } });
  });

  it('does not mutate its input', () => {
    const input = [msg('a', A, { metadata: { k: 1 } }), msg('b', B), msg('c', A), msg('d', text('beta', 12).replace('line 3', 'LINE 3'))];
    const copy = structuredClone(input);
    const refs = input.slice();
    dedupeMessages(input, { near: true });
    expect(input).toStrictEqual(copy);
    input.forEach((m, i) => expect(m).toBe(refs[i]));
  });

  it('ids that look like template placeholders or replacement patterns are inserted verbatim', () => {
    const input = [msg('{keepId}$&$1', A), msg("{chars}$'", A)];
    const options: DedupeMessagesOptions = { reference: { exact: '{id} -> {keepId} ({chars})' } };
    const r = checkResult(input, dedupeMessages(input, options), options);
    expect(r.messages[0]?.content).toBe(`{keepId}$&$1 -> {chars}$' (${A.length})`);
  });

  it('each call uses its own templates, whatever calls came before (compiled tags are cached)', () => {
    const input = [msg('a', A), msg('b', A)];
    const tagOf = (exact?: string): unknown => dedupeMessages(input, exact === undefined ? {} : { reference: { exact } }).messages[0]?.content;
    const first = tagOf('one {id}');
    for (let i = 0; i < 70; i++) expect(tagOf(`t${i} {id}`)).toBe(`t${i} a`);
    expect(tagOf('one {id}')).toBe(first);
    expect(first).toBe('one a');
    expect(tagOf()).toBe(dedupeMessages(input).messages[0]?.content);
    expect(tagOf('{id}\u0000{keepId}')).toBe('a\u0000b');
    // Two template pairs whose concatenations agree are still told apart.
    const pair = (exact: string, near: string): unknown =>
      dedupeMessages([msg('a', A), msg('b', A), msg('c', text('beta')), msg('d', text('beta').replace('line 2', 'line two'))], {
        near: true,
        threshold: 0.5,
        reference: { exact, near },
      })
        .messages.map((m) => m.content)
        .slice(0, 3);
    expect(pair('E\u0000x', 'N')).toEqual(['E\u0000x', A, 'N']);
    expect(pair('E', 'x\u0000N')).toEqual(['E', A, 'x\u0000N']);
  });

  it('round-trips through JSON', () => {
    const input = [msg('a', A), msg('b', B, { metadata: { x: [1, 2] } }), msg('c', A), msg('d', text('beta').replace('line 2', 'line two'))];
    const r = dedupeMessages(input, { near: true, keep: 'earliest', threshold: 0.8 });
    expect(r.decisions.map((d) => d.kind)).toEqual(['exact', 'near']);
    const wire = JSON.parse(JSON.stringify({ messages: r.messages, verbatim: r.verbatim })) as { messages: Message[]; verbatim: Record<string, Message> };
    expect(restoreMessages(wire.messages, wire.verbatim)).toEqual(input);
  });

  it('round-trips ids that are Object.prototype keys (constructor, hasOwnProperty, toString)', () => {
    for (const id of ['constructor', 'hasOwnProperty', 'toString', 'valueOf']) {
      const input = [msg(id, A), msg('keep', A)];
      const r = dedupeMessages(input);
      expect(Object.hasOwn(r.verbatim, id)).toBe(true);
      expect(r.verbatim[id]).toBe(input[0]);
      expect(restoreMessages(r.messages, r.verbatim)[0]).toBe(input[0]);
    }
  });

  it("round-trips the id '__proto__' (verbatim must hold it as an own key)", () => {
    for (const id of ['__proto__']) {
      const input = [msg(id, A), msg('keep', A)];
      const r = dedupeMessages(input);
      expect(r.decisions.map((d) => d.id)).toEqual([id]);
      expect(Object.hasOwn(r.verbatim, id)).toBe(true);
      expect(r.verbatim[id]).toBe(input[0]);
      expect(Object.keys(r.verbatim)).toEqual([id]);
      const restored = restoreMessages(r.messages, r.verbatim);
      expect(restored[0]).toBe(input[0]);
    }
  });
});

describe('dedupeMessages: fuzzy', () => {
  const base = Array.from({ length: 20 }, (_, i) => `export const value${i} = compute(${i}, 'file.ts');`);
  const baseText = base.join('\n');
  const edited = [...base];
  edited[10] = '// this line was edited by the agent';
  const editedText = edited.join('\n');
  const other = Array.from({ length: 20 }, (_, i) => `unrelated ${i}: lorem ipsum dolor sit amet`).join('\n');

  it('finds a near copy behind hundreds of messages of one family it does not match (the work bounds do not bind)', () => {
    // 298 copies padded past the 0.7 length ratio: one component, never linked to m0 or the last.
    // A first version of the bounds spent each message's comparisons on them and missed m0.
    const padded = (k: number): string => `${baseText}\n${' '.repeat(baseText.length + k)}`;
    const input = [msg('m0', baseText), ...Array.from({ length: 298 }, (_, k) => msg(`p${k}`, padded(k))), msg('last', editedText)];
    const r = dedupeMessages(input, { near: true });
    const first = r.decisions.find((d) => d.index === 0);
    expect(first).toMatchObject({ kind: 'near', duplicateOfId: 'last' });
    expect(r.decisions.filter((d) => d.kind === 'near')).toHaveLength(298);
  });

  it('finds a near duplicate and explains it (similarity, percent, own length)', () => {
    const input = [msg('m0', baseText), msg('m1', other), msg('m2', editedText)];
    const r = checkResult(input, dedupeMessages(input, { near: true }));
    expect(r.decisions).toHaveLength(1);
    const d = wholeDecisions(r.decisions)[0] as WholeMessageDecision;
    expect(d).toMatchObject({ index: 0, id: 'm0', kind: 'near', duplicateOfIndex: 2, duplicateOfId: 'm2', charsBefore: baseText.length });
    expect(d.similarity).toBe(19 / 21);
    expect(r.messages[0]?.content).toBe(`[ctxdedup: near-duplicate of m2 — ${baseText.length} chars, ~90% match]`);
    expect(r.messages[0]?.metadata).toEqual({ ctxdedup: { kind: 'near', duplicateOf: 'm2', similarity: 19 / 21 } });
    expect(r.stats.nearDuplicates).toBe(1);
    expect(r.stats.exactDuplicates).toBe(0);
    checkAgainstOracle(input, r, { near: true });
  });

  it('is off by default, and honours the threshold (inclusive)', () => {
    const input = [msg('m0', baseText), msg('m2', editedText)];
    expect(dedupeMessages(input).decisions).toEqual([]);
    expect(dedupeMessages(input, { near: true, threshold: 19 / 21 }).decisions).toHaveLength(1);
    expect(dedupeMessages(input, { near: true, threshold: 0.91 }).decisions).toEqual([]);
    expect(dedupeMessages(input, { near: true, threshold: 1 }).decisions).toEqual([]);
    expect(dedupeMessages(input, { near: true, threshold: 0 }).decisions).toHaveLength(1);
  });

  it("keep: 'earliest' for fuzzy groups", () => {
    const input = [msg('m0', baseText), msg('m1', other), msg('m2', editedText)];
    const r = checkResult(input, dedupeMessages(input, { near: true, keep: 'earliest' }));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex, d.kind])).toEqual([[2, 0, 'near']]);
  });

  it('exact and fuzzy together: exact copies are exact decisions when their keep target stays', () => {
    const input = [msg('a', baseText), msg('b', other), msg('c', baseText), msg('d', other)];
    const r = checkResult(input, dedupeMessages(input, { near: true }));
    expect(r.decisions.map((d) => [d.index, d.kind, d.duplicateOfIndex])).toEqual([
      [0, 'exact', 2],
      [1, 'exact', 3],
    ]);
    checkAgainstOracle(input, r, { near: true });
  });

  it('references never chain: an exact copy of a replaced near duplicate points at the kept message (issue 12, item 5)', async () => {
    // B is A with one line edited. CCE makes m0 -dup-> m1 -near-> m2, so B is nowhere in the output.
    const input = [msg('m0', editedText), msg('m1', editedText), msg('m2', baseText)];
    for (const r of [dedupeMessages(input, { near: true }), await dedupeMessagesAsync(input, { near: true })]) {
      checkResult(input, r);
      expect(wholeDecisions(r.decisions).map((d) => [d.id, d.kind, d.duplicateOfId, d.similarity])).toEqual([
        ['m0', 'near', 'm2', 19 / 21],
        ['m1', 'near', 'm2', 19 / 21],
      ]);
      expect(r.messages[0]?.content).toBe(`[ctxdedup: near-duplicate of m2 — ${editedText.length} chars, ~90% match]`);
      expect(r.stats).toMatchObject({ exactDuplicates: 0, nearDuplicates: 2 });
      checkAgainstOracle(input, r, { near: true });
    }
    // Keep earliest: [A, B, B] gives m2 -dup-> m1 -near-> m0 in CCE; here m2 points at m0.
    const early = [msg('m0', baseText), msg('m1', editedText), msg('m2', editedText)];
    const e = checkResult(early, dedupeMessages(early, { near: true, keep: 'earliest' }));
    expect(e.decisions.map((d) => [d.id, d.kind, d.duplicateOfId])).toEqual([
      ['m1', 'near', 'm0'],
      ['m2', 'near', 'm0'],
    ]);
    // A keep target replaced as a near duplicate but inside the recency window stays in full, so
    // its exact copies keep pointing at it: [B, A, B] with a window of 2 makes m2 -near-> m1 (kept
    // in the window) and m0 -dup-> m2.
    const windowed = [msg('m0', editedText), msg('m1', baseText), msg('m2', editedText)];
    const w = checkResult(windowed, dedupeMessages(windowed, { near: true, recencyWindow: 2 }), { recencyWindow: 2 });
    expect(w.decisions.map((d) => [d.id, d.kind, d.duplicateOfId])).toEqual([['m0', 'exact', 'm2']]);
    expect(w.stats.keptInWindow).toBe(1);
    checkAgainstOracle(windowed, w, { near: true, recencyWindow: 2 });
    // The compatibility layer keeps CCE's chain (bug-compatible by contract).
    const cce = dedupeCce(input, { fuzzyDedup: true, recencyWindow: 0, trace: true });
    expect(cce.decisions?.map((d) => [d.messageId, d.action])).toEqual([
      ['m0', 'deduped'],
      ['m1', 'fuzzy_deduped'],
    ]);
    expect(cce.messages[0]?.content).toBe(`[cce:dup of m1 — ${editedText.length} chars]`);
  });

  it('the recency window protects near duplicates too', () => {
    const input = [msg('m0', baseText), msg('m1', editedText), msg('m2', other)];
    const r = checkResult(input, dedupeMessages(input, { near: true, recencyWindow: 2 }));
    // recencyStart = 1: m1 is the keep target (first member inside the window).
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([[0, 1]]);
    const early = checkResult(input, dedupeMessages(input, { near: true, keep: 'earliest', recencyWindow: 2 }));
    expect(early.decisions).toEqual([]);
    expect(early.stats.keptInWindow).toBe(1);
  });

  it('tool calls and preserved roles block fuzzy replacement', () => {
    const input = [msg('m0', baseText, { role: 'system' }), msg('m1', editedText, { tool_calls: [{}] }), msg('m2', other)];
    expect(dedupeMessages(input, { near: true }).decisions).toEqual([]);
  });

  it('custom templates fill {id} {keepId} {chars} {percent}', () => {
    const input = [msg('m0', other), msg('m1', other), msg('m2', baseText), msg('m3', editedText)];
    const r = checkResult(
      input,
      dedupeMessages(input, { near: true, reference: { exact: 'E {id}<{keepId} {chars} {percent}%', near: 'F {id}<{keepId} {chars} {percent}%' } }),
      { reference: {} },
    );
    expect(r.messages[0]?.content).toBe(`E m0<m1 ${other.length} 100%`);
    expect(r.messages[2]?.content).toBe(`F m2<m3 ${baseText.length} 90%`);
    // A partial template object keeps the default for the other kind.
    const partial = dedupeMessages(input, { near: true, reference: { near: '~{percent}' } });
    expect(partial.messages[0]?.content).toBe(`[ctxdedup: duplicate of m1 — ${other.length} chars]`);
    expect(partial.messages[2]?.content).toBe('~90');
  });

  it('a reference function receives the full info and its string is used', () => {
    const input = [msg('m0', other), msg('m1', other), msg('m2', baseText), msg('m3', editedText)];
    const seen: ReferenceInfo[] = [];
    const r = dedupeMessages(input, {
      near: true,
      reference: (info) => {
        seen.push(info);
        return `<${info.kind}:${info.id}:${info.keepId}>`;
      },
    });
    expect(seen).toEqual([
      { kind: 'exact', id: 'm0', keepId: 'm1', chars: other.length },
      { kind: 'near', id: 'm2', keepId: 'm3', chars: baseText.length, similarity: 19 / 21 },
    ]);
    expect('similarity' in (seen[0] as ReferenceInfo)).toBe(false);
    expect(r.messages.map((m) => m.content)).toEqual(['<exact:m0:m1>', other, '<near:m2:m3>', editedText]);
    expect(r.decisions.map((d) => d.charsAfter)).toEqual([13, 12]);
    expect(() => dedupeMessages(input, { reference: unsafe(() => 42) })).toThrow(TypeError);
  });
});

describe('dedupeMessages: Unicode', () => {
  const lines = Array.from({ length: 12 }, (_, i) => `Section ${i}: the quick brown fox jumps`);
  const plain = lines.join('\n');
  const variant = (f: (line: string) => string): string => lines.map(f).join('\n');
  const fuzzyPair = (b: string, options: DedupeMessagesOptions = {}) => {
    const input = [msg('a', plain), msg('b', b)];
    return checkResult(input, dedupeMessages(input, { near: true, ...options }));
  };

  it('U+FEFF and NBSP around lines are trimmed (100% near duplicate); U+0085 is not', () => {
    for (const ws of ['\uFEFF', '\u00A0', '\u3000', '\u2028', '\t', '\u000B']) {
      const r = fuzzyPair(variant((l) => `${ws}${l}${ws}`));
      expect(wholeDecisions(r.decisions).map((d) => [d.kind, d.similarity])).toEqual([['near', 1]]);
    }
    for (const ws of ['\u0085', '\u200B', '\u180E', '\u2060']) {
      expect(fuzzyPair(variant((l) => `${ws}${l}`)).decisions).toEqual([]);
    }
    // Exact never trims.
    expect(
      dedupeMessages([
        msg('a', plain),
        msg(
          'b',
          variant((l) => `\uFEFF${l}`),
        ),
      ]).decisions,
    ).toEqual([]);
  });

  it('CRLF vs LF: different for exact, ~100% for fuzzy', () => {
    const crlf = lines.join('\r\n');
    expect(dedupeMessages([msg('a', plain), msg('b', crlf)]).decisions).toEqual([]);
    const r = fuzzyPair(crlf);
    expect(r.decisions).toHaveLength(1);
    expect(wholeDecisions(r.decisions)[0]?.similarity).toBe(1);
    expect(r.messages[0]?.content).toContain('~100% match');
  });

  it('only \\n splits lines: \\r, U+2028, U+0085 do not', () => {
    for (const sep of ['\r', '\u2028', '\u2029', '\u0085']) {
      expect(fuzzyPair(lines.join(sep)).decisions).toEqual([]);
    }
  });

  it('final sigma: uppercase Greek lines match their lowercase form with ς, not with σ', () => {
    const greek = Array.from({ length: 10 }, (_, i) => `ΟΔΟΣ ${i} ΣΑΣ ΚΑΙ ΤΟΥΣ ΦΙΛΟΥΣ`);
    const upper = greek.join('\n');
    const lowerFinal = greek.map((l) => l.toLowerCase()).join('\n');
    expect(lowerFinal).toContain('οδος');
    const lowerMedial = lowerFinal.replace(/ς/g, 'σ');
    const pad = `\n${'padding line that is identical everywhere'.repeat(1)}`;
    const a = upper + pad;
    const pair = [msg('a', a), msg('b', lowerFinal + pad)];
    const good = checkResult(pair, dedupeMessages(pair, { near: true }));
    expect(wholeDecisions(good.decisions).map((d) => d.similarity)).toEqual([1]);
    const bad = dedupeMessages([msg('a', a), msg('b', lowerMedial + pad)], { near: true, threshold: 0 });
    // Only the padding line is shared: 1 / 21. (Fingerprints differ: never even compared.)
    expect(bad.decisions).toEqual([]);
  });

  it('dotted İ lowercases to i + U+0307; plain i does not match it', () => {
    const turkish = Array.from({ length: 10 }, (_, i) => `İSTANBUL şehri ${i} — İzmir ve Iğdır`);
    const upper = turkish.join('\n');
    const lower = turkish.map((l) => l.toLowerCase()).join('\n');
    expect(lower).toContain('i\u0307stanbul');
    const pair = [msg('a', upper), msg('b', lower)];
    const r = checkResult(pair, dedupeMessages(pair, { near: true }));
    expect(wholeDecisions(r.decisions).map((d) => d.similarity)).toEqual([1]);
    const dotless = lower.replace(/i\u0307/g, 'i');
    expect(dedupeMessages([msg('a', upper), msg('b', dotless)], { near: true }).decisions).toEqual([]);
    // Exact is case-sensitive.
    expect(dedupeMessages([msg('a', upper), msg('b', lower)]).decisions).toEqual([]);
  });

  it('lone surrogates are distinct from each other and from U+FFFD (exact and fuzzy)', () => {
    const body = text('lone');
    const input = [msg('a', `a\uD800${body}`), msg('b', `a\uDC00${body}`), msg('c', `a\uFFFD${body}`), msg('d', `a\uD800${body}`), msg('e', `a\uFFFD${body}`)];
    const r = checkResult(input, dedupeMessages(input));
    expect(r.decisions.map((d) => [d.index, d.duplicateOfIndex])).toEqual([
      [0, 3],
      [2, 4],
    ]);
    const surrogateLines = Array.from({ length: 8 }, (_, i) => `row ${i} \uD800 value`).join('\n');
    const fffdLines = surrogateLines.replace(/\uD800/g, '\uFFFD');
    const lowLines = surrogateLines.replace(/\uD800/g, '\uDC00');
    const f = dedupeMessages([msg('a', surrogateLines), msg('b', fffdLines), msg('c', lowLines)], { near: true, threshold: 0 });
    expect(f.decisions).toEqual([]);
  });

  it('property: line normalization equals JS trim().toLowerCase() on tricky characters', () => {
    const unit = fc.constantFrom(
      'A',
      'a',
      'Σ',
      'σ',
      'ς',
      'İ',
      'i',
      'I',
      'ı',
      'ß',
      'ẞ',
      '\u0307',
      '\u0301',
      "'",
      '.',
      ' ',
      '\t',
      '\r',
      '\u000B',
      '\uFEFF',
      '\u0085',
      '\u00A0',
      '\u2028',
      '\u200B',
      '\u180E',
      '\u3000',
      '\uD800',
      '\uDC00',
      '\uFFFD',
      '\u{1F600}',
      '\u{10400}',
      '\u{1E900}',
      '\u212A',
      '\u2126',
      'ǅ',
      '\u216B',
      '\u24B6',
      '\u1E9E',
      'Ω',
      'Ö',
      '\u0345',
      'ﬁ',
    );
    const line = fc.array(unit, { minLength: 1, maxLength: 8 }).map((u) => u.join(''));
    const transform = fc.constantFrom<(s: string) => string>(
      (s) => s,
      (s) => s.toUpperCase(),
      (s) => s.toLowerCase(),
      (s) => ` ${s}\uFEFF`,
      (s) => `\u0085${s}`,
      (s) => s.normalize('NFD'),
    );
    const header = ['shared header line one', 'shared header line two', 'shared header line three'];
    const padding = 'padding that is shared by both messages and keeps the length ratio high. '.repeat(5);
    fc.assert(
      fc.property(fc.array(fc.tuple(line, transform), { minLength: 1, maxLength: 10 }), (pairs) => {
        const a = [...header, ...pairs.map(([l]) => l), padding].join('\n');
        const b = [...header, ...pairs.map(([l, f]) => f(l)), padding].join('\n');
        fc.pre(a !== b);
        const input = [msg('a', a), msg('b', b)];
        const options: DedupeMessagesOptions = { near: true, threshold: 0 };
        const r = checkResult(input, dedupeMessages(input, options), options);
        checkAgainstOracle(input, r, options);
        expect(r.decisions).toHaveLength(1);
      }),
      { numRuns: 400 },
    );
  });

  it('NFC vs NFD are different for both passes', () => {
    const nfc = Array.from({ length: 10 }, (_, i) => `caf\u00E9 ${i} r\u00E9sum\u00E9 na\u00EFve`).join('\n');
    const nfd = nfc.normalize('NFD');
    expect(nfd).not.toBe(nfc);
    expect(dedupeMessages([msg('a', nfc), msg('b', nfd)], { near: true, threshold: 0 }).decisions).toEqual([]);
  });
});

describe('dedupeMessages: bad input', () => {
  const A = text('bad');
  const ok = [msg('a', A), msg('b', A)];

  it('messages must be an array of objects', () => {
    for (const bad of [undefined, null, 'x', {}, new Set()]) {
      const error = thrown(() => dedupeMessages(unsafe<Message[]>(bad)));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('messages');
    }
    const error = thrown(() => dedupeMessages(unsafe<Message[]>([msg('a', A), null])));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('messages[1]');
  });

  it('every message needs a unique string id', () => {
    for (const id of [undefined, 3, null, {}, Symbol('x')]) {
      const error = thrown(() => dedupeMessages(unsafe<Message[]>([msg('a', A), { content: A, id }])));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain('messages[1].id');
    }
    const error = thrown(() => dedupeMessages([msg('a', A), msg('b', A), msg('a', 'x')]));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('messages[2].id');
  });

  it('a hole in a sparse messages array is a message without an id', () => {
    const sparse = unsafe<Message[]>([msg('a', A), , msg('b', A)]);
    const error = thrown(() => dedupeMessages(sparse));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('messages[1]');
  });

  it('holes in string-list options are rejected with a TypeError naming the path', () => {
    let error = thrown(() => dedupeMessages(ok, { skipPrefixes: unsafe([, '#']) }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('options.skipPrefixes[0]');
    error = thrown(() => dedupeMessages(ok, { preserve: unsafe([, 'tool']) }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('options.preserve[0]');
  });

  it('threshold outside [0, 1] or NaN -> RangeError', () => {
    for (const threshold of [1.5, -0.1, Number.NaN, Infinity]) {
      const error = thrown(() => dedupeMessages(ok, { near: true, threshold }));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('threshold');
    }
    expect(() => dedupeMessages(ok, { near: true, threshold: unsafe('0.5') })).toThrow(TypeError);
  });

  it('recencyWindow / minChars negative or fractional -> RangeError', () => {
    for (const recencyWindow of [-1, 1.5, Number.NaN]) {
      const error = thrown(() => dedupeMessages(ok, { recencyWindow }));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('recencyWindow');
    }
    for (const minChars of [-1, 2.5]) {
      expect(() => dedupeMessages(ok, { minChars })).toThrow(RangeError);
    }
  });

  it("keep other than 'latest' | 'earliest' is rejected", () => {
    const error = thrown(() => dedupeMessages(ok, { keep: unsafe('middle') }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain('keep');
  });

  it('wrong option types are rejected', () => {
    expect(() => dedupeMessages(ok, unsafe('fuzzy'))).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { fuzzy: unsafe('yes') })).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { preserve: unsafe('system') })).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { preserve: unsafe([1]) })).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { skipPrefixes: unsafe([null]) })).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { reference: unsafe('tag') })).toThrow(TypeError);
    expect(() => dedupeMessages(ok, { reference: { exact: unsafe(3) } })).toThrow(TypeError);
  });

  it('the async variant rejects with the same errors', async () => {
    await expect(dedupeMessagesAsync(unsafe<Message[]>('x'))).rejects.toThrow(TypeError);
    await expect(dedupeMessagesAsync([msg('a', A), msg('a', A)])).rejects.toThrow(/messages\[1\]\.id/);
    await expect(dedupeMessagesAsync(ok, { near: true, threshold: 2 })).rejects.toThrow(RangeError);
  });

  it('restoreMessages validates its arguments and passes foreign messages through', () => {
    expect(() => restoreMessages(unsafe<Message[]>('x'), {})).toThrow(TypeError);
    expect(() => restoreMessages([], unsafe(null))).toThrow(TypeError);
    const stranger = msg('z', 'hello', { metadata: { ctxdedup: { kind: 'exact', duplicateOf: 'y' } } });
    expect(restoreMessages([stranger], {})[0]).toBe(stranger);
    // A message without the marker is never swapped, even if its id is in the map.
    const plain = msg('a', 'x');
    expect(restoreMessages([plain], { a: msg('a', 'other') })[0]).toBe(plain);
  });
});

describe('dedupeMessages: validation gaps (issue 12)', () => {
  const A = text('gap');
  const input = [msg('m0', A), msg('m1', A)];

  it('a tag is never longer than the message it replaces, keep latest too: no template, id or minChars amplifies the output', () => {
    const same = 'same content here '.repeat(15);
    const many = Array.from({ length: 2000 }, (_, i) => msg(`m${i}`, same));
    // A 100k-unit template: each tag would be longer than its message, so every copy stays.
    const long = dedupeMessages(many, { reference: { exact: `${'T'.repeat(100_000)}{keepId}` } });
    expect(long.stats).toMatchObject({ exactDuplicates: 0, charsSaved: 0, charsAfter: long.stats.charsBefore });
    expect(long.messages).toEqual(many);
    // minChars 0: a two-unit message keeps its content rather than get a 40-unit tag.
    const tiny = dedupeMessages([msg('a', 'ab'), msg('b', 'ab')], { minChars: 0 });
    expect(tiny.messages.map((m) => m.content)).toEqual(['ab', 'ab']);
    // A tag shorter than its message is still used (keep latest keeps CCE's analysis otherwise).
    const short = dedupeMessages([msg('a', same), msg('b', same)], { reference: { exact: '<{keepId}>' } });
    expect(short.messages.map((m) => m.content)).toEqual(['<b>', same]);
  });

  it('a template with an unknown field is refused: it would reach the model as literal text', () => {
    expect(() => dedupeMessages([], { reference: { exact: '[dup of {target}]' } })).toThrow(
      new TypeError('options.reference.exact has an unknown field {target} (fields: {id}, {keepId}, {chars}, {percent})'),
    );
    expect(() => dedupeMessages([], { near: true, reference: { near: '~{percent}% {similarity}' } })).toThrow(
      /options\.reference\.near has an unknown field \{similarity\}/,
    );
    // Braces around anything else are text.
    expect(dedupeMessages([msg('a', 'x'.repeat(300)), msg('b', 'x'.repeat(300))], { reference: { exact: '{ {keepId} }' } }).messages[0]?.content).toBe('{ b }');
  });

  it('reference: { exact: undefined } means the default template, like every other absent option', () => {
    const defaults = dedupeMessages(input);
    expect(dedupeMessages(input, { reference: { exact: undefined } })).toEqual(defaults);
    expect(dedupeMessages(input, { reference: { exact: undefined, near: undefined } })).toEqual(defaults);
    expect(dedupeMessages(input, { reference: { exact: 'E {keepId}', near: undefined } }).messages[0]?.content).toBe('E m1');
    expect(() => dedupeMessages(input, { reference: unsafe({ exact: null }) })).toThrow(new TypeError('options.reference.exact must be a string, got null'));
    // Only own properties: an inherited template is not an option.
    const inherited = Object.create({ exact: 'inherited {keepId}' }) as Record<string, unknown>;
    expect(dedupeMessages(input, { reference: unsafe(inherited) })).toEqual(defaults);
  });

  it('restoreMessages: a hole comes back as undefined at its index', () => {
    const { messages, verbatim } = dedupeMessages(input);
    const sparse = unsafe<Message[]>([messages[0], , messages[1]]);
    const restored = restoreMessages(sparse, verbatim);
    expect(restored).toHaveLength(3);
    expect(1 in restored).toBe(true);
    expect(restored).toEqual([input[0], undefined, input[1]]);
  });

  it('error messages never fail to build (BigInt, cyclic, null-prototype values)', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => dedupeMessages(input, { keep: unsafe(10n) })).toThrow(new TypeError("options.keep must be 'latest' or 'earliest', got 10n"));
    expect(() => dedupeMessages(input, { keep: unsafe(Object.create(null)) })).toThrow(new TypeError("options.keep must be 'latest' or 'earliest', got {}"));
    expect(() => dedupeMessages(input, { keep: unsafe(cyclic) })).toThrow(new TypeError("options.keep must be 'latest' or 'earliest', got an object"));
    expect(() => dedupeMessages(input, { keep: unsafe(Symbol('k')) })).toThrow(new TypeError("options.keep must be 'latest' or 'earliest', got Symbol(k)"));
  });
});

describe('dedupeMessagesAsync', () => {
  const base = text('async', 16);
  const input = [msg('a', base), msg('b', base.replace('line 4', 'line four')), msg('c', text('other')), msg('d', base), msg('e', 'short')];

  it('gives the same result as the sync call', async () => {
    for (const options of [{}, { near: true }, { near: true, keep: 'earliest' as const }, { near: true, recencyWindow: 2 }]) {
      const sync = dedupeMessages(input, options);
      const r = await dedupeMessagesAsync(input, options);
      expect(r).toStrictEqual(sync);
      checkResult(input, r, options);
    }
  });

  /**
   * Past ASYNC_MIN_UNITS the analysis, the token counts and the block pass run off the JS thread
   * and the result is built in steps: the same result as the sync call all the same. Files re-read
   * whole (exact), re-read after an edit (blocks), and a copy of a file the pass rewrote (kept as a
   * message: its tag would name text no longer there in full).
   */
  it('gives the same result as the sync call on a batch large enough to run off the JS thread', async () => {
    const input: Message[] = [];
    for (let i = 0; i < 700; i++) {
      const file = text(`file ${i % 40}`, 14);
      const content = i % 3 === 0 ? file : i % 3 === 1 ? `${file}\nedit ${i}` : `${text(`file ${(i + 7) % 40}`, 14)}\n${text(`note ${i}`, 3)}`;
      input.push(msg(`m${i}`, content, { role: 'tool' }));
    }
    expect(input.reduce((n, m) => n + (m.content as string).length, 0)).toBeGreaterThan(ASYNC_MIN_UNITS);
    for (const options of [{ keep: 'earliest' as const }, { keep: 'earliest' as const, blocks: true }, { near: true }, {}]) {
      const sync = dedupeMessages(input, options);
      const r = await dedupeMessagesAsync(input, options);
      expect(r).toStrictEqual(sync);
      expect(r.decisions.length).toBeGreaterThan(100);
    }
  });

  /**
   * Building 20,000 replaced messages takes a while (here: a slow getter on every message, which
   * the result copies): the async call lets the event loop run meanwhile, not only while the
   * native work runs on other threads. It used to build the whole result in one stretch: every
   * read of the getter happened in the same turn of the loop.
   */
  it('lets the event loop run while it builds a large result', async () => {
    let turn = 0;
    let running = true;
    const tick = (): void => {
      turn++;
      if (running) setImmediate(tick);
    };
    const readIn = new Set<number>();
    const input: Message[] = [];
    const file = text('shared', 14);
    for (let i = 0; i < 20_000; i++) {
      const m = msg(`m${i}`, file, { role: 'tool' });
      Object.defineProperty(m, 'slow', {
        enumerable: true,
        get() {
          readIn.add(turn);
          const until = performance.now() + 0.02;
          while (performance.now() < until) {
            // Busy: a field that costs 20 microseconds to read.
          }
          return i;
        },
      });
      input.push(m);
    }
    const pending = dedupeMessagesAsync(input, { keep: 'earliest' });
    setImmediate(tick);
    const r = await pending;
    running = false;
    expect(r.decisions).toHaveLength(19_999);
    // About 400 ms of reads, in turns of a few milliseconds each.
    expect(readIn.size).toBeGreaterThan(20);
  });

  it('later changes to the input array do not change the result (documented: "later changes to the input do not matter")', async () => {
    const list = input.slice();
    const expected = dedupeMessages(input.slice(), { near: true });
    const pending = dedupeMessagesAsync(list, { near: true });
    list[3] = msg('zz', 'replaced after the call');
    list.push(msg('late', base));
    const r = await pending;
    expect(r.decisions).toEqual(expected.decisions);
    expect(r.stats).toEqual(expected.stats);
    expect(r.messages.map((m) => m.id)).toEqual(expected.messages.map((m) => m.id));
  });
});

// ---------------------------------------------------------------------------------------------

interface GoldenCase {
  params: { recencyWindow: number; recencyStart: number; preserve: string[]; threshold: number };
  messages: Record<string, unknown>[];
  expected: { exact: [number, { duplicateOfIndex: number }][]; replaced: { index: number; content: string }[] };
}

describe('restoreMessages(dedupeMessages(x)) on every golden input', () => {
  const dir = join(SHARED, 'golden', 'cce');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== '_manifest.json')
    .sort();

  it('finds the golden folder', () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it.each(files)('%s', (file) => {
    const c = JSON.parse(readFileSync(join(dir, file), 'utf8')) as GoldenCase;
    const used = new Set<string>();
    const input: Message[] = c.messages.map((m, i) => {
      let id = String(m['id'] ?? `#${i}`);
      while (used.has(id)) id = `${id}'`;
      used.add(id);
      return { ...m, id } as Message;
    });
    const copy = structuredClone(input);
    const options: DedupeMessagesOptions = {
      near: true,
      threshold: Math.min(1, Math.max(0, c.params.threshold)),
      recencyWindow: Math.max(0, c.params.recencyWindow),
      preserve: c.params.preserve,
    };
    const r = checkResult(input, dedupeMessages(input, options), options);
    expect(input).toStrictEqual(copy);
    expect(restoreMessages(r.messages, r.verbatim)).toStrictEqual(copy);
    // Same analysis as CCE: the same messages are replaced, with the same kind, except that an
    // exact copy of a replaced message (a CCE chain) is a near duplicate of that one's target.
    if (c.params.threshold >= 0 && c.params.threshold <= 1) {
      const replacedIndices = new Set(c.expected.replaced.map((x) => x.index));
      const exactTarget = new Map(c.expected.exact.map(([index, a]) => [index, a.duplicateOfIndex]));
      expect(r.decisions.map((d) => [d.index, d.kind])).toEqual(
        c.expected.replaced.map((x) => {
          const chained = replacedIndices.has(exactTarget.get(x.index) ?? -1);
          return [x.index, x.content.startsWith('[cce:dup') && !chained ? 'exact' : 'near'];
        }),
      );
    }
    // And the same again with keep 'earliest' (round trip only).
    const early = checkResult(input, dedupeMessages(input, { ...options, keep: 'earliest' }), options);
    expect(restoreMessages(early.messages, early.verbatim)).toStrictEqual(copy);
  });
});

// ---------------------------------------------------------------------------------------------

describe('generated transcripts', () => {
  const vocabulary = [
    'import { readFile } from "node:fs";',
    'export function main() {',
    '  const config = load();',
    '  return run(config);',
    '}',
    '// TODO: handle errors',
    '  if (x > 0) { x -= 1; }',
    'const ΟΔΟΣ = "İstanbul";',
    '\tconsole.log("done");',
    '  throw new Error("boom");',
    'line with emoji \u{1F600} inside',
    'row \uD800 lone high',
    'row \uFFFD replacement',
  ];
  const pool = [0, 1, 2, 3].map((k) => Array.from({ length: 10 + k }, (_, i) => vocabulary[(i * (k + 3) + k) % vocabulary.length] as string));

  type Edit =
    | { op: 'replace'; at: number; with: number }
    | { op: 'delete'; at: number }
    | { op: 'insert'; at: number; with: number }
    | { op: 'upper'; at: number }
    | { op: 'pad'; at: number; ws: string };
  const edit: fc.Arbitrary<Edit> = fc.oneof(
    fc.record({ op: fc.constant('replace' as const), at: fc.nat(20), with: fc.nat(vocabulary.length - 1) }),
    fc.record({ op: fc.constant('delete' as const), at: fc.nat(20) }),
    fc.record({ op: fc.constant('insert' as const), at: fc.nat(20), with: fc.nat(vocabulary.length - 1) }),
    fc.record({ op: fc.constant('upper' as const), at: fc.nat(20) }),
    fc.record({ op: fc.constant('pad' as const), at: fc.nat(20), ws: fc.constantFrom(' ', '\t', '\uFEFF', '\u0085', '\u00A0', '\r') }),
  );

  function build(baseIndex: number, edits: readonly Edit[], crlf: boolean, cut: number | null): string {
    const lines = [...(pool[baseIndex % pool.length] as string[])];
    for (const e of edits) {
      const at = e.at % Math.max(1, lines.length);
      if (e.op === 'replace') lines[at] = vocabulary[e.with] as string;
      else if (e.op === 'delete') lines.splice(at, 1);
      else if (e.op === 'insert') lines.splice(at, 0, vocabulary[e.with] as string);
      else if (e.op === 'upper') lines[at] = (lines[at] ?? '').toUpperCase();
      else lines[at] = `${e.ws}${lines[at] ?? ''}${e.ws}`;
    }
    const joined = lines.join(crlf ? '\r\n' : '\n');
    return cut === null ? joined : joined.slice(0, cut);
  }

  // A few variants of the pool texts per transcript; messages pick among them, so exact repeats,
  // near copies and unrelated texts all occur.
  const variant = fc
    .record({
      base: fc.oneof(fc.constant(0), fc.nat(3)),
      edits: fc.oneof(fc.constant([] as Edit[]), fc.array(edit, { minLength: 1, maxLength: 2 })),
      crlf: fc.constantFrom(false, false, false, false, true),
      cut: fc.oneof(fc.constant(null), fc.constant(null), fc.integer({ min: 150, max: 260 })),
    })
    .map((v) => build(v.base, v.edits, v.crlf, v.cut));
  const slot = fc.record({
    pick: fc.nat(),
    role: fc.constantFrom<string | undefined>('user', 'assistant', 'tool', 'tool', 'system', undefined),
    toolCalls: fc.constantFrom<unknown>(undefined, undefined, undefined, undefined, [], [{ id: 'c' }]),
  });
  const transcript = fc
    .tuple(fc.array(variant, { minLength: 1, maxLength: 6, size: 'medium' }), fc.array(slot, { minLength: 2, maxLength: 40, size: 'medium' }))
    .map(([variants, slots]) =>
      slots.map((s, i): Message => {
        const m: Message = { id: `m${i}`, content: variants[s.pick % variants.length] as string };
        if (s.role !== undefined) m.role = s.role;
        if (s.toolCalls !== undefined) m.tool_calls = s.toolCalls;
        return m;
      }),
    );
  const options: fc.Arbitrary<DedupeMessagesOptions> = fc.record(
    {
      keep: fc.constantFrom<'latest' | 'earliest'>('latest', 'earliest'),
      exact: fc.boolean(),
      near: fc.constantFrom(true, true, false),
      threshold: fc.constantFrom(0, 0.3, 0.5, 0.7, 0.85, 0.9, 1),
      minChars: fc.constantFrom(0, 100, 200, 250),
      recencyWindow: fc.nat(8),
      preserve: fc.constantFrom(['system'], [], ['tool', 'system']),
    },
    { requiredKeys: [] },
  );

  it('decisions match the oracle; restore gives the input back', () => {
    fc.assert(
      fc.property(transcript, options, (input, o) => {
        const copy = structuredClone(input);
        const r = checkResult(input, dedupeMessages(input, o), o);
        checkAgainstOracle(input, r, o);
        expect(input).toStrictEqual(copy);
        expect(restoreMessages(r.messages, r.verbatim)).toStrictEqual(copy);
      }),
      { numRuns: 300 },
    );
  });

  it('property: every reference points at a message kept in full in the output (sync and async, both keep rules, any window)', async () => {
    const exactAndFuzzy = options.map((o) => ({ ...o, exact: true, near: true }));
    await fc.assert(
      fc.asyncProperty(transcript, exactAndFuzzy, async (input, o) => {
        for (const r of [dedupeMessages(input, o), await dedupeMessagesAsync(input, o)]) {
          const replacedIds = new Set(r.decisions.map((d) => d.id));
          for (const d of r.decisions) {
            expect(replacedIds.has(d.duplicateOfId)).toBe(false);
            const target = r.messages[d.duplicateOfIndex] as Message;
            expect(target.id).toBe(d.duplicateOfId);
            expect(target).toBe(input[d.duplicateOfIndex]);
            expect(target.metadata?.['ctxdedup']).toBeUndefined();
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('the async call agrees with the sync call', async () => {
    await fc.assert(
      fc.asyncProperty(transcript, options, async (input, o) => {
        const r = await dedupeMessagesAsync(input, o);
        expect(r).toStrictEqual(dedupeMessages(input, o));
      }),
      { numRuns: 60 },
    );
  });
});
