import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  dedupeMcpClient,
  ResourceLedger,
  restoreToolResult,
  type DedupeMcpClientOptions,
  type McpToolResult,
  type ToolResultProcessed,
} from '../../src/adapters/mcp.js';
import { restoreResources } from '../../src/index.js';
import { thrown, unsafe } from '../support/assertions.js';

const FILE = Array.from({ length: 40 }, (_, i) => `export const v${i} = compute(${i}); // padding`).join('\n');
/** 1 KiB that is not valid UTF-8. */
const BYTES = new Uint8Array(1024).map((_, i) => (i % 7 === 0 ? 0xff : i % 5 === 0 ? 0x80 : i & 0x7f));

type Results = Record<string, () => McpToolResult>;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
});

/** A real MCP server (official SDK) whose `read` tool returns `results[key]()`, and a client over an in-memory transport. */
async function connect(results: Results, wrap: false): Promise<Client>;
async function connect(results: Results, wrap: true, options?: DedupeMcpClientOptions): Promise<ReturnType<typeof dedupeMcpClient<Client>>>;
async function connect(results: Results, wrap: boolean, options?: DedupeMcpClientOptions): Promise<Client> {
  const server = new McpServer({ name: 's', version: '1.0.0' });
  server.registerTool('read', { inputSchema: { key: z.string() } }, async ({ key }) => unsafe((results[key] as () => McpToolResult)()));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const base = new Client({ name: 'c', version: '1.0.0' });
  const client = wrap ? dedupeMcpClient(base, options) : base;
  await client.connect(clientSide);
  open.push(client, server);
  return client;
}

const read = async (client: Client, key: string) => (await client.callTool({ name: 'read', arguments: { key } })) as McpToolResult;

