/**
 * The shipped conformance vectors (conformance/, schema in conformance/FORMAT.md), the
 * `ctxdedup/conformance` runner, and the `ctxdedup conformance` / `ctxdedup doctor` commands.
 *
 * ctxdedup passes every vector; deliberately wrong implementations each fail a vector that pins
 * the rule they break, and the failure names the vector and shows a readable diff.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSuites, renderValue, runConformance, type ConformanceImpl, type ConformanceReport } from '../../src/conformance/index.js';
import { dedupeMessages, ResourceLedger, type ResourceLedgerOptions, type ScoredItem } from '../../src/index.js';
import { deduplicateVia, deduplicateWithReportVia } from '../../src/stages/deduplicate.js';
import { cli, tempDir } from '../support/cli-helpers.js';
import { ensureBuilt } from '../support/build.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'dist', 'cli', 'main.js');

function failing(report: ConformanceReport): string[] {
  return report.vectors.filter((v) => v.status === 'fail').map((v) => `${v.suite}/${v.id}`);
}

/** Best score per content, keyed by `key(content)`: the survivor rule with a wrong identity. */
function scoredWith(key: (content: string) => string) {
  return (scored: ScoredItem[]): ScoredItem[] => {
    const best = new Map<string, number>();
    scored.forEach((s, i) => {
      const k = key(s.item.content);
      const current = best.get(k);
      if (current === undefined || s.score > (scored[current] as ScoredItem).score) best.set(k, i);
    });
    return scored.filter((s, i) => best.get(key(s.item.content)) === i);
  };
}

describe('the vectors', () => {
  it('every suite in the manifest has vectors with an id, a description, a rule and a known call', () => {
    const suites = listSuites();
    expect(suites.map((s) => s.name)).toEqual(['scored', 'messages', 'blocks', 'resources', 'findings', 'sources']);
    for (const suite of suites) {
      const data = JSON.parse(readFileSync(join(ROOT, 'conformance', suite.file), 'utf8')) as { suite: string; vectors: Record<string, unknown>[] };
      expect(data.suite).toBe(suite.name);
      expect(data.vectors.length).toBeGreaterThan(5);
      for (const v of data.vectors) {
        for (const key of ['id', 'description', 'rule', 'call']) expect(typeof v[key], `${suite.name}/${String(v['id'])}.${key}`).toBe('string');
        expect(v['expected'], `${suite.name}/${String(v['id'])}`).toBeTypeOf('object');
      }
    }
  });

  it('are ASCII files (every other character written as a \\u escape, lone surrogates included)', () => {
    for (const file of readdirSync(join(ROOT, 'conformance')).filter((f) => f.endsWith('.json'))) {
      const bytes = readFileSync(join(ROOT, 'conformance', file));
      expect(
        bytes.every((b) => b < 0x80),
        file,
      ).toBe(true);
    }
  });

  it('ship with the package: listed in "files" and exported as ctxdedup/conformance', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[]; exports: Record<string, { import: string }> };
    expect(pkg.files).toContain('conformance');
    expect(pkg.exports['./conformance']?.import).toBe('./dist/conformance/index.js');
    expect(existsSync(join(ROOT, 'conformance', 'FORMAT.md'))).toBe(true);
  });
});

