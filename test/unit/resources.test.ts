import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RESOURCE_TEMPLATE,
  ResourceLedger,
  countTokens,
  loadResourceConfig,
  parseResourceConfig,
  restoreResources,
  type ContentBlock,
  type ResourceBlock,
  type ResourceDecision,
  type ResourceLedgerOptions,
  describeLocation,
} from '../../src/index.js';
import { thrown, unsafe } from '../support/assertions.js';

const FOO = 'fn main() {\n    println!("hello, world");\n}\n'.repeat(20); // 880 bytes
const BAR = 'pub struct Bar { pub x: u32 }\n'.repeat(30); // 900 bytes
const sha = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');
const res = (uri: string, content: string | Uint8Array, mimeType?: string): ResourceBlock =>
  mimeType === undefined ? { type: 'resource', uri, content } : { type: 'resource', uri, content, mimeType };
const byChars: ResourceLedgerOptions = { countTokens: (t) => t.length };

function read(ledger: ResourceLedger, turn: number, callId: string, ...blocks: ContentBlock[]) {
  return ledger.process({ turn, tool: 'read_file', callId, blocks });
}

function actions(decisions: ResourceDecision[]): string[] {
  return decisions.map((d) => (d.action === 'referenced' ? 'referenced' : d.reason));
}

describe('ResourceLedger: matching', () => {
  it('replaces a tool read of an attached file with a reference to the attachment', () => {
    const ledger = new ResourceLedger(byChars);
    expect(ledger.recordAttachment({ uri: 'file:///src/foo.rs', content: FOO, turn: 1 })).toEqual({ recorded: true, bytes: 880, sha256: sha(FOO) });
    const { blocks, decisions, stats: report } = read(ledger, 3, 'c1', res('file:///src/foo.rs', FOO));
    expect(blocks).toHaveLength(1);
    const ref = blocks[0] as { type: string; text: string };
    expect(ref.type).toBe('text');
    expect(ref.text).toBe(
      `[ctxdedup] The content of file:///src/foo.rs has not changed (sha256:${sha(FOO).slice(0, 12)}): it is identical to the attachment at turn 1, which is still in this conversation.`,
    );
    expect(decisions[0]).toMatchObject({ action: 'referenced', index: 0, original: { kind: 'attachment', turn: 1 }, sha256: sha(FOO), bytes: 880 });
    expect(report).toMatchObject({ blocks: 1, resourceBlocks: 1, matched: 1, delivered: 0, bytesBefore: 880 });
    expect(report.bytesAfter).toBe(Buffer.byteLength(ref.text));
    expect(report.bytesSaved).toBe(880 - Buffer.byteLength(ref.text));
    expect(report.tokensSaved).toBe(FOO.length - ref.text.length);
  });

  it('points a repeated tool read at the earlier tool call, naming its id and turn', () => {
    const ledger = new ResourceLedger();
    const first = read(ledger, 3, 'call_a', res('file:///foo.rs', FOO));
    expect(first.blocks[0]).toEqual(res('file:///foo.rs', FOO));
    expect(actions(first.decisions)).toEqual(['new']);
    const again = read(ledger, 7, 'call_b', res('file:///foo.rs', FOO));
    const text = (again.blocks[0] as { text: string }).text;
    expect(text).toContain('file:///foo.rs');
    expect(text).toContain('tool call `call_a` in turn 3');
    expect(text).toContain(`sha256:${sha(FOO).slice(0, 12)}`);
    expect(text).toContain('has not changed');
    expect(again.decisions[0]).toMatchObject({ action: 'referenced', original: { kind: 'tool', turn: 3, tool: 'read_file', callId: 'call_a' } });
  });

  // The timeout bounds the complexity with a wide margin either way (about 0.9 s here; a scan of the
  // response per block took about 26 s).
  it('one response of 80,000 resource blocks: repeats within it matched, new versions changed (one lookup per block)', { timeout: 10_000 }, () => {
    const n = 20_000;
    const body = (i: number): string => `${'x'.repeat(1000)}${i}`;
    const blocks: ResourceBlock[] = [];
    for (let i = 0; i < n; i++) blocks.push(res(`file:///f${i}`, body(i)));
    for (let i = 0; i < n; i++) blocks.push(res(`file:///f${i}`, body(i)));
    for (let i = 0; i < n; i++) blocks.push(res(`file:///f${i}`, `${body(i)} edited`));
    for (let i = 0; i < n; i++) blocks.push(res(`file:///g${i}`, body(i)));
    const { decisions, stats } = read(new ResourceLedger(byChars), 1, 'c1', ...blocks);
    const counts = new Map<string, number>();
    for (const a of actions(decisions)) counts.set(a, (counts.get(a) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual({ new: 2 * n, referenced: n, changed: n });
    expect(stats).toMatchObject({ resourceBlocks: 4 * n, matched: n });
  });

  it('delivers the same URI with changed content in full', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('file:///foo.rs', FOO));
    const changed = read(ledger, 2, 'c2', res('file:///foo.rs', `${FOO}// edited\n`));
    expect(changed.blocks[0]).toEqual(res('file:///foo.rs', `${FOO}// edited\n`));
    expect(actions(changed.decisions)).toEqual(['changed']);
    // Both versions are now known; the old one still matches.
    expect(actions(read(ledger, 3, 'c3', res('file:///foo.rs', FOO), res('file:///foo.rs', `${FOO}// edited\n`)).decisions)).toEqual([
      'referenced',
      'referenced',
    ]);
  });

  it('delivers different URIs with identical content in full', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('file:///a/foo.rs', FOO));
    const other = read(ledger, 2, 'c2', res('file:///b/foo.rs', FOO), res('FILE:///a/foo.rs', FOO), res('file:///a/./foo.rs', FOO));
    expect(other.blocks).toEqual([res('file:///b/foo.rs', FOO), res('FILE:///a/foo.rs', FOO), res('file:///a/./foo.rs', FOO)]);
    expect(actions(other.decisions)).toEqual(['new', 'new', 'new']);
  });

  it('compares URIs as exact strings, lone surrogates included', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('x\uD800', FOO));
    expect(actions(read(ledger, 2, 'c2', res('x\uFFFD', FOO), res('x\uDC00', FOO), res('x\uD800', FOO)).decisions)).toEqual(['new', 'new', 'referenced']);
  });

  it('handles multi-block responses with mixed matches, text passing through untouched', () => {
    const ledger = new ResourceLedger();
    ledger.recordAttachment({ uri: 'file:///foo.rs', content: FOO, turn: 0 });
    const note: ContentBlock = { type: 'text', text: 'Here are the files:' };
    const small = res('file:///tiny.txt', 'tiny');
    const {
      blocks,
      decisions,
      stats: report,
    } = read(ledger, 2, 'multi', note, res('file:///foo.rs', FOO), res('file:///bar.rs', BAR), small, res('file:///bar.rs', BAR));
    expect(blocks[0]).toBe(note);
    expect(blocks[3]).toBe(small);
    expect((blocks[1] as { text: string }).text).toContain('the attachment at turn 0');
    expect(blocks[2]).toEqual(res('file:///bar.rs', BAR));
    // The second copy of bar.rs in the same response points at this very call.
    expect((blocks[4] as { text: string }).text).toContain('tool call `multi` in turn 2');
    expect(decisions.map((d) => d.index)).toEqual([1, 2, 3, 4]);
    expect(actions(decisions)).toEqual(['referenced', 'new', 'small', 'referenced']);
    expect(report).toMatchObject({ blocks: 5, resourceBlocks: 4, matched: 2, delivered: 2, bytesBefore: 880 + 900 + 4 + 900 });
  });

  it('matches string and byte contents by their bytes (Uint8Array views included)', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('file:///foo.rs', FOO));
    const bytes = new TextEncoder().encode(FOO);
    const padded = new Uint8Array(bytes.length + 10);
    padded.set(bytes, 5);
    const view = padded.subarray(5, 5 + bytes.length);
    const r = read(ledger, 2, 'c2', res('file:///foo.rs', bytes), res('file:///foo.rs', view), res('file:///foo.rs', Buffer.from(FOO)));
    expect(actions(r.decisions)).toEqual(['referenced', 'referenced', 'referenced']);
    expect(r.decisions.every((d) => d.sha256 === sha(FOO))).toBe(true);
  });

  it('checksums binary content exactly as given', () => {
    const ledger = new ResourceLedger();
    const binary = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) % 256);
    const first = read(ledger, 1, 'c1', res('blob:1', binary, 'application/octet-stream'));
    expect(first.decisions[0]?.sha256).toBe(sha(binary));
    const again = read(ledger, 1, 'c2', res('blob:1', binary.slice(), 'application/octet-stream'));
    expect(actions(again.decisions)).toEqual(['referenced']);
  });
});

