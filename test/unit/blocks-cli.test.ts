/**
 * Block dedup from the CLI (`ctxdedup dedupe --keep earliest --blocks`) and the server
 * (`POST /v1/messages/dedupe` with `options.blocks`): savings reported separately, byte-exact
 * restore, and the option rules as usage errors.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DedupeReport } from '../../src/cli/report.js';
import { dedupeMessages, type Message } from '../../src/index.js';
import { startServer } from '../../src/server/index.js';
import { cli, tempDir } from '../support/cli-helpers.js';

function file(n: number, first = 1): string[] {
  return Array.from({ length: n }, (_, i) => `${String(first + i).padStart(6)}\t  const value${i} = compute(${i}, options); // step ${i}`);
}

/** A session that reads a file, edits it, and reads it again with shifted numbers. */
function session(): object[] {
  const body = file(30).map((l) => l.slice(7));
  const numbered = (lines: string[], first: number): string => lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');
  return [
    { id: 'u1', role: 'user', content: 'Add a header comment to src/app.ts.' },
    { id: 't1', role: 'tool', content: numbered(body, 1) },
    { id: 'a1', role: 'assistant', content: 'Done. Reading it again.' },
    { id: 't2', role: 'tool', content: numbered(['// header', ...body], 1) },
  ];
}

describe('CLI --keep earliest', () => {
  it('tags a duplicate only when the tag is shorter, as dedupeMessages does', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const dashes = '-'.repeat(300);
      const long = file(10).join('\n');
      const messages = [
        { id: 'a', role: 'tool', content: dashes },
        { id: 'b', role: 'tool', content: dashes },
        { id: 'c', role: 'tool', content: long },
        { id: 'd', role: 'tool', content: long },
      ];
      const input = join(dir, 's.json');
      writeFileSync(input, JSON.stringify(messages));
      for (const extra of [[], ['--blocks']]) {
        const r = await cli(['dedupe', input, '--keep', 'earliest', ...extra, '--dry-run', '--json']);
        expect(r.code).toBe(0);
        const report = JSON.parse(r.stdout) as DedupeReport;
        expect(report.exactDuplicates).toBe(1);
        expect(report.exactDuplicates).toBe(dedupeMessages(messages, { keep: 'earliest' }).stats.exactDuplicates);
      }
    } finally {
      cleanup();
    }
  });
});

describe('CLI --blocks', () => {
  it('replaces the repeated run, reports block savings, and restore gives the bytes back', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const input = join(dir, 's.json');
      writeFileSync(input, JSON.stringify(session(), null, 2));
      const out = join(dir, 'out.json');
      const verbatim = join(dir, 'v.jsonl');
      const r = await cli(['dedupe', input, '--keep', 'earliest', '--blocks', '-o', out, '--verbatim', verbatim, '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const report = JSON.parse(r.stdout) as DedupeReport;
      expect(report.blockReferences).toBe(1);
      expect(report.exactDuplicates).toBe(0);
      expect(report.blockCharsSaved).toBeGreaterThan(1000);
      expect(report.charsSaved).toBe(report.blockCharsSaved);
      // Tokens: the stage's own per-run figures, and a block-rewritten message is not a repeated content.
      const stage = dedupeMessages(session() as Message[], { keep: 'earliest', blocks: true });
      expect(stage.stats.blockTokensSaved).toBeGreaterThan(100);
      expect(report.blockTokensSaved).toBe(stage.stats.blockTokensSaved);
      expect(report.tokensSaved).toBe(stage.stats.blockTokensSaved);
      expect(report.topRepeated).toEqual([]);
      const written = JSON.parse(readFileSync(out, 'utf8')) as { content: string }[];
      expect(written[3]?.content).toBe('     1\t// header\n[ctxdedup: 30 lines unchanged, = t1 lines 1–30, numbered 2–31 here]');
      const back = join(dir, 'back.json');
      const rr = await cli(['restore', out, '--verbatim', verbatim, '-o', back]);
      expect(rr.code).toBe(0);
      expect(readFileSync(back)).toEqual(readFileSync(input));
      // Without --blocks, nothing in this session is a whole-message duplicate.
      const plain = await cli(['dedupe', input, '--keep', 'earliest', '--dry-run', '--json']);
      expect((JSON.parse(plain.stdout) as { charsSaved: number }).charsSaved).toBe(0);
    } finally {
      cleanup();
    }
  });

  it('--blocks needs --keep earliest and no --near or --recency-window: usage error, exit 2', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const input = join(dir, 's.json');
      writeFileSync(input, JSON.stringify(session()));
      for (const extra of [[], ['--keep', 'earliest', '--near'], ['--keep', 'earliest', '--recency-window', '2']]) {
        const r = await cli(['dedupe', input, '--blocks', '--dry-run', ...extra]);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/^ctxdedup: --blocks (requires|cannot)/);
      }
    } finally {
      cleanup();
    }
  });
});

describe('server: options.blocks', () => {
  it('POST /v1/messages/dedupe with blocks returns block decisions', async () => {
    const server = await startServer({ port: 0, store: 'memory' });
    try {
      const res = await fetch(`${server.url}/v1/messages/dedupe`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: session(), options: { keep: 'earliest', blocks: { minLines: 4 } } }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { decisions: { kind: string; id: string; duplicateOfId: string }[]; stats: { blockReferences: number } };
      expect(body.decisions.map((d) => [d.kind, d.id, d.duplicateOfId])).toEqual([['block', 't2', 't1']]);
      expect(body.stats.blockReferences).toBe(1);
      const bad = await fetch(`${server.url}/v1/messages/dedupe`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: session(), options: { blocks: true } }),
      });
      expect(bad.status).toBe(400);
    } finally {
      await server.close();
    }
  });
});