describe('runConformance against ctxdedup', () => {
  it('passes every vector of every suite, none skipped', async () => {
    const report = await runConformance();
    expect(failing(report)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.totals.skipped).toBe(0);
    expect(report.missing).toEqual([]);
    for (const suite of report.suites) expect(suite.passed, suite.name).toBeGreaterThan(5);
  });

  it('passes the scored suite on both paths (the small vectors take the fast path under auto)', async () => {
    for (const engine of ['native', 'auto'] as const) {
      const impl: ConformanceImpl = {
        deduplicate: (scored, options) => deduplicateVia(engine, scored as ScoredItem[], options),
        deduplicateWithReport: (scored, options) => deduplicateWithReportVia(engine, scored as ScoredItem[], options),
      };
      const report = await runConformance({ suites: ['scored'], impl });
      expect(failing(report), engine).toEqual([]);
      expect(report.totals.passed, engine).toBeGreaterThan(20);
    }
  });

  it('runs only the smoke subset when asked', async () => {
    const all = await runConformance();
    const smoke = await runConformance({ smoke: true });
    expect(smoke.ok).toBe(true);
    expect(smoke.totals.passed).toBeGreaterThan(20);
    expect(smoke.totals.passed).toBeLessThan(all.totals.passed);
  });

  it('takes the implementation as a module path, using its default export when it has no named functions', async () => {
    const tmp = tempDir('ctxdedup-impl-');
    try {
      const named = join(tmp.dir, 'named.mjs');
      writeFileSync(named, 'export const canonicalizeUrl = (url) => url;\n');
      const report = await runConformance({ suites: ['sources'], impl: named });
      expect(report.provided).toEqual(['canonicalizeUrl']);
      expect(report.missing).toEqual(['dedupeSources']);
      expect(failing(report)).toContain('sources/canonical-example');
      expect(report.vectors.find((v) => v.id === 'canonical-not-a-url')?.status).toBe('pass');
      const viaDefault = join(tmp.dir, 'default.mjs');
      writeFileSync(viaDefault, 'export default { canonicalizeUrl: (url) => url };\n');
      expect((await runConformance({ suites: ['sources'], impl: viaDefault })).provided).toEqual(['canonicalizeUrl']);
    } finally {
      tmp.cleanup();
    }
  });

  it('rejects an unknown suite naming it, before running anything', async () => {
    await expect(runConformance({ suites: ['scored', 'nope'] })).rejects.toThrow(RangeError);
    await expect(runConformance({ suites: ['scored', 'nope'] })).rejects.toThrow(/options\.suites\[1\]/);
  });
});