describe('ResourceLedger: minBytes (UTF-8 bytes of the raw content)', () => {
  const at = (bytes: number, unit = 'a'): string => unit.repeat(bytes / Buffer.byteLength(unit));
  // Varied ASCII: 300 bytes of many o200k tokens (a run of one letter is a few tokens, and a
  // reference must also be shorter in tokens).
  const ascii = Array.from({ length: 300 }, (_, i) => String.fromCharCode(33 + ((i * 37) % 90))).join('');

  it.each([
    ['ASCII', ascii, `${ascii}a`],
    ['two-byte é (150 UTF-16 units = 300 bytes)', at(300, 'é'), `${at(300, 'é')}a`],
    ['four-byte emoji (75 pairs = 300 bytes)', at(300, '😀'), `${at(300, '😀')}a`],
  ])('%s: 300 bytes always delivered, 301 bytes deduplicated', (_, exactly300, over) => {
    expect(Buffer.byteLength(exactly300)).toBe(300);
    expect(Buffer.byteLength(over)).toBe(301);
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('u', exactly300), res('v', over));
    const r = read(ledger, 2, 'c2', res('u', exactly300), res('v', over));
    expect(actions(r.decisions)).toEqual(['small', 'referenced']);
    expect(r.decisions[0]).not.toHaveProperty('sha256');
    expect(r.decisions[0]?.bytes).toBe(300);
  });

  it('applies to byte contents and honours a custom minBytes', () => {
    const ledger = new ResourceLedger({ minBytes: 1000 });
    const b1000 = new Uint8Array(1000).fill(65);
    const b1001 = new Uint8Array(1001).fill(65);
    read(ledger, 1, 'c1', res('a', b1000), res('b', b1001));
    expect(actions(read(ledger, 2, 'c2', res('a', b1000), res('b', b1001)).decisions)).toEqual(['small', 'referenced']);
    expect(ledger.recordAttachment({ uri: 'z', content: b1000, turn: 3 })).toEqual({ recorded: false, bytes: 1000 });
  });

  it('never replaces content with a reference that is not shorter', () => {
    const ledger = new ResourceLedger({ minBytes: 0 });
    read(ledger, 1, 'c1', res('file:///x', 'short content'));
    const r = read(ledger, 2, 'c2', res('file:///x', 'short content'));
    expect(actions(r.decisions)).toEqual(['not-shorter']);
    expect(r.blocks[0]).toEqual(res('file:///x', 'short content'));
  });
});