describe('dedupeMcpClient: results the SDK accepts never make callTool throw', () => {
  const mime = Buffer.from(FILE).toString('base64').replace(/.{76}/g, '$&\n');
  const results: Results = {
    // MIME-style base64, line-wrapped at 76 (Python's base64.encodebytes).
    mime: () => ({ content: [{ type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/octet-stream', blob: mime } }] }),
    // A lone surrogate survives JSON-RPC (escaped as \ud800).
    lone: () => ({
      content: [
        { type: 'text', text: 'here' },
        { type: 'resource', resource: { uri: 'file:///c.txt', text: `${FILE}\uD800` } },
      ],
    }),
  };

  for (const key of Object.keys(results)) {
    it(`${key}: delivered untouched, reported as passed through (reason unsupported), every time`, async () => {
      const plain = await connect(results, false);
      const processed: ToolResultProcessed[] = [];
      const client = await connect(results, true, { onResult: (p) => processed.push(p) });
      const expected = await read(plain, key);
      for (let n = 0; n < 2; n++) {
        const got = await read(client, key);
        expect(got).toEqual(expected);
        const index = key === 'mime' ? 0 : 1;
        expect(processed[n]?.decisions).toEqual([{ action: 'delivered', index, uri: expect.any(String), bytes: expect.any(Number), reason: 'unsupported' }]);
        expect(processed[n]?.stats).toMatchObject({ resourceBlocks: 1, matched: 0, delivered: 1 });
      }
      expect(client.ledger.deliveries()).toEqual([]);
    });
  }

  it('processToolResult passes them through among resources it does read', () => {
    const ledger = new ResourceLedger();
    const mk = (): McpToolResult => ({
      content: [
        { type: 'resource', resource: { uri: 'file:///a.ts', text: FILE } },
        { type: 'resource', resource: { uri: 'file:///b.bin', blob: mime } },
        { type: 'resource', resource: { uri: 'file:///c.txt', text: `${FILE}\uDC00` } },
      ],
    });
    ledger.processToolResult(mk(), { turn: 1, tool: 'read', callId: 'c1' });
    const { result, decisions } = ledger.processToolResult(mk(), { turn: 2, tool: 'read', callId: 'c2' });
    expect(decisions.map((d) => [d.index, d.action, d.action === 'delivered' ? d.reason : 'ref'])).toEqual([
      [0, 'referenced', 'ref'],
      [1, 'delivered', 'unsupported'],
      [2, 'delivered', 'unsupported'],
    ]);
    expect(result.content.slice(1)).toEqual(mk().content.slice(1));
  });
});

describe('dedupeMcpClient: a throwing onResult records nothing', () => {
  it('the ledger is rolled back, so the next read delivers the content in full', async () => {
    const results: Results = { a: () => ({ content: [{ type: 'resource', resource: { uri: 'file:///a.ts', text: FILE } }] }) };
    let calls = 0;
    const client = await connect(results, true, {
      turn: () => 3,
      onResult: () => {
        if (calls++ === 0) throw new Error('logging sink down');
      },
    });
    await expect(read(client, 'a')).rejects.toThrow('logging sink down');
    expect(client.ledger.deliveries()).toEqual([]);
    expect(client.ledger.totals).toEqual({ responses: 0, resourceBlocks: 0, matched: 0, bytesSaved: 0, tokensSaved: 0 });
    expect(client.ledger.turn).toBeNull();
    const second = await read(client, 'a');
    expect(second.content[0]).toMatchObject({ type: 'resource', resource: { text: FILE } });
    const third = await read(client, 'a');
    expect(third.content[0]).toMatchObject({ type: 'text' });
    expect(unsafe<{ text: string }>(third.content[0]).text).toContain('tool call `read#2` in turn 3');
  });

  it('a rollback keeps what was recorded before', async () => {
    const results: Results = {
      a: () => ({ content: [{ type: 'resource', resource: { uri: 'file:///a.ts', text: FILE } }] }),
      b: () => ({
        content: [
          { type: 'resource', resource: { uri: 'file:///a.ts', text: FILE } },
          { type: 'resource', resource: { uri: 'file:///b.ts', text: `${FILE}\n// b` } },
        ],
      }),
    };
    let fail = false;
    let turn = 1;
    const client = await connect(results, true, {
      turn: () => turn,
      onResult: () => {
        if (fail) throw new Error('no');
      },
    });
    await read(client, 'a');
    const before = client.ledger.toJSON();
    fail = true;
    turn = 2;
    await expect(read(client, 'b')).rejects.toThrow('no');
    expect(client.ledger.toJSON()).toEqual(before);
  });
});

describe('dedupeMcpClient: an async onResult', () => {
  const results: Results = { a: () => ({ content: [{ type: 'resource', resource: { uri: 'file:///a.ts', text: FILE } }] }) };

  it('is awaited: a rejection rejects callTool and rolls the ledger back, without an unhandled rejection', async () => {
    let calls = 0;
    const client = await connect(results, true, {
      turn: () => 1,
      onResult: async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (calls++ === 0) throw new Error('async sink down');
      },
    });
    await expect(read(client, 'a')).rejects.toThrow('async sink down');
    expect(client.ledger.deliveries()).toEqual([]);
    // Delivered in full again: nothing of the failed call was recorded.
    expect((await read(client, 'a')).content[0]).toMatchObject({ type: 'resource', resource: { text: FILE } });
  });

  it('results wait for a pending onResult, so none refers to a result that is then taken back', async () => {
    let release: () => void = () => {};
    let first = true;
    const client = await connect(results, true, {
      turn: () => 1,
      onResult: () => {
        if (!first) return undefined;
        first = false;
        return new Promise<void>((_, reject) => {
          release = () => reject(new Error('rolled back'));
        });
      },
    });
    const one = read(client, 'a');
    const two = read(client, 'a');
    await new Promise((resolve) => setTimeout(resolve, 20));
    release();
    await expect(one).rejects.toThrow('rolled back');
    // The second result was processed after the first was taken back: delivered in full.
    expect((await two).content[0]).toMatchObject({ type: 'resource', resource: { text: FILE } });
  });
});

describe('ResourceLedger: MCP resources for the user only', () => {
  it('a resource annotated for the user alone is neither recorded nor replaced', async () => {
    const forUser = { type: 'resource', resource: { uri: 'file:///a.ts', text: FILE }, annotations: { audience: ['user'] } };
    const forModel = { type: 'resource', resource: { uri: 'file:///a.ts', text: FILE }, annotations: { audience: ['user', 'assistant'] } };
    const results: Results = { user: () => ({ content: [forUser] }), model: () => ({ content: [forModel] }) };
    const client = await connect(results, true, { turn: () => 1 });
    expect((await read(client, 'user')).content[0]).toMatchObject(forUser);
    expect(client.ledger.deliveries()).toEqual([]);
    // The model never saw the user's copy: this one is delivered in full, then a repeat is a reference.
    expect((await read(client, 'model')).content[0]).toMatchObject(forModel);
    expect((await read(client, 'model')).content[0]).toMatchObject({ type: 'text' });
    // A user-only copy after that passes through untouched too.
    expect((await read(client, 'user')).content[0]).toMatchObject(forUser);
  });
});

describe('restoreToolResult: MCP replacements undone exactly', () => {
  const blob = Buffer.from(BYTES).toString('base64');
  const mk = (): McpToolResult => ({
    content: [
      { type: 'text', text: 'two files' },
      {
        type: 'resource',
        resource: { uri: 'file:///a.ts', mimeType: 'text/plain', text: FILE, _meta: { etag: 'x' } },
        annotations: { audience: ['assistant'], priority: 0.5 },
        _meta: { m: 1 },
      },
      { type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/octet-stream', blob } },
    ],
    structuredContent: { n: 2 },
    isError: false,
  });

  it('ledger.processToolResult: decisions carry the original MCP blocks; the result round-trips', () => {
    const ledger = new ResourceLedger();
    ledger.processToolResult(mk(), { turn: 1, tool: 'read', callId: 'c1' });
    const original = mk();
    const { result, decisions } = ledger.processToolResult(original, { turn: 2, tool: 'read', callId: 'c2' });
    expect(decisions.map((d) => d.action)).toEqual(['referenced', 'referenced']);
    expect(result).not.toEqual(original);
    const restored = restoreToolResult(result, decisions);
    expect(isDeepStrictEqual(restored, mk())).toBe(true);
    expect(decisions[0]?.action === 'referenced' && decisions[0].mcpBlock).toEqual(mk().content[1]);
    // restoreResources over the content does the same.
    expect(restoreResources(unsafe(result.content), decisions)).toEqual(mk().content);
    // Decisions are JSON data: a blob's base64 string, not bytes.
    expect(restoreToolResult(result, JSON.parse(JSON.stringify(decisions)))).toEqual(mk());
  });

  it('through dedupeMcpClient with a real server: restored equals what a plain Client gets', async () => {
    const results: Results = { a: mk };
    const plain = await connect(results, false);
    const processed: ToolResultProcessed[] = [];
    const client = await connect(results, true, { onResult: (p) => processed.push(p) });
    const expected = await read(plain, 'a');
    await read(client, 'a');
    const second = await read(client, 'a');
    expect(CallToolResultSchema.safeParse(second).success).toBe(true);
    expect(processed[1]?.stats.matched).toBe(2);
    expect(restoreToolResult(second, processed[1]?.decisions ?? [])).toEqual(expected);
  });

  it('names the path of a malformed decision', () => {
    const result = { content: [{ type: 'text', text: 'x' }] };
    expect(thrown(() => restoreToolResult(result, [unsafe({ action: 'referenced', index: 0 })])).message).toBe(
      'decisions[0].mcpBlock must be an object, got undefined',
    );
    expect(thrown(() => restoreToolResult(result, [unsafe({ action: 'referenced', index: 3, mcpBlock: {} })]))).toBeInstanceOf(RangeError);
  });
});