describe('deliberately wrong implementations fail a vector that names the rule', () => {
  it('keeping the last copy instead of the best score', async () => {
    const keepLast = (scored: ScoredItem[]): ScoredItem[] => {
      const last = new Map<string, number>();
      scored.forEach((s, i) => last.set(s.item.content, i));
      return scored.filter((s, i) => last.get(s.item.content) === i);
    };
    const report = await runConformance({ impl: { deduplicate: keepLast } });
    expect(report.ok).toBe(false);
    expect(failing(report)).toContain('scored/best-score-first-copy');
    const v = report.vectors.find((r) => r.id === 'best-score-first-copy');
    expect(v?.diff).toBe('kept[0]: expected 0, got 1\nkept[1]: expected 1, got 2');
    // Only what the implementation provides is checked; the rest is skipped, not failed.
    expect(report.missing).toContain('dedupeMessages');
    expect(report.vectors.filter((r) => r.call !== 'deduplicate').every((r) => r.status === 'skip')).toBe(true);
  });

  it('comparing case-insensitively', async () => {
    const report = await runConformance({ suites: ['scored'], impl: { deduplicate: scoredWith((c) => c.toLowerCase()) } });
    expect(failing(report)).toContain('scored/case-sensitive');
    expect(report.vectors.find((r) => r.id === 'case-sensitive')?.diff).toMatch(/^kept: expected 3 entries, got 1/);
  });

  it('trimming before hashing', async () => {
    const report = await runConformance({ suites: ['scored'], impl: { deduplicate: scoredWith((c) => c.trim()) } });
    expect(failing(report)).toEqual(expect.arrayContaining(['scored/whitespace-significant', 'scored/bom-significant', 'scored/line-endings']));
  });

  it('a resource lookback off by one', async () => {
    class OffByOne extends ResourceLedger {
      constructor(options?: ResourceLedgerOptions) {
        // `turn - t < lookbackTurns` instead of `<=`.
        super({ ...options, lookbackTurns: (options?.lookbackTurns ?? 30) - 1 });
      }
    }
    const report = await runConformance({ suites: ['resources'], impl: { ResourceLedger: OffByOne } });
    expect(failing(report)).toEqual(expect.arrayContaining(['resources/lookback-inclusive', 'resources/lookback-default-30']));
    expect(report.vectors.find((r) => r.id === 'lookback-inclusive')?.diff).toContain('steps[1].decisions[0].action: expected "referenced", got "delivered"');
  });

  it('a recency window that protects one message too many', async () => {
    const impl: ConformanceImpl = {
      dedupeMessages: (messages, options) => {
        const window = options?.['recencyWindow'];
        return dedupeMessages(messages as never, typeof window === 'number' && window > 0 ? { ...options, recencyWindow: window + 1 } : options);
      },
    };
    const report = await runConformance({ suites: ['messages'], impl });
    expect(failing(report)).toContain('messages/recency-window-earliest-edge');
  });

  it("a findings key with Rust's whitespace (trims U+0085, keeps U+FEFF)", async () => {
    // Rust's char::is_whitespace (Unicode White_Space): U+0085 is in, U+FEFF is not.
    const rustWhitespace = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
    const rustKey = (p: string): string =>
      p
        .toLowerCase()
        .split(rustWhitespace)
        .filter((w) => w !== '')
        .join(' ');
    const report = await runConformance({ suites: ['findings'], impl: { findingKey: rustKey } });
    expect(failing(report)).toEqual(expect.arrayContaining(['findings/key-feff-is-whitespace', 'findings/key-nel-not-whitespace']));
    // The same implementation is right where JavaScript and Rust agree.
    expect(report.vectors.find((r) => r.id === 'key-collapse-lowercase')?.status).toBe('pass');
  });

  it('an implementation that throws where a result is expected fails with the error, not a crash', async () => {
    const report = await runConformance({
      suites: ['scored'],
      impl: {
        deduplicate: () => {
          throw new Error('boom');
        },
      },
    });
    expect(report.vectors.find((r) => r.id === 'empty')?.diff).toBe('threw Error: boom');
    // A ledger step that throws is named.
    class Throwing extends ResourceLedger {
      override process(): never {
        throw new RangeError('boom');
      }
    }
    const ledger = await runConformance({ suites: ['resources'], impl: { ResourceLedger: Throwing } });
    expect(ledger.vectors.find((r) => r.id === 'tool-then-tool')?.diff).toBe('threw Error: steps[0] (process) threw RangeError: boom');
    // And one that returns where an error is expected says what it returned.
    const lax = await runConformance({ suites: ['scored'], impl: { deduplicate: (s: unknown[]) => s.slice() } });
    expect(lax.vectors.find((r) => r.id === 'error-nan-score')?.diff).toMatch(
      /^expected \{type: "RangeError", path: "scored\[1\]\.score"\} to be thrown, but it returned/,
    );
  });
});

describe('diffs', () => {
  it('show strings unambiguously: invisible and lone code units escaped, long runs counted', () => {
    expect(renderValue('a\ud800')).toBe('"a\\ud800"');
    expect(renderValue('\ufeffdoc\r\n')).toBe('"\\ufeffdoc\\r\\n"');
    expect(renderValue(`${'c'.repeat(250)}\udc00`)).toBe('"c"×250 + "\\udc00"');
    expect(renderValue(-0)).toBe('-0');
    expect(renderValue(new Uint8Array([0xff, 0x00]))).toBe('<bytes ff00>');
  });
});