describe('ResourceLedger: lookbackTurns', () => {
  it('references an original exactly lookbackTurns old, and re-delivers one older', () => {
    const ledger = new ResourceLedger(); // lookbackTurns 30
    read(ledger, 3, 'c3', res('file:///foo.rs', FOO));
    expect(actions(read(ledger, 33, 'c33', res('file:///foo.rs', FOO)).decisions)).toEqual(['referenced']);
    const late = new ResourceLedger();
    read(late, 3, 'c3', res('file:///foo.rs', FOO));
    const r = read(late, 34, 'c34', res('file:///foo.rs', FOO));
    expect(actions(r.decisions)).toEqual(['expired']);
    expect(r.blocks[0]).toEqual(res('file:///foo.rs', FOO));
    // The new delivery becomes the reference point.
    const next = read(late, 40, 'c40', res('file:///foo.rs', FOO));
    expect(next.decisions[0]).toMatchObject({ action: 'referenced', original: { turn: 34, callId: 'c34' } });
  });

  it('honours a custom lookback, 0 meaning the same turn only', () => {
    const ledger = new ResourceLedger({ lookbackTurns: 0 });
    read(ledger, 5, 'a', res('file:///foo.rs', FOO));
    expect(actions(read(ledger, 5, 'b', res('file:///foo.rs', FOO)).decisions)).toEqual(['referenced']);
    expect(actions(read(ledger, 6, 'c', res('file:///foo.rs', FOO)).decisions)).toEqual(['expired']);
  });

  it('prefers the earliest delivery still inside the lookback', () => {
    const ledger = new ResourceLedger({ lookbackTurns: 10 });
    ledger.recordAttachment({ uri: 'file:///foo.rs', content: FOO, turn: 1 });
    ledger.recordAttachment({ uri: 'file:///foo.rs', content: FOO, turn: 8 });
    expect(read(ledger, 11, 'x', res('file:///foo.rs', FOO)).decisions[0]).toMatchObject({ original: { kind: 'attachment', turn: 1 } });
    expect(read(ledger, 12, 'y', res('file:///foo.rs', FOO)).decisions[0]).toMatchObject({ original: { kind: 'attachment', turn: 8 } });
  });
});

describe('ResourceLedger: configuration', () => {
  it('delivers an opted-out tool in full, and records it for other tools', () => {
    const ledger = new ResourceLedger({ tools: { run_tests: { deduplicate: false } } });
    const run = (turn: number, id: string) => ledger.process({ turn, tool: 'run_tests', callId: id, blocks: [res('report://tests', FOO)] });
    expect(actions(run(1, 't1').decisions)).toEqual(['opted-out']);
    expect(actions(run(2, 't2').decisions)).toEqual(['opted-out']);
    expect(read(ledger, 3, 'r1', res('report://tests', FOO)).decisions[0]).toMatchObject({
      action: 'referenced',
      original: { kind: 'tool', tool: 'run_tests', callId: 't1', turn: 1 },
    });
  });

  it('does nothing when disabled (no checksum, nothing recorded)', () => {
    const ledger = new ResourceLedger({ enabled: false });
    read(ledger, 1, 'c1', res('file:///foo.rs', FOO));
    const r = read(ledger, 2, 'c2', res('file:///foo.rs', FOO));
    expect(actions(r.decisions)).toEqual(['disabled']);
    expect(r.decisions[0]).toEqual({ action: 'delivered', index: 0, uri: 'file:///foo.rs', bytes: 880, reason: 'disabled' });
    expect(ledger.deliveries()).toEqual([]);
    expect(ledger.recordAttachment({ uri: 'a', content: FOO, turn: 3 })).toEqual({ recorded: false, bytes: 880 });
  });

  it('fills a custom template, placeholders included once only', () => {
    const ledger = new ResourceLedger({ reference: '<same {uri} {checksum} {location} t={turn} {bytes}B {mimeType} {sha256}>' });
    read(ledger, 1, 'c1', res('{location}', FOO, 'text/x-rust'));
    const text = (read(ledger, 2, 'c2', res('{location}', FOO, 'text/x-rust')).blocks[0] as { text: string }).text;
    expect(text).toBe(`<same {location} sha256:${sha(FOO).slice(0, 12)} tool call \`c1\` in turn 1 t=1 880B text/x-rust ${sha(FOO)}>`);
  });

  it('accepts a reference function and checks what it returns', () => {
    const ledger = new ResourceLedger({ reference: (info) => `see ${info.location} (${info.checksum}, ${info.original.kind})` });
    read(ledger, 1, 'c1', res('u', FOO));
    expect((read(ledger, 2, 'c2', res('u', FOO)).blocks[0] as { text: string }).text).toBe(
      `see tool call \`c1\` in turn 1 (sha256:${sha(FOO).slice(0, 12)}, tool)`,
    );
    const bad = new ResourceLedger({ reference: (() => 42) as unknown as () => string });
    read(bad, 1, 'c1', res('u', FOO));
    expect(() => read(bad, 2, 'c2', res('u', FOO))).toThrow(/options\.reference\(\) must return a string/);
    // The failed call recorded nothing and did not advance the turn.
    expect(bad.deliveries()).toHaveLength(1);
    expect(bad.turn).toBe(1);
  });

  it('exports the default template', () => {
    expect(DEFAULT_RESOURCE_TEMPLATE).toContain('{uri}');
    expect(DEFAULT_RESOURCE_TEMPLATE).toContain('{checksum}');
    expect(DEFAULT_RESOURCE_TEMPLATE).toContain('{location}');
  });

  it('validates options, naming the option', () => {
    expect(() => new ResourceLedger({ minBytes: -1 })).toThrow(RangeError);
    expect(() => new ResourceLedger({ minBytes: 1.5 })).toThrow(/options\.minBytes/);
    expect(() => new ResourceLedger({ lookbackTurns: Number.NaN })).toThrow(/options\.lookbackTurns is NaN/);
    expect(() => new ResourceLedger({ enabled: 'yes' as unknown as boolean })).toThrow(/options\.enabled must be a boolean/);
    expect(() => new ResourceLedger({ tools: { t: { deduplicate: 0 as unknown as boolean } } })).toThrow(/options\.tools\["t"\]\.deduplicate/);
    expect(() => new ResourceLedger({ reference: 3 as unknown as string })).toThrow(/options\.reference/);
    expect(() => new ResourceLedger({ countTokens: 'p50k' as unknown as 'o200k_base' })).toThrow(/options\.countTokens/);
    expect(() => new ResourceLedger([] as unknown as ResourceLedgerOptions)).toThrow(/options must be an object/);
  });
});

