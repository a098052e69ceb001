import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryDeduplicator, SqliteMemoryStore, parseMemoryConfig, type BatchReport } from '../../src/memory/index.js';
import { cli, tempDir } from '../support/cli-helpers.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  while (cleanups.length > 0) cleanups.pop()!();
});

/** A SQLite memory store with two near-copies, one reworded pair and one unrelated memory. */
async function seededStore(): Promise<string> {
  const { dir, cleanup } = tempDir('ctxdedup-memcli-');
  cleanups.push(cleanup);
  const path = join(dir, 'memories.db');
  const store = new SqliteMemoryStore(path);
  await new MemoryDeduplicator({ store, enabled: false }).addBatch([
    { id: 'pref-1', content: 'The user prefers dark mode in all editors.', timestamp: Date.UTC(2026, 0, 1) },
    { id: 'pref-2', content: 'the user prefers dark mode in all editors', timestamp: Date.UTC(2026, 0, 2) },
    { id: 'bob-1', content: 'Bob works at Acme Corp as a senior backend engineer.', timestamp: Date.UTC(2026, 0, 3) },
    { id: 'bob-2', content: 'Bob is a senior backend engineer employed by Acme Corp.', timestamp: Date.UTC(2026, 0, 4) },
    { id: 'deploy', content: 'The team deploys to Kubernetes every Friday.', timestamp: Date.UTC(2026, 0, 5) },
  ]);
  await store.close();
  return path;
}

async function ids(path: string): Promise<string[]> {
  const store = new SqliteMemoryStore(path);
  const list = (await store.list()).map((m) => m.id).sort();
  await store.close();
  return list;
}