describe('ctxdedup conformance (CLI)', () => {
  let tmp: { dir: string; cleanup: () => void };
  beforeAll(() => {
    tmp = tempDir('ctxdedup-conformance-');
  });
  afterAll(() => tmp.cleanup());

  it('passes against ctxdedup with a table per suite, exit 0', async () => {
    const r = await cli(['conformance']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}scored +\d+ +0 +0 {2}ok$/m);
    expect(r.stdout).toMatch(/^ {2}resources +\d+ +0 +0 {2}ok$/m);
    expect(r.stdout).toMatch(/\d+ passed, 0 failed, 0 skipped/);
  });

  it('--impl with a wrong implementation exits 1 and names the failing vector', async () => {
    const impl = join(tmp.dir, 'keep-last.mjs');
    writeFileSync(
      impl,
      'export function deduplicate(scored) {\n' +
        '  const last = new Map();\n' +
        '  scored.forEach((s, i) => last.set(s.item.content, i));\n' +
        '  return scored.filter((s, i) => last.get(s.item.content) === i);\n' +
        '}\n',
    );
    const r = await cli(['conformance', '--impl', impl]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAIL scored/best-score-first-copy (deduplicate)');
    expect(r.stdout).toContain('kept[0]: expected 0, got 1');
    expect(r.stdout).toMatch(/^ {2}messages +0 +0 +\d+ {2}skip$/m);
    const json = await cli(['conformance', '--impl', impl, '--suite', 'scored', '--json']);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as ConformanceReport;
    expect(report.suites.map((s) => s.name)).toEqual(['scored']);
    expect(failing(report)).toContain('scored/best-score-first-copy');
  });

  it('--suite selects suites (comma-separated or repeated)', async () => {
    const r = await cli(['conformance', '--suite', 'findings,sources', '--suite', 'scored', '--json']);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as ConformanceReport).suites.map((s) => s.name)).toEqual(['findings', 'sources', 'scored']);
  });

  it('usage errors exit 2: unknown suite, missing module, module with none of the functions', async () => {
    const unknown = await cli(['conformance', '--suite', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown suite "nope"');
    // An empty list is said as such (it used to blame an --impl that was not given).
    const nothing = await cli(['conformance', '--suite', '']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('--suite names no suite (suites: ');
    const missing = await cli(['conformance', '--impl', join(tmp.dir, 'absent.mjs')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot load --impl');
    const empty = join(tmp.dir, 'empty.mjs');
    writeFileSync(empty, 'export const nothing = 1;\n');
    const none = await cli(['conformance', '--impl', empty]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('exports none of the functions');
  });
});

describe('ctxdedup doctor', () => {
  it('reports platform, addon file, versions and a passing self-check', async () => {
    const r = await cli(['doctor']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`platform   ${process.platform} ${process.arch}`);
    expect(r.stdout).toMatch(/addon {6}\/.*ctxdedup\.[\w-]+\.node\n {13}loaded as (package build|platform package|CTXDEDUP_NATIVE_PATH)/);
    expect(r.stdout).toContain('findings normalization v1, resource ledger ctxdedup/resource-ledger v1, vectors ctxdedup/conformance v1');
    expect(r.stdout).toMatch(/self-check (\d+)\/\1 smoke vectors passed/);
    expect(r.stdout).toMatch(/^ok: /m);
    const json = await cli(['doctor', '--json']);
    const report = JSON.parse(json.stdout) as { ok: boolean; addon: { loaded: boolean; file: string }; selfCheck: { failed: number } };
    expect(report.ok).toBe(true);
    expect(report.addon.loaded).toBe(true);
    expect(existsSync(report.addon.file)).toBe(true);
    expect(report.selfCheck.failed).toBe(0);
  });

  describe('the built binary', () => {
    let tmp: { dir: string; cleanup: () => void };
    beforeAll(() => {
      ensureBuilt(BIN);
      tmp = tempDir('ctxdedup-doctor-');
    }, 120_000);
    afterAll(() => tmp.cleanup());

    it('works on the installed package', () => {
      const r = spawnSync(process.execPath, [BIN, 'doctor'], { cwd: tmp.dir, encoding: 'utf8' });
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/^ok: /m);
    });

    it('gives one clear answer when the native addon is missing (exit 1, what was tried)', () => {
      // A copy of the package without npm/<platform>/: the addon cannot be found.
      const pkg = join(tmp.dir, 'ctxdedup');
      for (const part of ['dist', 'conformance', 'package.json']) cpSync(join(ROOT, part), join(pkg, part), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
      const r = spawnSync(process.execPath, [join(pkg, 'dist', 'cli', 'main.js'), 'doctor'], { cwd: tmp.dir, encoding: 'utf8' });
      expect(r.status).toBe(1);
      expect(r.stdout).toContain('addon      NOT LOADED');
      expect(r.stdout).toMatch(/install the package ctxdedup-[\w-]+@\d/);
      expect(r.stdout).toMatch(/^problem: the native addon could not be loaded/m);
      expect(r.stderr).toBe('');
    });
  });
});
