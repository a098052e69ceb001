import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dedupeMcpClient, type DedupedMcpClient, type ToolResultProcessed } from '../../src/adapters/mcp.js';
import { ResourceLedger, type McpToolResult } from '../../src/index.js';
import { thrown, unsafe } from '../support/assertions.js';
import { sourceFile } from '../support/adapters-shared.js';

const SERVER = fileURLToPath(new URL('../support/fixtures/mcp-file-server.mjs', import.meta.url));
const sha = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** 1 KiB that is not valid UTF-8 (0xff bytes, lone continuation bytes). */
const BYTES = new Uint8Array(1024).map((_, i) => (i % 7 === 0 ? 0xff : i % 5 === 0 ? 0x80 : i & 0x7f));

/** The embedded resource in block `k` of a tool result, as the SDK's schema reads it (fails unless it is one). */
function embedded(result: McpToolResult, k: number): { text?: string; blob?: string } {
  const block = CallToolResultSchema.parse(result).content[k];
  if (block?.type !== 'resource') throw new Error(`content[${k}] is not an embedded resource: ${JSON.stringify(block)}`);
  const resource = block.resource;
  return 'text' in resource ? { text: resource.text } : { blob: resource.blob };
}

describe('MCP: dedupeMcpClient with a real stdio server (official SDK on both sides)', () => {
  let dir: string;
  let client: DedupedMcpClient;
  let turn = 0;
  const processed: ToolResultProcessed[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ctxdedup-mcp-'));
    writeFileSync(join(dir, 'a.ts'), sourceFile('alpha'));
    writeFileSync(join(dir, 'logo.bin'), BYTES);
    client = dedupeMcpClient(new Client({ name: 'ctxdedup-test', version: '1.0.0' }), {
      turn: () => turn,
      onResult: (p) => processed.push(p),
    });
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER, dir], stderr: 'ignore' }));
  });

  afterAll(async () => {
    await client?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const read = async (path: string, tool = 'read_file') => {
    turn++;
    const result = (await client.callTool({ name: tool, arguments: { path } })) as McpToolResult;
    // Every result is still a valid CallToolResult.
    expect(CallToolResultSchema.safeParse(result).success).toBe(true);
    return { result, decision: processed[processed.length - 1]?.decisions[0] };
  };

  it('same file twice -> reference; edited -> full; forgotten after compaction -> full; blob -> checksummed as bytes', async () => {
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(['read_file', 'read_bytes']);

    const first = await read('a.ts');
    expect(first.decision).toMatchObject({ action: 'delivered', reason: 'new', index: 1 });
    expect(embedded(first.result, 1).text).toBe(sourceFile('alpha'));

    const second = await read('a.ts');
    expect(second.decision).toMatchObject({ action: 'referenced', index: 1, original: { kind: 'tool', turn: 1, tool: 'read_file', callId: 'read_file#1' } });
    const reference = second.result.content[1] as { type: string; text: string };
    expect(reference.type).toBe('text');
    expect(reference.text).toContain('tool call `read_file#1` in turn 1');
    // The other blocks and fields pass through untouched.
    expect(second.result.content[0]).toEqual(first.result.content[0]);
    expect(second.result.content[2]).toEqual(first.result.content[2]);
    expect(second.result.content[3]).toEqual(first.result.content[3]);
    expect(second.result['structuredContent']).toEqual(first.result['structuredContent']);
    expect(processed[1]?.stats).toMatchObject({ blocks: 4, resourceBlocks: 1, matched: 1, unknown: 0 });

    writeFileSync(join(dir, 'a.ts'), sourceFile('alpha').replace('line 7 of', 'line seven of'));
    const edited = await read('a.ts');
    expect(edited.decision).toMatchObject({ action: 'delivered', reason: 'changed' });
    expect(embedded(edited.result, 1).text).toContain('line seven of');

    const again = await read('a.ts');
    expect(again.decision).toMatchObject({ action: 'referenced', original: { turn: 3 } });

    // The context was compacted: turns 3 and 4 are gone, so the content is delivered again.
    expect(client.ledger.forgetTurns([3, 4])).toBe(1);
    const afterCompaction = await read('a.ts');
    expect(afterCompaction.decision).toMatchObject({ action: 'delivered' });
    expect(embedded(afterCompaction.result, 1).text).toContain('line seven of');

    const blob = await read('logo.bin', 'read_bytes');
    expect(blob.decision).toMatchObject({ action: 'delivered', reason: 'new', bytes: BYTES.length, sha256: sha(BYTES) });
    expect(embedded(blob.result, 1).blob).toBe(Buffer.from(BYTES).toString('base64'));
    const blobAgain = await read('logo.bin', 'read_bytes');
    expect(blobAgain.decision).toMatchObject({ action: 'referenced', sha256: sha(BYTES), bytes: BYTES.length });
  });

  it('keeps every other client method working on the client itself', async () => {
    expect(client.getServerVersion()?.name).toBe('ctxdedup-test-files');
    expect(client.ledger).toBeInstanceOf(ResourceLedger);
  });
});

