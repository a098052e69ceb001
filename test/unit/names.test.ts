/**
 * Naming rules of the public API (issue 13, item 4): one verb (`dedupe…`; `deduplicate` is the
 * Cupel stage's name), one adjective for approximate matches (`near`), one `MemoryStore`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as root from '../../src/index.js';
import * as ingest from '../../src/ingest/index.js';
import * as memory from '../../src/memory/index.js';
import { openStore } from '../../src/ingest/store.js';

const SRC = join(import.meta.dirname, '..', '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('public names', () => {
  it('exported functions use the verb `dedupe` (the Cupel stage keeps `deduplicate`)', () => {
    const names = [...Object.keys(root), ...Object.keys(ingest), ...Object.keys(memory)];
    const verbs = names.filter((n) => /^dedup/i.test(n));
    expect(verbs.length).toBeGreaterThan(5);
    expect(verbs.filter((n) => !n.startsWith('dedupe') && n !== 'deduplicate' && n !== 'deduplicateWithReport')).toEqual([]);
    const methods = Object.getOwnPropertyNames(memory.MemoryDeduplicator.prototype);
    expect(methods).toContain('dedupeAll');
  });

  it('one type is called MemoryStore: the ingestion index has its own in-process store class', async () => {
    const declared = sources(SRC).filter((file) => /^export (interface|class|type) MemoryStore\b/m.test(readFileSync(file, 'utf8')));
    expect(declared.map((f) => f.slice(SRC.length + 1))).toEqual(['memory/store.ts']);
    const store = await openStore('memory');
    expect(store.constructor.name).toBe('InMemoryIngestStore');
    await store.close();
  });

  it('no `fuzzy` in ctxdedup’s own option and result types outside deprecated aliases and ctxdedup/cce', () => {
    for (const file of sources(join(SRC, 'stages')).concat(sources(join(SRC, 'adapters')), sources(join(SRC, 'server')))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/^\s*fuzzy\??: /gm)) {
        const before = text.slice(0, m.index);
        expect(before.slice(before.lastIndexOf('/**')), `${file}: ${m[0]}`).toMatch(/@deprecated/);
      }
      // No `'fuzzy'` literal in a union type (a decision or marker kind).
      expect(text, file).not.toMatch(/'fuzzy'\s*\||\|\s*'fuzzy'/);
    }
  });
});
