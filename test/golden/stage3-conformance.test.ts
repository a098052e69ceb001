/**
 * Stage 3 (deduplicate) conformance: every vector in shared/conformance/stage3, on both paths (the
 * native core, and `'auto'`, which takes the small-batch fast path for these vectors), and the
 * benchmarks' pure-JS baseline (bench/reference/stage3.ts) on the vectors it can take.
 * Format and rules: shared/conformance/stage3/README.md.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deduplicateBaseline } from '../../bench/reference/stage3.js';
import type { ContextItem, DeduplicateOptions, ScoredItem } from '../../src/index.js';
import { deduplicateVia, deduplicateWithReportVia, type ScoredPath } from '../../src/stages/deduplicate.js';
import { SHARED } from '../support/shared.js';

type RawScore = number | string;

interface RawItem {
  content: string;
  score: RawScore;
  [field: string]: unknown;
}

interface Vector {
  name: string;
  description: string;
  enabled: boolean;
  items: RawItem[];
  expected: number[] | { error: string };
}

const dir = join(SHARED, 'conformance', 'stage3');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();
const engines: ScoredPath[] = ['native', 'auto'];

const SPECIAL: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };

function toNumber(score: RawScore, where: string): number {
  if (typeof score === 'number') return score;
  const value = SPECIAL[score];
  if (value === undefined) throw new Error(`broken vector ${where}: score string ${JSON.stringify(score)}`);
  return value;
}

function load(file: string): Vector {
  return JSON.parse(readFileSync(join(dir, file), 'utf8')) as Vector;
}

function build(vector: Vector): ScoredItem[] {
  return vector.items.map(({ score, ...item }, i) => ({
    item: item as ContextItem,
    score: toNumber(score, `${vector.name} items[${i}]`),
  }));
}

/** A structural snapshot that keeps -0, NaN and lone surrogates exactly (unlike JSON). */
function snapshot(scored: readonly ScoredItem[]): { refs: ScoredItem[]; items: ContextItem[]; copy: ScoredItem[] } {
  return {
    refs: scored.slice(),
    items: scored.map((s) => s.item),
    copy: structuredClone(scored.slice()),
  };
}

function expectUnmodified(scored: readonly ScoredItem[], before: ReturnType<typeof snapshot>): void {
  expect(scored.length).toBe(before.refs.length);
  scored.forEach((entry, i) => {
    expect(entry).toBe(before.refs[i]);
    expect(entry.item).toBe(before.items[i]);
    const copy = before.copy[i] as ScoredItem;
    expect(Object.is(entry.score, copy.score)).toBe(true);
    expect(entry).toStrictEqual(copy);
  });
}

describe('stage3 conformance vectors', () => {
  it('finds the vectors', () => {
    expect(files.length).toBeGreaterThanOrEqual(37);
  });

  it.each(files)('%s names itself after its file', (file) => {
    const vector = load(file);
    expect(vector.name).toBe(file.replace(/\.json$/, ''));
    const expected = vector.expected;
    if (Array.isArray(expected)) {
      expected.forEach((index, k) => {
        expect(index).toBeLessThan(vector.items.length);
        if (k > 0) expect(index).toBeGreaterThan(expected[k - 1] as number);
      });
    }
  });

  const cases = files.flatMap((file) => engines.map((engine) => [file, engine] as const));

  it.each(cases)('%s [engine %s]', (file, engine) => {
    const vector = load(file);
    const scored = build(vector);
    const before = snapshot(scored);
    const options: DeduplicateOptions = { enabled: vector.enabled };
    const deduplicate = (x: ScoredItem[], o: DeduplicateOptions) => deduplicateVia(engine, x, o);
    const deduplicateWithReport = (x: ScoredItem[], o: DeduplicateOptions) => deduplicateWithReportVia(engine, x, o);
    const expected = vector.expected;

    if (!Array.isArray(expected)) {
      let thrown: unknown;
      let returned: unknown;
      try {
        returned = deduplicate(scored, options);
      } catch (error) {
        thrown = error;
      }
      expect(returned).toBeUndefined();
      expect(thrown).toBeInstanceOf(Error);
      expect((thrown as Error).name).toBe(expected.error);
      expect(() => deduplicateWithReport(scored, options)).toThrow(expect.objectContaining({ name: expected.error }) as Error);
      expectUnmodified(scored, before);
      return;
    }

    const out = deduplicate(scored, options);
    expect(Array.isArray(out)).toBe(true);
    expect(out).not.toBe(scored);
    expect(out.length).toBe(expected.length);
    expected.forEach((index, k) => {
      expect(out[k]).toBe(scored[index]);
      // Object.is on the score: a -0 survivor keeps its -0.
      expect(Object.is(out[k]?.score, before.copy[index]?.score)).toBe(true);
    });
    expectUnmodified(scored, before);

    const report = deduplicateWithReport(scored, options);
    expect(report.kept.length).toBe(expected.length);
    expected.forEach((index, k) => expect(report.kept[k]).toBe(scored[index]));
    const keptSet = new Set(expected);
    const removedIdx = scored.map((_, i) => i).filter((i) => !keptSet.has(i));
    expect(report.decisions.map((r) => r.index)).toEqual(removedIdx);
    for (const r of report.decisions) {
      expect(r.item).toBe(scored[r.index]);
      expect(keptSet.has(r.duplicateOf)).toBe(true);
      expect(scored[r.duplicateOf]?.item.content).toBe(scored[r.index]?.item.content);
    }
    expect(report.stats).toEqual({
      input: scored.length,
      kept: expected.length,
      removed: removedIdx.length,
      charsSaved: removedIdx.reduce((sum, i) => sum + (scored[i]?.item.content.length ?? 0), 0),
    });
    expectUnmodified(scored, before);
  });

  it.each(files)('%s [bench baseline]', (file) => {
    const vector = load(file);
    if (!Array.isArray(vector.expected) || !vector.enabled) return; // the baseline neither validates nor has a switch
    const scored = build(vector);
    const out = deduplicateBaseline(scored);
    expect(out.map((e) => scored.indexOf(e))).toEqual(vector.expected);
  });
});