describe('ResourceLedger.processToolResult', () => {
  const text = sourceFile('gamma');
  const result = (content: unknown[]): McpToolResult => unsafe<McpToolResult>({ content, isError: false });
  const call = (turn: number, callId: string) => ({ turn, tool: 'read', callId });

  it('matches text and blob resources, passes the rest through and counts unknown blocks', () => {
    const ledger = new ResourceLedger();
    const blob = Buffer.from(BYTES).toString('base64');
    const blocks = [
      { type: 'resource', resource: { uri: 'file:///g.ts', text } },
      { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
      { type: 'resource', resource: { uri: 'file:///logo.bin', blob, mimeType: 'application/octet-stream' } },
      { type: 'hologram', beam: 1 },
    ];
    const first = ledger.processToolResult(result(blocks), call(1, 'c1'));
    expect(first.result.content).toEqual(blocks);
    expect(first.stats).toMatchObject({ blocks: 4, resourceBlocks: 2, matched: 0, unknown: 1 });
    expect(first.decisions.map((d) => [d.index, d.action])).toEqual([
      [0, 'delivered'],
      [2, 'delivered'],
    ]);
    expect(first.decisions[1]).toMatchObject({ sha256: sha(BYTES), bytes: BYTES.length });
    const second = ledger.processToolResult(result(blocks), call(2, 'c2'));
    expect(second.result['isError']).toBe(false);
    expect(second.result.content[1]).toBe(blocks[1]);
    expect(second.result.content[3]).toBe(blocks[3]);
    expect(second.result.content[0]).toMatchObject({ type: 'text' });
    expect(second.result.content[2]).toMatchObject({ type: 'text' });
    expect(second.stats).toMatchObject({ matched: 2, unknown: 1 });
    // The input result is not mutated.
    expect(blocks[0]).toEqual({ type: 'resource', resource: { uri: 'file:///g.ts', text } });
  });

  it('a blob whose bytes are valid UTF-8 is still checksummed as bytes, never as its base64 text', () => {
    const ledger = new ResourceLedger();
    const blob = Buffer.from(text, 'utf8').toString('base64');
    const d = ledger.processToolResult(result([{ type: 'resource', resource: { uri: 'u', blob } }]), call(1, 'c')).decisions[0];
    expect(d).toMatchObject({ sha256: sha(Buffer.from(text, 'utf8')), bytes: Buffer.byteLength(text) });
  });

  it('names the path of bad input and leaves the ledger unchanged', () => {
    const ledger = new ResourceLedger();
    const bad = (content: unknown[], info: unknown = call(1, 'c')): Error =>
      thrown(() => ledger.processToolResult(result(content), unsafe<{ turn: number; tool: string; callId: string }>(info)));
    const ok = { type: 'resource', resource: { uri: 'file:///g.ts', text } };
    expect(bad([ok, { type: 'resource', resource: { text } }]).message).toMatch(/^result\.content\[1\]\.resource\.uri must be a string/);
    expect(bad([ok, { type: 'resource', resource: { uri: 'x', blob: 'not base64!' } }]).message).toMatch(
      /^result\.content\[1\]\.resource\.blob must be base64/,
    );
    expect(bad([ok, { type: 'resource', resource: { uri: 'x' } }]).message).toMatch(
      /^result\.content\[1\]\.resource must have a string `text` or a base64 string `blob`/,
    );
    expect(bad([ok, { type: 9 }]).message).toMatch(/^result\.content\[1\]\.type must be a string/);
    expect(bad([ok, null]).message).toMatch(/^result\.content\[1\] must be an object/);
    expect(bad([ok], { turn: 1, tool: 'read' }).message).toMatch(/^call\.callId must be a string/);
    expect(bad([ok], { turn: -1, tool: 'read', callId: 'c' })).toBeInstanceOf(RangeError);
    expect(thrown(() => ledger.processToolResult(unsafe<McpToolResult>({ content: 'x' }), call(1, 'c'))).message).toMatch(/^result\.content must be an array/);
    expect(ledger.deliveries()).toEqual([]);
    expect(ledger.turn).toBeNull();
  });

  it('dedupeMcpClient rejects what is not a client', () => {
    expect(thrown(() => dedupeMcpClient(unsafe<Client>({})))).toBeInstanceOf(TypeError);
    expect(thrown(() => dedupeMcpClient(new Client({ name: 'x', version: '1' }), unsafe({ ledger: {} }))).message).toMatch(
      /^options\.ledger must be a ResourceLedger/,
    );
  });
});