describe('ResourceLedger: token accounting', () => {
  it('counts tokens with o200k by default: content tokens minus reference tokens', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('file:///foo.rs', FOO));
    const r = read(ledger, 2, 'c2', res('file:///foo.rs', FOO));
    const text = (r.blocks[0] as { text: string }).text;
    expect(r.stats.tokensSaved).toBe(countTokens(FOO) - countTokens(text));
    expect(r.stats.tokensSaved).toBeGreaterThan(100);
  });

  it('uses a plugged-in counter (once per distinct content) and a named encoding', () => {
    const seen: string[] = [];
    const ledger = new ResourceLedger({ countTokens: (t) => (seen.push(t), 1) });
    read(ledger, 1, 'c1', res('u', FOO));
    read(ledger, 2, 'c2', res('u', FOO));
    read(ledger, 3, 'c3', res('u', FOO));
    expect(seen.filter((t) => t === FOO)).toHaveLength(1);
    const cl = new ResourceLedger({ countTokens: 'cl100k_base' });
    read(cl, 1, 'c1', res('u', FOO));
    const r = read(cl, 2, 'c2', res('u', FOO));
    expect(r.stats.tokensSaved).toBe(countTokens(FOO, 'cl100k_base') - countTokens((r.blocks[0] as { text: string }).text, 'cl100k_base'));
  });

  it('counts byte contents as UTF-8 text when valid, else as base64', () => {
    const ledger = new ResourceLedger(byChars);
    const utf8 = new TextEncoder().encode(FOO);
    const binary = Uint8Array.from({ length: 999 }, (_, i) => (i * 13 + 128) % 256);
    read(ledger, 1, 'c1', res('text', utf8), res('bin', binary));
    const r = read(ledger, 2, 'c2', res('text', utf8), res('bin', binary));
    const refLength = (i: number) => (r.blocks[i] as { text: string }).text.length;
    expect(r.decisions.map((d) => (d.action === 'referenced' ? d.tokensSaved : -1))).toEqual([
      FOO.length - refLength(0),
      Buffer.from(binary).toString('base64').length - refLength(1),
    ]);
  });

  it('rejects a counter that returns a bad value', () => {
    const ledger = new ResourceLedger({ countTokens: () => -1 });
    read(ledger, 1, 'c1', res('u', FOO));
    expect(() => read(ledger, 2, 'c2', res('u', FOO))).toThrow(/options\.countTokens\(\) must return a non-negative integer/);
  });

  it('keeps running totals', () => {
    const ledger = new ResourceLedger(byChars);
    read(ledger, 1, 'c1', res('u', FOO), res('v', BAR));
    const a = read(ledger, 2, 'c2', res('u', FOO));
    const b = read(ledger, 3, 'c3', res('v', BAR), res('u', FOO));
    expect(ledger.totals).toEqual({
      responses: 3,
      resourceBlocks: 5,
      matched: 3,
      bytesSaved: a.stats.bytesSaved + b.stats.bytesSaved,
      tokensSaved: a.stats.tokensSaved + b.stats.tokensSaved,
    });
  });
});

describe('ResourceLedger: compaction', () => {
  it('forgetTurns drops deliveries so nothing points at content that left the context', () => {
    const ledger = new ResourceLedger();
    ledger.recordAttachment({ uri: 'file:///foo.rs', content: FOO, turn: 1 });
    read(ledger, 2, 'c2', res('file:///bar.rs', BAR));
    expect(ledger.forgetTurns([1])).toBe(1);
    const r = read(ledger, 3, 'c3', res('file:///foo.rs', FOO), res('file:///bar.rs', BAR));
    expect(actions(r.decisions)).toEqual(['new', 'referenced']);
    expect(ledger.forgetTurns([])).toBe(0);
  });

  it('compactBefore drops every delivery before the turn, and later ones become references', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('file:///foo.rs', FOO));
    read(ledger, 4, 'c4', res('file:///bar.rs', BAR));
    expect(ledger.compactBefore(4)).toBe(1);
    expect(ledger.deliveries().map((d) => d.uri)).toEqual(['file:///bar.rs']);
    const r = read(ledger, 5, 'c5', res('file:///foo.rs', FOO), res('file:///bar.rs', BAR));
    expect(actions(r.decisions)).toEqual(['new', 'referenced']);
    expect(read(ledger, 6, 'c6', res('file:///foo.rs', FOO)).decisions[0]).toMatchObject({ original: { callId: 'c5' } });
  });

  it('forgetCalls drops the deliveries of given tool calls', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'keep', res('a', FOO));
    read(ledger, 1, 'drop', res('b', BAR));
    expect(ledger.forgetCalls(['drop', 'unknown'])).toBe(1);
    expect(actions(read(ledger, 2, 'x', res('a', FOO), res('b', BAR)).decisions)).toEqual(['referenced', 'new']);
  });

  it('validates compaction arguments', () => {
    const ledger = new ResourceLedger();
    expect(() => ledger.forgetTurns([1, -1])).toThrow(/turns\[1\] must be a non-negative integer/);
    expect(() => ledger.forgetTurns(3 as unknown as number[])).toThrow(/turns must be an array/);
    expect(() => ledger.compactBefore(1.5)).toThrow(RangeError);
    expect(() => ledger.forgetCalls([1 as unknown as string])).toThrow(/callIds\[0\] must be a string/);
  });
});

