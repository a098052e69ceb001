/**
 * Deprecated names (issue 13, item 4): each old name is still accepted and maps to the new one,
 * and giving both with different values is an error naming the old one (never a silent choice).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  dedupeFindings,
  dedupeSources,
  researchStageReport,
  ResourceLedger,
  dedupeMessages,
  dedupeOpenAIChat,
  deduplicateWithReport,
  DEFAULT_TEMPLATES,
  type DedupeMessagesOptions,
  type Message,
} from '../../src/index.js';
import { dedupePrompt } from '../../src/adapters/ai-sdk.js';
import { type ClusterReport, InMemoryStore, MemoryDeduplicator } from '../../src/memory/index.js';
import { thrown, unsafe } from '../support/assertions.js';
import { cli, tempDir } from '../support/cli-helpers.js';

const lines = Array.from({ length: 20 }, (_, i) => `export const value${i} = compute(${i}, 'file.ts');`);
const base = lines.join('\n');
const edited = lines.map((l, i) => (i === 3 ? `${l} // edited` : l)).join('\n');
const msg = (id: string, content: string): Message => ({ id, role: 'user', content });
const pair = [msg('m0', base), msg('m1', edited)];

describe('near: the option `fuzzy` and the template `reference.fuzzy` are deprecated aliases', () => {
  it('`fuzzy: true` gives exactly the result of `near: true`, with `near` decisions', () => {
    const near = dedupeMessages(pair, { near: true });
    expect(near.decisions.map((d) => d.kind)).toEqual(['near']);
    expect(near.stats.nearDuplicates).toBe(1);
    expect(dedupeMessages(pair, { fuzzy: true })).toEqual(near);
    expect(dedupeMessages(pair, { near: true, fuzzy: true })).toEqual(near);
    expect(dedupeMessages(pair, { fuzzy: false }).decisions).toEqual([]);
  });

  it('both given and different: a TypeError naming options.fuzzy; each is validated under its own name', () => {
    expect(thrown(() => dedupeMessages(pair, { near: true, fuzzy: false }))).toEqual(
      new TypeError('options.fuzzy is a deprecated alias of options.near and disagrees with it: false vs true'),
    );
    expect(thrown(() => dedupeMessages(pair, { fuzzy: unsafe('yes') }))).toEqual(new TypeError('options.fuzzy must be a boolean, got a string'));
    expect(thrown(() => dedupeMessages(pair, { near: unsafe('yes') }))).toEqual(new TypeError('options.near must be a boolean, got a string'));
  });

  it('the block-pass conflict names the switch the caller used', () => {
    const blocks: DedupeMessagesOptions = { keep: 'earliest', blocks: true };
    expect(thrown(() => dedupeMessages(pair, { ...blocks, near: true })).message).toMatch(/^options\.blocks cannot be combined with options\.near /);
    expect(thrown(() => dedupeMessages(pair, { ...blocks, fuzzy: true })).message).toMatch(/^options\.blocks cannot be combined with options\.fuzzy /);
  });

  it('`reference.fuzzy` is the `near` template; both given must agree', () => {
    const expected = dedupeMessages(pair, { near: true, reference: { near: '~{percent}% of {keepId}' } });
    expect(expected.messages[0]?.content).toBe('~90% of m1');
    expect(dedupeMessages(pair, { near: true, reference: { fuzzy: '~{percent}% of {keepId}' } })).toEqual(expected);
    expect(dedupeMessages(pair, { near: true, reference: { near: 'x', fuzzy: 'x' } }).messages[0]?.content).toBe('x');
    expect(thrown(() => dedupeMessages(pair, { near: true, reference: { near: 'x', fuzzy: 'y' } }))).toEqual(
      new TypeError('options.reference.fuzzy is a deprecated alias of options.reference.near and disagrees with it: "y" vs "x"'),
    );
    expect(Object.keys(DEFAULT_TEMPLATES)).toEqual(['exact', 'near']);
    expect(DEFAULT_TEMPLATES.fuzzy).toBe(DEFAULT_TEMPLATES.near);
  });

  it('adapters: `fuzzy` maps to `near` (and turns blocks off the same way)', () => {
    const request = {
      model: 'm',
      messages: [
        { role: 'user', content: base },
        { role: 'user', content: edited },
      ],
    };
    const near = dedupeOpenAIChat(request, { near: true });
    expect(near.report.nearDuplicates).toBe(1);
    expect(near.decisions.map((d) => d.kind)).toEqual(['near']);
    expect(dedupeOpenAIChat(request, { fuzzy: true })).toEqual(near);
  });
});

describe('blocks.minRunChars: `blocks.minChars` is a deprecated alias', () => {
  const run = `${lines.slice(0, 6).join('\n')}`;
  const conversation = [msg('a', run), msg('b', `new line\n${run}`)];
  const blocks = (options: Record<string, unknown>) => dedupeMessages(conversation, { keep: 'earliest', minChars: 0, blocks: { minLines: 2, ...options } });

  it('maps to minRunChars', () => {
    const low = blocks({ minRunChars: 10 });
    const high = blocks({ minRunChars: 10_000 });
    expect(low.stats.blockReferences).toBe(1);
    expect(high.stats.blockReferences).toBe(0);
    expect(blocks({ minChars: 10 })).toEqual(low);
    expect(blocks({ minChars: 10_000 })).toEqual(high);
    expect(blocks({ minChars: 10, minRunChars: 10 })).toEqual(low);
  });

  it('both given and different: a TypeError naming options.blocks.minChars', () => {
    expect(thrown(() => blocks({ minChars: 10, minRunChars: 20 }))).toEqual(
      new TypeError('options.blocks.minChars is a deprecated alias of options.blocks.minRunChars and disagrees with it: 10 vs 20'),
    );
    expect(thrown(() => blocks({ minChars: -1 }))).toBeInstanceOf(RangeError);
    expect(thrown(() => blocks({ minChars: -1 })).message).toMatch(/^options\.blocks\.minChars /);
  });
});

describe('CLI: --fuzzy is a deprecated alias of --near', () => {
  const tmp = tempDir('ctxdedup-alias-');
  const corpus = join(tmp.dir, 'session.json');
  writeFileSync(corpus, JSON.stringify(pair.map((m, index) => ({ ...m, index }))));
  afterAll(() => tmp.cleanup());

  it('gives the same report, near duplicates included', async () => {
    const near = await cli(['dedupe', corpus, '--dry-run', '--json', '--near']);
    const fuzzy = await cli(['dedupe', corpus, '--dry-run', '--json', '--fuzzy']);
    const off = await cli(['dedupe', corpus, '--dry-run', '--json']);
    expect(near.code, near.stderr).toBe(0);
    expect(fuzzy.code, fuzzy.stderr).toBe(0);
    const report = (r: { stdout: string }) => {
      const { throughput: _, ...rest } = JSON.parse(r.stdout) as Record<string, unknown>;
      return rest;
    };
    expect(report(near)['nearDuplicates']).toBeGreaterThan(0);
    expect(report(off)['nearDuplicates']).toBe(0);
    expect(report(fuzzy)).toEqual(report(near));
  });

  it('--help lists --near and says --fuzzy is its deprecated alias', async () => {
    const help = await cli(['dedupe', '--help']);
    expect(help.stdout).toMatch(/--near\s+also replace near duplicates/);
    expect(help.stdout).toMatch(/--fuzzy\s+deprecated alias of --near/);
    expect(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'cli.md'), 'utf8')).toMatch(/`--fuzzy` is a deprecated alias of `--near`/);
  });
});

describe('memory: deduplicateAll is a deprecated alias of dedupeAll; a cluster lists removedIds', () => {
  async function seeded(): Promise<MemoryDeduplicator> {
    const store = new InMemoryStore();
    const vectors: [string, number[]][] = [
      ['a', [1, 0, 0]],
      ['b', [0.99, 0.141, 0]],
      ['c', [0, 0, 1]],
    ];
    for (const [i, [id, v]] of vectors.entries()) await store.add({ id, content: `memory ${id}`, timestamp: i, embedding: Float32Array.from(v) });
    return new MemoryDeduplicator({ store, embed: async (texts) => texts.map(() => [1, 0, 0]), upperThreshold: 0.95, lowerThreshold: 0.9 });
  }

  it('the same report; `removed` on a cluster is the ids, kept out of JSON', async () => {
    const report = await (await seeded()).dedupeAll({ dryRun: true });
    expect(report.removed).toBe(1);
    expect(report.clusters.map((c) => c.removedIds)).toEqual([['a']]);
    const cluster = report.clusters[0] as ClusterReport;
    expect(cluster.removed).toBe(cluster.removedIds);
    expect(Object.keys(cluster)).not.toContain('removed');
    expect(JSON.parse(JSON.stringify(cluster))).toEqual({ ...cluster });
    expect(await (await seeded()).deduplicateAll({ dryRun: true })).toEqual(report);
  });
});

describe('deduplicateWithReport: decisions and stats.charsSaved (removed / charsRemoved deprecated)', () => {
  it('the old names read the same values and stay out of JSON', () => {
    const scored = [
      { item: { content: 'ab' }, score: 1 },
      { item: { content: 'ab' }, score: 2 },
    ];
    const report = deduplicateWithReport(scored);
    expect(report.decisions).toEqual([{ index: 0, duplicateOf: 1, item: scored[0] }]);
    expect(report.stats).toEqual({ input: 2, kept: 1, removed: 1, charsSaved: 2 });
    expect(report.removed).toBe(report.decisions);
    expect(report.stats.charsRemoved).toBe(2);
    expect(Object.keys(report)).toEqual(['kept', 'decisions', 'stats']);
    expect(Object.keys(JSON.parse(JSON.stringify(report.stats)))).toEqual(['input', 'kept', 'removed', 'charsSaved']);
  });
});

describe('research and resources: decisions and stats (old names deprecated, non-enumerable)', () => {
  it('dedupeSources: kept / decisions / stats { input, kept, removed }', () => {
    const sources = [{ url: 'a', credibility_score: 1 }, { url: 'a', credibility_score: 2 }, { title: 'no url' }];
    const r = dedupeSources(sources);
    expect(Object.keys(r)).toEqual(['kept', 'decisions', 'stats']);
    expect(r.kept).toEqual([sources[1]]);
    expect(r.decisions.map((d) => [d.index, d.reason])).toEqual([
      [0, 'duplicate'],
      [2, 'no-url'],
    ]);
    expect(r.stats).toEqual({ input: 3, kept: 1, removed: 2, withoutUrl: 1, duplicates: 1 });
    expect(r.unique).toBe(r.kept);
    expect(r.pruned).toBe(r.decisions);
    expect([r.stats.total, r.stats.unique, r.stats.pruned]).toEqual([3, 1, 2]);
  });

  it('dedupeFindings: decisions / stats, duplicateOfParagraph', () => {
    const p = 'A paragraph that is long enough to count.';
    const r = dedupeFindings([p, p.toUpperCase()], { countTokens: (t) => t.length });
    expect(Object.keys(r)).toEqual(['text', 'decisions', 'stats']);
    expect(r.decisions).toEqual([{ finding: 1, paragraph: p.toUpperCase(), duplicateOfFinding: 0, duplicateOfParagraph: p }]);
    expect(r.stats).toEqual({ paragraphs: 2, kept: 1, removed: 1, tokens: p.length, naiveTokens: 2 * p.length + 2, tokensSaved: p.length + 2 });
    expect(r.duplicates).toBe(r.decisions);
    expect(r.decisions[0]?.duplicateOf).toBe(p);
    const { removed, tokensSaved, tokens, naiveTokens, paragraphs, kept } = r;
    expect({ removed, tokensSaved, tokens, naiveTokens, paragraphs, kept }).toEqual(r.stats);
    // The card reads the new shape, and the old one (a result saved by an earlier version).
    const card = researchStageReport({ findings: r });
    expect(researchStageReport({ findings: unsafe({ ...r.stats, text: r.text }) })).toEqual(card);
    const s = dedupeSources([{ url: 'a' }, { url: 'a' }]);
    expect(researchStageReport({ sources: unsafe({ stats: { total: 2, unique: 1, pruned: 1 } }) })).toEqual(researchStageReport({ sources: s }));
  });

  it('ResourceLedger: process and processToolResult return stats (report deprecated)', () => {
    const ledger = new ResourceLedger();
    const content = 'x'.repeat(400);
    ledger.recordAttachment({ uri: 'file:///a', content, turn: 1 });
    const r = ledger.process({ turn: 2, tool: 'read', callId: 'c1', blocks: [{ type: 'resource', uri: 'file:///a', content }] });
    expect(Object.keys(r)).toEqual(['blocks', 'decisions', 'stats']);
    expect(r.stats).toMatchObject({ resourceBlocks: 1, matched: 1 });
    expect(r.report).toBe(r.stats);
    const t = ledger.processToolResult(
      { content: [{ type: 'resource', resource: { uri: 'file:///a', text: content } }] },
      { turn: 3, tool: 'read', callId: 'c2' },
    );
    expect(Object.keys(t)).toEqual(['result', 'decisions', 'stats']);
    expect(t.stats).toMatchObject({ matched: 1, unknown: 0 });
    expect(t.report).toBe(t.stats);
  });
});

describe('adapters: stats (report deprecated)', () => {
  it('dedupeOpenAIChat and dedupePrompt return stats; report is the same object, absent from JSON', () => {
    const request = {
      model: 'm',
      messages: [
        { role: 'user', content: base },
        { role: 'user', content: base },
      ],
    };
    const r = dedupeOpenAIChat(request);
    expect(Object.keys(r)).toEqual(['request', 'verbatim', 'decisions', 'stats']);
    expect(r.stats).toMatchObject({ texts: 2, rewritten: 1, exactDuplicates: 1 });
    expect(r.report).toBe(r.stats);
    const p = dedupePrompt([
      { role: 'user', content: [{ type: 'text', text: base }] },
      { role: 'user', content: [{ type: 'text', text: base }] },
    ]);
    expect(Object.keys(p)).toEqual(['prompt', 'decisions', 'stats']);
    expect(p.stats.rewritten).toBe(1);
    expect(p.report).toBe(p.stats);
  });
});