describe('ctxdedup memories dedupe', () => {
  it('dry run prints clusters and actions and changes nothing', async () => {
    const path = await seededStore();
    const ran = await cli(['memories', 'dedupe', '--store', `sqlite:${path}`, '--dry-run', '--lower', '0.7', '--upper', '0.88']);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain('dry run: nothing changed');
    // Clusters are listed in id order of their members.
    expect(ran.stdout).toMatch(/cluster 1: 2 memories, similarity 0\.7\d+–0\.7\d+, skip → bob-2/);
    expect(ran.stdout).toMatch(/cluster 2: 2 memories, similarity 1\.0000–1\.0000, keep_newest → pref-2\n {4}- pref-1 .*\n {4}\* pref-2/);
    expect(ran.stdout).toContain('5 memories, 2 clusters, would remove 1, 4 remain');
    expect(await ids(path)).toEqual(['bob-1', 'bob-2', 'deploy', 'pref-1', 'pref-2']);
  });

  it('a real run with a merge command merges and keeps the newest; --json reports it', async () => {
    const path = await seededStore();
    const ran = await cli([
      'memories',
      'dedupe',
      '--store',
      `sqlite:${path}`,
      '--lower',
      '0.7',
      '--upper',
      '0.88',
      '--json',
      '--merge-command',
      "grep -c 'oldest to newest' > /dev/null && printf 'Bob is a senior backend engineer at Acme Corp.'",
    ]);
    expect(ran.code).toBe(0);
    const report = JSON.parse(ran.stdout) as BatchReport;
    expect(report.clusters.map((c) => [c.action, c.resultId, c.removedIds])).toEqual([
      ['merge', 'bob-2', ['bob-1']],
      ['keep_newest', 'pref-2', ['pref-1']],
    ]);
    expect(report.clusters[0]!.mergedContent).toBe('Bob is a senior backend engineer at Acme Corp.');
    expect(await ids(path)).toEqual(['bob-2', 'deploy', 'pref-2']);
  });

  it('a failing merge command falls back to keeping the newest, with a warning', async () => {
    const path = await seededStore();
    const ran = await cli(['memories', 'dedupe', '--store', `sqlite:${path}`, '--lower', '0.7', '--upper', '0.88', '--merge-command', 'exit 3']);
    expect(ran.code).toBe(0);
    expect(ran.stderr).toContain('"event":"dedup_fail"');
    expect(ran.stdout).toContain('merge failed (merge), kept newest');
    expect(await ids(path)).toEqual(['bob-2', 'deploy', 'pref-2']);
  });

  it('reads settings from a TOML config; flags override it', async () => {
    const path = await seededStore();
    const { dir, cleanup } = tempDir('ctxdedup-memcfg-');
    cleanups.push(cleanup);
    const config = join(dir, 'ctxdedup.toml');
    writeFileSync(config, `[memory]\nstore = "sqlite:${path}"\nlower_threshold = 0.7\nupper_threshold = 0.88\nlinkage = "complete"\n`);
    const ran = await cli(['memories', 'dedupe', '--config', config, '--dry-run', '--json']);
    expect(ran.code).toBe(0);
    const report = JSON.parse(ran.stdout) as BatchReport;
    expect([report.linkage, report.lowerThreshold, report.clusters.length]).toEqual(['complete', 0.7, 2]);
    const overridden = JSON.parse(
      (await cli(['memories', 'dedupe', '--config', config, '--dry-run', '--json', '--lower', '0.95', '--upper', '0.99'])).stdout,
    ) as BatchReport;
    expect(overridden.clusters.map((c) => c.resultId)).toEqual(['pref-2']);
    expect(overridden.linkage).toBe('complete');
  });

  it('usage errors exit 2 with one line and no stack', async () => {
    const path = await seededStore();
    const cases: [string[], RegExp][] = [
      [['memories', 'dedupe'], /needs --store/],
      [['memories', 'dedupe', '--store', 'postgres://x'], /must be 'sqlite:<path>', 'chroma:<url>' or 'memory'/],
      [['memories', 'dedupe', '--store', `sqlite:${path}`, '--lower', '1.5'], /must be a number in \[0, 1\]/],
      [['memories', 'dedupe', '--store', `sqlite:${path}`, '--lower', '0.99', '--upper', '0.9'], /lowerThreshold must not exceed upperThreshold/],
      [['memories', 'dedupe', '--store', `sqlite:${path}`, '--linkage', 'average'], /Allowed choices are single, complete/],
      [['memories', 'dedupe', '--config', '/nonexistent/ctxdedup.toml'], /cannot read --config/],
    ];
    for (const [args, message] of cases) {
      const ran = await cli(args);
      expect(ran.code, args.join(' ')).toBe(2);
      expect(ran.stderr).toMatch(message);
      expect(ran.stderr).not.toMatch(/\n\s+at /);
    }
  });
});

describe('parseMemoryConfig', () => {
  it('maps keys and rejects typos and bad values by name', () => {
    expect(parseMemoryConfig('[memory]\nupper_threshold = 0.9\nenabled = false\n[memory.embedding]\ndim = 256\n')).toEqual({
      upperThreshold: 0.9,
      enabled: false,
      embedding: { kind: 'hashed', dim: 256 },
    });
    expect(parseMemoryConfig('[other]\nx = 1\n')).toEqual({});
    expect(() => parseMemoryConfig('[memory]\nlower_treshold = 0.9\n', 'f.toml')).toThrow('f.toml: memory.lower_treshold is not a known key');
    expect(() => parseMemoryConfig('[memory]\nlower_threshold = 2\n')).toThrow(RangeError);
    expect(() => parseMemoryConfig('[memory]\nlower_threshold = "0.9"\n')).toThrow(TypeError);
    expect(() => parseMemoryConfig('[memory]\nlower_threshold = 0.9\nupper_threshold = 0.8\n')).toThrow(/must not exceed/);
    expect(() => parseMemoryConfig('[memory.embedding]\nkind = "onnx"\n')).toThrow(RangeError);
    expect(() => parseMemoryConfig('not toml [')).toThrow(/not valid TOML/);
  });
});