describe('ResourceLedger: JSON round trip', () => {
  function session(): ResourceLedger {
    const ledger = new ResourceLedger({ lookbackTurns: 10, minBytes: 100, tools: { run_tests: { deduplicate: false } } });
    ledger.recordAttachment({ uri: 'file:///foo.rs', content: FOO, turn: 1 });
    read(ledger, 2, 'c2', res('file:///bar.rs', BAR), res('x\uD800', FOO));
    read(ledger, 3, 'c3', res('file:///bar.rs', BAR));
    return ledger;
  }

  it('serializes identities, turns and locations, never content', () => {
    const ledger = session();
    const json = ledger.toJSON();
    const text = JSON.stringify(ledger);
    expect(text).not.toContain('println');
    expect(text).not.toContain('pub struct');
    expect(json).toMatchObject({
      format: 'ctxdedup/resource-ledger',
      version: 1,
      turn: 3,
      settings: { enabled: true, minBytes: 100, lookbackTurns: 10, tools: { run_tests: { deduplicate: false } } },
    });
    expect(json.deliveries).toEqual([
      { uri: 'file:///foo.rs', sha256: sha(FOO), bytes: 880, location: { kind: 'attachment', turn: 1 } },
      { uri: 'file:///bar.rs', sha256: sha(BAR), bytes: 900, location: { kind: 'tool', turn: 2, tool: 'read_file', callId: 'c2' } },
      { uri: 'x\uD800', sha256: sha(FOO), bytes: 880, location: { kind: 'tool', turn: 2, tool: 'read_file', callId: 'c2' } },
    ]);
    expect(json.totals).toMatchObject({ responses: 2, resourceBlocks: 3, matched: 1 });
  });

  it('survives a restart: the restored ledger decides exactly like the original', () => {
    const original = session();
    const restored = ResourceLedger.fromJSON(JSON.parse(JSON.stringify(original)) as unknown);
    const fromText = ResourceLedger.fromJSON(JSON.stringify(original));
    expect(restored.toJSON()).toEqual(original.toJSON());
    expect(fromText.toJSON()).toEqual(original.toJSON());
    const next = (l: ResourceLedger) =>
      read(l, 12, 'c12', res('file:///foo.rs', FOO), res('file:///bar.rs', BAR), res('x\uD800', FOO)).decisions.map((d) =>
        d.action === 'referenced' ? `ref ${JSON.stringify(d.original)}` : d.reason,
      );
    expect(next(restored)).toEqual(next(original));
    const c2 = 'ref {"kind":"tool","turn":2,"tool":"read_file","callId":"c2"}';
    expect(next(fromText)).toEqual(['expired', c2, c2]);
  });

  it('lets options override saved settings and keeps turn order enforced', () => {
    const restored = ResourceLedger.fromJSON(session().toJSON(), { lookbackTurns: 100 });
    expect(restored.settings).toEqual({ enabled: true, minBytes: 100, lookbackTurns: 100, tools: { run_tests: { deduplicate: false } } });
    expect(() => read(restored, 2, 'old', res('u', FOO))).toThrow(/response\.turn is 2, but the conversation is already at turn 3/);
    expect(actions(read(restored, 50, 'c50', res('file:///foo.rs', FOO)).decisions)).toEqual(['referenced']);
  });

  it('rejects malformed data, naming the path', () => {
    const good = session().toJSON();
    const bad = (patch: (j: Record<string, unknown>) => void) => {
      const j = JSON.parse(JSON.stringify(good)) as Record<string, unknown>;
      patch(j);
      return () => ResourceLedger.fromJSON(j);
    };
    expect(() => ResourceLedger.fromJSON('{nope')).toThrow(/json is not valid JSON/);
    expect(() => ResourceLedger.fromJSON(null)).toThrow(/json must be an object/);
    expect(bad((j) => (j['format'] = 'other'))).toThrow(/json\.format/);
    expect(bad((j) => (j['version'] = 2))).toThrow(/json\.version/);
    expect(bad((j) => ((j['deliveries'] as Record<string, unknown>[])[1]!['sha256'] = 'abc'))).toThrow(
      /json\.deliveries\[1\]\.sha256 must be 64 lowercase hex digits/,
    );
    expect(bad((j) => ((j['deliveries'] as Record<string, unknown>[])[0]!['uri'] = 5))).toThrow(/json\.deliveries\[0\]\.uri must be a string/);
    expect(bad((j) => ((j['deliveries'] as Record<string, Record<string, unknown>>[])[0]!['location']!['turn'] = 9))).toThrow(
      /json\.deliveries\[0\]\.location\.turn is 9, after the ledger's latest turn 3/,
    );
    expect(bad((j) => ((j['deliveries'] as Record<string, Record<string, unknown>>[])[2]!['location']!['kind'] = 'memo'))).toThrow(
      /json\.deliveries\[2\]\.location\.kind/,
    );
    expect(bad((j) => ((j['settings'] as Record<string, unknown>)['minBytes'] = -5))).toThrow(/json\.settings\.minBytes/);
    expect(bad((j) => delete j['totals'])).toThrow(/json\.totals must be an object/);
  });
});

