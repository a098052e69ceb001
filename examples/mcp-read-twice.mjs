#!/usr/bin/env node
// An MCP client reading the same file twice through a local stdio server (the one the tests use,
// written with the official SDK's server API): the second result comes back as a reference.
// Usage: npm run build:ts && node examples/mcp-read-twice.mjs   (needs @modelcontextprotocol/sdk)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { dedupeMcpClient } from '../dist/adapters/mcp.js';

const server = fileURLToPath(new URL('../test/support/fixtures/mcp-file-server.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-example-'));
writeFileSync(join(dir, 'notes.md'), Array.from({ length: 40 }, (_, i) => `- note ${i}: remember to check the cache key of step ${i}`).join('\n'));

let turn = 0;
const client = dedupeMcpClient(new Client({ name: 'example', version: '1.0.0' }), {
  turn: () => turn,
  onResult: ({ decisions, report }, call) =>
    console.log(
      `turn ${call.turn} ${call.callId}: ${decisions.map((d) => d.action + (d.reason ? ` (${d.reason})` : '')).join(', ')}; ${report.bytesBefore} -> ${report.bytesAfter} bytes`,
    ),
});
await client.connect(new StdioClientTransport({ command: process.execPath, args: [server, dir], stderr: 'ignore' }));
try {
  for (turn = 1; turn <= 2; turn++) {
    const result = await client.callTool({ name: 'read_file', arguments: { path: 'notes.md' } });
    const block = result.content[1];
    console.log(`  the model sees: ${block.type === 'resource' ? `${block.resource.uri} (${block.resource.text.length} chars)` : block.text}`);
  }
} finally {
  await client.close();
  rmSync(dir, { recursive: true, force: true });
}