describe('ResourceLedger: bad input', () => {
  const ledger = () => {
    const l = new ResourceLedger();
    read(l, 5, 'c5', res('file:///foo.rs', FOO));
    return l;
  };
  const call = (l: ResourceLedger, response: unknown) => () => l.process(response as Parameters<ResourceLedger['process']>[0]);
  const blocks = (...b: unknown[]) => ({ turn: 6, tool: 'read_file', callId: 'x', blocks: b });

  it.each([
    ['missing URI', blocks({ type: 'resource', content: FOO }), TypeError, /response\.blocks\[0\]\.uri must be a string, got undefined/],
    [
      'non-string URI',
      blocks({ type: 'text', text: 'ok' }, { type: 'resource', uri: 7, content: FOO }),
      TypeError,
      /response\.blocks\[1\]\.uri must be a string, got a number/,
    ],
    [
      'numeric content',
      blocks({ type: 'resource', uri: 'u', content: 42 }),
      TypeError,
      /response\.blocks\[0\]\.content must be a string or a Uint8Array, got a number/,
    ],
    [
      'array content',
      blocks({ type: 'resource', uri: 'u', content: [1, 2] }),
      TypeError,
      /blocks\[0\]\.content must be a string or a Uint8Array, got an array/,
    ],
    ['DataView content', blocks({ type: 'resource', uri: 'u', content: new DataView(new ArrayBuffer(4)) }), TypeError, /blocks\[0\]\.content/],
    [
      'lone surrogate',
      blocks({ type: 'resource', uri: 'u', content: `${FOO}\uD83D` }),
      TypeError,
      /blocks\[0\]\.content contains a lone surrogate.*pass the content as bytes \(a Uint8Array\)/,
    ],
    ['unknown block type', blocks({ type: 'image', data: 'x' }), TypeError, /response\.blocks\[0\]\.type must be 'resource' or 'text', got "image"/],
    ['missing block type', blocks({ uri: 'u', content: FOO }), TypeError, /response\.blocks\[0\]\.type/],
    ['non-string text', blocks({ type: 'text', text: null }), TypeError, /response\.blocks\[0\]\.text must be a string/],
    ['non-string mimeType', blocks({ type: 'resource', uri: 'u', content: FOO, mimeType: 1 }), TypeError, /blocks\[0\]\.mimeType/],
    ['non-object block', blocks('text'), TypeError, /response\.blocks\[0\] must be an object/],
    ['blocks not an array', { turn: 6, tool: 't', callId: 'x', blocks: 'no' }, TypeError, /response\.blocks must be an array/],
    ['negative turn', { ...blocks(), turn: -1 }, RangeError, /response\.turn must be a non-negative integer, got -1/],
    ['fractional turn', { ...blocks(), turn: 6.5 }, RangeError, /response\.turn must be a non-negative integer/],
    ['NaN turn', { ...blocks(), turn: Number.NaN }, RangeError, /response\.turn/],
    ['string turn', { ...blocks(), turn: '6' }, TypeError, /response\.turn must be a number, got a string/],
    [
      'turn going backwards',
      { ...blocks(), turn: 4 },
      RangeError,
      /response\.turn is 4, but the conversation is already at turn 5 \(turns cannot go backwards\)/,
    ],
    ['missing tool', { turn: 6, callId: 'x', blocks: [] }, TypeError, /response\.tool must be a string/],
    ['missing call id', { turn: 6, tool: 't', blocks: [] }, TypeError, /response\.callId must be a string/],
    ['not an object', null, TypeError, /response must be an object/],
  ])('%s', (_, response, type, message) => {
    const l = ledger();
    const before = l.toJSON();
    expect(call(l, response)).toThrow(type);
    expect(call(l, response)).toThrow(message);
    expect(l.toJSON()).toEqual(before); // no partial write
  });

  it('accepts the lone-surrogate content once given as bytes', () => {
    const l = ledger();
    const bytes = Uint8Array.from([...Buffer.from(FOO), 0xed, 0xa0, 0xbd]);
    expect(actions(l.process(blocks({ type: 'resource', uri: 'u', content: bytes }) as never).decisions)).toEqual(['new']);
  });

  it('validates attachments the same way', () => {
    const l = ledger();
    expect(() => l.recordAttachment({ uri: 'u', content: 'a\uDC00', turn: 6 })).toThrow(/attachment\.content contains a lone surrogate.*bytes/);
    expect(() => l.recordAttachment({ uri: 1, content: FOO, turn: 6 } as never)).toThrow(/attachment\.uri must be a string/);
    expect(() => l.recordAttachment({ uri: 'u', content: FOO, turn: 2 })).toThrow(/attachment\.turn is 2, but the conversation is already at turn 5/);
    expect(() => l.recordAttachment({ uri: 'u', content: FOO, turn: -3 })).toThrow(RangeError);
    expect(() => l.recordAttachment({ uri: 'u', content: 5, turn: 6 } as never)).toThrow(/attachment\.content must be a string or a Uint8Array/);
    expect(() => l.recordAttachment(undefined as never)).toThrow(/attachment must be an object/);
    expect(l.deliveries()).toHaveLength(1);
  });

  it('allows several calls and attachments in the same turn', () => {
    const l = ledger();
    l.recordAttachment({ uri: 'a', content: BAR, turn: 5 });
    expect(actions(read(l, 5, 'again', res('a', BAR)).decisions)).toEqual(['referenced']);
  });
});

describe('restoreResources', () => {
  it('puts the original blocks back, byte-identical', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'c1', res('a', FOO));
    const input: ContentBlock[] = [{ type: 'text', text: 'hi' }, res('a', FOO), res('b', BAR), res('a', FOO)];
    const { blocks, decisions } = read(ledger, 2, 'c2', ...input);
    expect(blocks).not.toEqual(input);
    const restored = restoreResources(blocks, decisions);
    expect(restored).toEqual(input);
    restored.forEach((b, i) => expect(b).toBe(input[i]));
  });
});

describe('TOML settings', () => {
  const toml = `
title = "my agent"

[conversation.deduplication]
enabled = true
min_bytes = 512
lookback_turns = 12

[tools.run_tests]
deduplicate = false
timeout = 30

[tools.read_file]
description = "no dedup key here"
`;

  it('reads [conversation.deduplication] and [tools.<name>]', () => {
    expect(parseResourceConfig(toml)).toEqual({ enabled: true, minBytes: 512, lookbackTurns: 12, tools: { run_tests: { deduplicate: false } } });
    expect(parseResourceConfig('')).toEqual({});
    expect(parseResourceConfig('[conversation.deduplication]\nenabled = false')).toEqual({ enabled: false });
  });

  it('refuses a [tools.<name>] key that misspells deduplicate (the tool would stay deduplicated); other keys are not ours', () => {
    for (const key of ['dedupe', 'dedup', 'deduplication', 'Deduplicate']) {
      expect(() => parseResourceConfig(`[tools.run_tests]\n${key} = false\n`)).toThrow(
        new TypeError(`config: tools.run_tests.${key} is not a setting: did you mean deduplicate?`),
      );
    }
    expect(parseResourceConfig('[tools.run_tests]\ncommand = "npm test"\n')).toEqual({ tools: {} });
  });

  it('configures a ledger, from text or from a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-'));
    try {
      const file = join(dir, 'agent.toml');
      writeFileSync(file, toml);
      const ledger = new ResourceLedger(loadResourceConfig(file));
      expect(ledger.settings).toEqual({ enabled: true, minBytes: 512, lookbackTurns: 12, tools: { run_tests: { deduplicate: false } } });
      const big = 'x'.repeat(600);
      ledger.process({ turn: 1, tool: 'run_tests', callId: 't', blocks: [res('r', big)] });
      expect(actions(ledger.process({ turn: 2, tool: 'run_tests', callId: 't2', blocks: [res('r', big)] }).decisions)).toEqual(['opted-out']);
      // Opted-out deliveries are recorded; lookback_turns = 12 from the file applies.
      expect(read(ledger, 14, 'r14', res('r', big)).decisions[0]).toMatchObject({ action: 'referenced', original: { callId: 't2', turn: 2 } });
      expect(actions(read(ledger, 15, 'r15', res('r', big)).decisions)).toEqual(['expired']);
      expect(() => loadResourceConfig(join(dir, 'missing.toml'))).toThrow(/ENOENT/);
      writeFileSync(file, '[conversation.deduplication]\nmin_bytes = "300"\n');
      expect(() => loadResourceConfig(file)).toThrow(
        new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: conversation\\.deduplication\\.min_bytes must be an integer, got a string`),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ['[conversation.deduplication]\nmin_bytes = -1', RangeError, /config: conversation\.deduplication\.min_bytes must be a non-negative integer, got -1/],
    ['[conversation.deduplication]\nlookback_turns = 1.5', TypeError, /lookback_turns must be an integer/],
    ['[conversation.deduplication]\nenabled = "yes"', TypeError, /conversation\.deduplication\.enabled must be a boolean/],
    ['[conversation.deduplication]\nminbytes = 3', TypeError, /conversation\.deduplication\.minbytes is not a known setting/],
    ['[tools.run_tests]\ndeduplicate = 0', TypeError, /tools\.run_tests\.deduplicate must be a boolean/],
    ['tools = 3', TypeError, /config: tools must be a table/],
    ['conversation = { deduplication = [1] }', TypeError, /conversation\.deduplication must be a table/],
    ['[conversation\nx = 1', TypeError, /config is not valid TOML/],
  ])('rejects %j', (text, type, message) => {
    expect(() => parseResourceConfig(text)).toThrow(type);
    expect(() => parseResourceConfig(text)).toThrow(message);
  });
});

describe('tool names', () => {
  it('treats any tool name as a plain key, __proto__ included', () => {
    const settings = parseResourceConfig('[tools.__proto__]\ndeduplicate = false\n[tools.constructor]\ndeduplicate = false');
    expect(Object.keys(settings.tools ?? {})).toEqual(['__proto__', 'constructor']);
    const ledger = new ResourceLedger(settings);
    expect(Object.keys(ledger.settings.tools)).toEqual(['__proto__', 'constructor']);
    const r = ledger.process({ turn: 1, tool: '__proto__', callId: 'p', blocks: [res('u', FOO)] });
    expect(actions(r.decisions)).toEqual(['opted-out']);
    expect(actions(ledger.process({ turn: 1, tool: 'toString', callId: 't', blocks: [res('u', FOO)] }).decisions)).toEqual(['referenced']);
    expect(Object.keys(ResourceLedger.fromJSON(JSON.stringify(ledger)).settings.tools)).toEqual(['__proto__', 'constructor']);
  });
});

describe('resources: validation gaps (issue 12)', () => {
  it('a hole in forgetCalls / forgetTurns / json.deliveries is undefined at its index and gets the same error', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'keep', res('file:///foo.rs', FOO));
    expect(() => ledger.forgetCalls(unsafe([, 'keep']))).toThrow(new TypeError('callIds[0] must be a string, got undefined'));
    expect(() => ledger.forgetTurns(unsafe([1, , 2]))).toThrow(new TypeError('turns[1] must be a number, got undefined'));
    // Nothing was forgotten by the failed calls.
    expect(ledger.deliveries()).toHaveLength(1);
    const json = ledger.toJSON();
    const sparse = { ...json, deliveries: unsafe<unknown[]>([, ...json.deliveries]) };
    expect(() => ResourceLedger.fromJSON(sparse)).toThrow(new TypeError('json.deliveries[0] must be an object, got undefined'));
  });

  it('describeLocation checks its argument (kind, turn, callId) with TypeErrors naming the path', () => {
    expect(describeLocation({ kind: 'tool', turn: 3, tool: 't', callId: 'c7' })).toBe('tool call `c7` in turn 3');
    expect(describeLocation({ kind: 'attachment', turn: 2 })).toBe('the attachment at turn 2');
    expect(() => describeLocation(unsafe({}))).toThrow(new TypeError("location.kind must be 'attachment' or 'tool', got undefined"));
    expect(() => describeLocation(unsafe(null))).toThrow(new TypeError('location must be an object, got null'));
    expect(() => describeLocation(unsafe({ kind: 'tool', turn: 3 }))).toThrow(new TypeError('location.callId must be a string, got undefined'));
    expect(() => describeLocation(unsafe({ kind: 'attachment' }))).toThrow(new TypeError('location.turn must be a number, got undefined'));
    expect(() => describeLocation(unsafe({ kind: 'attachment', turn: 1.5 }))).toThrow(RangeError);
  });

  it('restoreResources validates every decision before building anything', () => {
    const ledger = new ResourceLedger();
    read(ledger, 1, 'a', res('file:///foo.rs', FOO));
    const { blocks, decisions } = read(ledger, 2, 'b', { type: 'text', text: 'hi' }, res('file:///foo.rs', FOO));
    expect(restoreResources(blocks, decisions)).toEqual([{ type: 'text', text: 'hi' }, res('file:///foo.rs', FOO)]);
    expect(() => restoreResources(blocks, unsafe([, ...decisions]))).toThrow(new TypeError('decisions[0] must be an object, got undefined'));
    const referenced = decisions[0] as ResourceDecision;
    expect(() => restoreResources(blocks, [{ ...referenced, index: 5 }])).toThrow(/decisions\[0\]\.index must be an integer in \[0, 1\]/);
    expect(() => restoreResources(blocks, [unsafe({ ...referenced, block: undefined })])).toThrow(
      new TypeError('decisions[0].block must be an object, got undefined'),
    );
  });

  it('error messages never fail to build: BigInt, cyclic and null-prototype values are named', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    const json = new ResourceLedger().toJSON();
    expect(() => ResourceLedger.fromJSON({ ...json, format: 10n })).toThrow(new TypeError('json.format must be "ctxdedup/resource-ledger", got 10n'));
    expect(() => ResourceLedger.fromJSON({ ...json, version: cyclic })).toThrow(new RangeError('json.version must be 1, got an object'));
    expect(() => ResourceLedger.fromJSON({ ...json, version: Object.create(null) })).toThrow(new RangeError('json.version must be 1, got {}'));
    const delivery = { uri: 'u', sha256: sha(FOO), bytes: 1, location: { kind: Symbol('k'), turn: 0 } };
    expect(() => ResourceLedger.fromJSON({ ...json, turn: 0, deliveries: [delivery] })).toThrow(
      new TypeError("json.deliveries[0].location.kind must be 'attachment' or 'tool', got Symbol(k)"),
    );
  });

  it('loadResourceConfig names the path when the file cannot be read (a directory, a missing file)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-'));
    try {
      const dirError = thrown(() => loadResourceConfig(dir));
      expect(dirError.message).toBe(`${dir} is a directory, not a TOML file`);
      expect((dirError as NodeJS.ErrnoException).code).toBe('EISDIR');
      const missing = join(dir, 'missing.toml');
      const missingError = thrown(() => loadResourceConfig(missing));
      expect(missingError.message.startsWith(`${missing} cannot be read: ENOENT`)).toBe(true);
      expect((missingError as NodeJS.ErrnoException).code).toBe('ENOENT');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('net positive in o200k_base tokens: a reference never costs more than what it replaces', () => {
  // 2,000 bytes each, but only 17 to 31 o200k tokens: the default reference (~45 tokens) is
  // shorter in bytes, longer in tokens.
  const cheap = ['='.repeat(2000), ' '.repeat(2000), '-'.repeat(1999)];

  it('process: a repeat of cheap-in-tokens content is delivered in full (not-shorter), never a longer reference', () => {
    for (const content of cheap) {
      const ledger = new ResourceLedger();
      ledger.recordAttachment({ uri: 'file:///pad.txt', content, turn: 1 });
      const r = ledger.process({ turn: 2, tool: 'read_file', callId: 'c1', blocks: [res('file:///pad.txt', content)] });
      expect(r.decisions[0]).toMatchObject({ action: 'delivered', reason: 'not-shorter' });
      expect(r.blocks[0]).toEqual(res('file:///pad.txt', content));
      expect(r.stats.tokensSaved).toBe(0);
    }
  });

  it('processToolResult: the same through an MCP result; ordinary files are still referenced', () => {
    const ledger = new ResourceLedger();
    const mk = (text: string) => ({ content: [{ type: 'resource', resource: { uri: 'file:///rule.txt', text } }] });
    ledger.processToolResult(mk('='.repeat(2000)), { turn: 1, tool: 'read', callId: 'c1' });
    const again = ledger.processToolResult(mk('='.repeat(2000)), { turn: 2, tool: 'read', callId: 'c2' });
    expect(again.decisions[0]).toMatchObject({ action: 'delivered', reason: 'not-shorter' });
    expect(again.result).toEqual(mk('='.repeat(2000)));
    ledger.processToolResult(mk(FOO), { turn: 3, tool: 'read', callId: 'c3' });
    const foo = ledger.processToolResult(mk(FOO), { turn: 4, tool: 'read', callId: 'c4' });
    expect(foo.decisions[0]).toMatchObject({ action: 'referenced' });
    const reference = unsafe<{ text: string }>(foo.result.content[0]).text;
    expect(countTokens(reference)).toBeLessThan(countTokens(FOO));
  });

  it('the rule is o200k_base whatever counter the reports use', () => {
    // A counter under which the reference looks shorter does not turn the rule off.
    const ledger = new ResourceLedger({ countTokens: () => 0 });
    ledger.recordAttachment({ uri: 'u', content: ' '.repeat(2000), turn: 1 });
    const r = ledger.process({ turn: 2, tool: 't', callId: 'c', blocks: [res('u', ' '.repeat(2000))] });
    expect(r.decisions[0]).toMatchObject({ action: 'delivered', reason: 'not-shorter' });
    // And content long in o200k tokens is referenced under any counter.
    const chars = new ResourceLedger(byChars);
    chars.recordAttachment({ uri: 'u', content: FOO, turn: 1 });
    expect(chars.process({ turn: 2, tool: 't', callId: 'c', blocks: [res('u', FOO)] }).decisions[0]).toMatchObject({ action: 'referenced' });
  });

  it('a not-shorter repeat is recorded like any delivery', () => {
    const ledger = new ResourceLedger();
    ledger.recordAttachment({ uri: 'u', content: '='.repeat(2000), turn: 1 });
    read(ledger, 2, 'c1', res('u', '='.repeat(2000)));
    expect(ledger.deliveries().map((d) => d.location.kind)).toEqual(['attachment', 'tool']);
  });
});
