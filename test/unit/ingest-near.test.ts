/**
 * Near-duplicate mode of the ingestion index: per-namespace windows of recent new items, the
 * fuzzy line-Jaccard rule against them, options, and a property test against a naive oracle of
 * the whole index (exact claims + windows) over several batches.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import fc from 'fast-check';
import { sha256 } from '../../src/identity.js';
import { IngestIndex, type IngestResult } from '../../src/ingest/index.js';
import { native } from '../../src/native.js';
import { refNearDuplicates } from '../../bench/reference/near-window.js';
import { tempDir } from '../support/ingest-services.js';

const tmp = tempDir('ctxdedup-near-');
afterAll(() => tmp.remove());

/** A 20-line document; `edit` replaces line `edit` with something else (Jaccard 19/21 = 0.905). */
function doc(name: string, edit?: number, lines = 20): string {
  return Array.from({ length: lines }, (_, i) => (i === edit ? `edited line ${i} of ${name}` : `line ${i} of ${name}`)).join('\n');
}

const brief = (results: IngestResult[]): string[] =>
  results.map((r) => (r.status === 'new' ? 'new' : r.match === 'exact' ? `exact:${r.duplicateOf}` : `near:${r.duplicateOf}`));

describe('IngestIndex near-duplicate mode', () => {
  it('reports an edited copy of a recent item as a near duplicate, with its similarity', async () => {
    const index = await IngestIndex.open({ store: 'memory', namespaces: { docs: { nearDuplicates: { threshold: 0.85 } } } });
    const first = await index.ingest('docs', [
      { id: 'a', content: doc('a') },
      { id: 'b', content: doc('b') },
    ]);
    expect(brief(first)).toEqual(['new', 'new']);
    const second = await index.ingest('docs', [
      { id: 'a2', content: doc('a', 7) },
      { id: 'a3', content: doc('a') },
      { id: 'c', content: doc('c') },
      { id: 'B', content: doc('b').toUpperCase() },
    ]);
    expect(second[0]).toEqual({ status: 'duplicate', match: 'near', id: 'a2', duplicateOf: 'a', similarity: 19 / 21, sha256: sha256(doc('a', 7)) });
    expect(second[1]).toEqual({ status: 'duplicate', match: 'exact', id: 'a3', duplicateOf: 'a', sha256: sha256(doc('a')) });
    // Lines are compared after trim() + toLowerCase(): an upper-cased copy is a near duplicate with similarity 1.
    expect(second[3]).toMatchObject({ status: 'duplicate', match: 'near', duplicateOf: 'b', similarity: 1 });
    expect(brief(second)).toEqual(['near:a', 'exact:a', 'new', 'near:b']);
    // The near duplicate's content is still recorded under its own id: an exact copy points to it.
    expect(brief(await index.ingest('docs', [{ id: 'a4', content: doc('a', 7) }]))).toEqual(['exact:a2']);
    // Near duplicates do not enter the window; new items do.
    expect(index.nearWindowSize('docs')).toBe(3);
    // Other namespaces are exact only.
    expect(
      brief(
        await index.ingest('plain', [
          { id: 'x', content: doc('a') },
          { id: 'y', content: doc('a', 3) },
        ]),
      ),
    ).toEqual(['new', 'new']);
    expect(index.nearDuplicates('plain')).toBeUndefined();
    await index.close();
  });

  it('compares with earlier new items of the same batch, and honours the threshold', async () => {
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { threshold: 0.9 } });
    const results = await index.ingest('ns', [
      { id: 'p', content: doc('p') },
      { id: 'p1', content: doc('p', 4) }, // 19/21 = 0.905 >= 0.9
      { id: 'p2', content: doc('p', 4, 10) }, // 9/11 = 0.82 against p: below 0.9
      { id: 'p3', content: doc('p', 4) }, // exact copy of p1
      { id: 'one', content: 'a single line is never a near duplicate' },
      { id: 'one2', content: 'A single line is never a near duplicate' },
    ]);
    expect(brief(results)).toEqual(['new', 'near:p', 'new', 'exact:p1', 'new', 'new']);
    await index.close();
  });

  it('keeps the window bounded: the oldest new items leave it', async () => {
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { window: 2 } });
    await index.ingest('w', [{ id: 'a', content: doc('a') }]);
    await index.ingest('w', [
      { id: 'b', content: doc('b') },
      { id: 'c', content: doc('c') },
    ]);
    expect(index.nearWindowSize('w')).toBe(2);
    expect(
      brief(
        await index.ingest('w', [
          { id: 'a2', content: doc('a', 1) },
          { id: 'c2', content: doc('c', 1) },
        ]),
      ),
    ).toEqual(['new', 'near:c']);
    await index.close();
  });

  it('is retry-safe: a re-sent new item stays new, a re-sent near duplicate stays a near duplicate', async () => {
    const index = await IngestIndex.open({ store: `sqlite:${join(tmp.dir, 'retry.sqlite')}`, nearDuplicates: true });
    const batch = [
      { id: 'a', content: doc('a') },
      { id: 'a2', content: doc('a', 2) },
      { id: 'a', content: doc('a') },
    ];
    const first = await index.ingest('r', batch);
    expect(brief(first)).toEqual(['new', 'near:a', 'new']);
    expect(await index.ingest('r', batch)).toEqual(first);
    await index.close();
  });

  it('forgets window items older than the namespace TTL', async () => {
    let now = 1_000_000;
    const index = await IngestIndex.open({ store: 'memory', namespaces: { t: { ttlSeconds: 10, nearDuplicates: {} } }, now: () => now });
    await index.ingest('t', [{ id: 'a', content: doc('a') }]);
    now += 9_000;
    expect(brief(await index.ingest('t', [{ id: 'a2', content: doc('a', 5) }]))).toEqual(['near:a']);
    now += 2_000;
    expect(brief(await index.ingest('t', [{ id: 'a3', content: doc('a', 6) }]))).toEqual(['new']);
    await index.close();
  });

  it('after the clock went back, an expired item behind a live one is not offered, and the window goes on', async () => {
    let now = 1_000_000;
    const index = await IngestIndex.open({ store: 'memory', namespaces: { t: { ttlSeconds: 10, nearDuplicates: {} } }, now: () => now });
    await index.ingest('t', [{ id: 'a', content: doc('a') }]);
    now -= 50_000; // the clock goes back: b is added "earlier" than a, behind it in the window
    await index.ingest('t', [{ id: 'b', content: doc('b') }]);
    now += 55_000; // a (added at 1,000,000) is live, b (added at 950,000) expired
    expect(brief(await index.ingest('t', [{ id: 'b2', content: doc('b', 5) }]))).toEqual(['new']);
    expect(brief(await index.ingest('t', [{ id: 'a2', content: doc('a', 5) }]))).toEqual(['near:a']);
    // b's own content, new again to the store (its claim expired too): b2 is its nearest live item.
    expect(brief(await index.ingest('t', [{ id: 'b3', content: doc('b') }]))).toEqual(['near:b2']);
    await index.close();
  });

  it('close() empties the windows (their native memory is freed then, not when the index is collected)', async () => {
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: true });
    await index.ingest('a', [{ id: 'a', content: doc('a') }]);
    await index.ingest('b', [{ id: 'b', content: doc('b') }]);
    expect([index.nearWindowSize('a'), index.nearWindowSize('b')]).toEqual([1, 1]);
    await index.close();
    expect([index.nearWindowSize('a'), index.nearWindowSize('b')]).toEqual([0, 0]);
  });

  it('bounds the memory of all windows together, shrinking the least recently used first', async () => {
    const size = doc('o1').length; // as long as o2, n1, n2
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: true, nearWindowMaxChars: 3 * size });
    await index.ingest('old', [
      { id: 'o1', content: doc('o1') },
      { id: 'o2', content: doc('o2') },
    ]);
    await index.ingest('new', [
      { id: 'n1', content: doc('n1') },
      { id: 'n2', content: doc('n2') },
    ]);
    expect([index.nearWindowSize('old'), index.nearWindowSize('new')]).toEqual([1, 2]);
    expect(
      brief(
        await index.ingest('old', [
          { id: 'o1b', content: doc('o1', 3) },
          { id: 'o2b', content: doc('o2', 3) },
        ]),
      ),
    ).toEqual(['new', 'near:o2']);
    await index.close();
  });

  it('serializes concurrent batches of a namespace: the same results as one after the other', async () => {
    const batches = Array.from({ length: 6 }, (_, b) =>
      Array.from({ length: 8 }, (_, i) => ({ id: `b${b}-${i}`, content: doc(`d${(b * 5 + i) % 13}`, (b + i) % 3 === 0 ? undefined : (b + i) % 20) })),
    );
    const concurrent = await IngestIndex.open({ store: 'memory', nearDuplicates: true });
    const sequential = await IngestIndex.open({ store: 'memory', nearDuplicates: true });
    const together = await Promise.all(batches.map((batch) => concurrent.ingest('c', batch)));
    const oneByOne: IngestResult[][] = [];
    for (const batch of batches) oneByOne.push(await sequential.ingest('c', batch));
    expect(together).toEqual(oneByOne);
    expect(together.flat().some((r) => r.status === 'duplicate' && r.match === 'near')).toBe(true);
    await Promise.all([concurrent.close(), sequential.close()]);
  });

  it('validates the options, naming the path', async () => {
    const open = (options: Parameters<typeof IngestIndex.open>[0]): Promise<IngestIndex> => IngestIndex.open({ store: 'memory', ...options });
    await expect(open({ nearDuplicates: { threshold: 0 } })).rejects.toThrow(new RangeError('options.nearDuplicates.threshold must be in (0, 1], got 0'));
    await expect(open({ nearDuplicates: { threshold: 1.5 } })).rejects.toThrow(RangeError);
    await expect(open({ nearDuplicates: { threshold: Number.NaN } })).rejects.toThrow(/threshold must be in \(0, 1\], got NaN/);
    await expect(open({ nearDuplicates: { threshold: '0.9' as never } })).rejects.toThrow(
      new TypeError('options.nearDuplicates.threshold must be a number, got a string'),
    );
    await expect(open({ nearDuplicates: { window: 0 } })).rejects.toThrow(/^options\.nearDuplicates\.window must be in \[1, 1000000\], got 0$/);
    await expect(open({ nearDuplicates: { window: 2.5 } })).rejects.toThrow(/^options\.nearDuplicates\.window must be an integer/);
    await expect(open({ nearDuplicates: 'yes' as never })).rejects.toThrow(/^options\.nearDuplicates must be an object/);
    await expect(open({ namespaces: { a: { nearDuplicates: { window: -1 } } } })).rejects.toThrow(/^options\.namespaces\["a"\]\.nearDuplicates\.window/);
    await expect(open({ nearWindowMaxChars: -5 })).rejects.toThrow(/^options\.nearWindowMaxChars/);
    // `false` turns a default off for one namespace; threshold 1 is allowed (identical line bags).
    const index = await open({ nearDuplicates: { threshold: 1 }, namespaces: { off: { nearDuplicates: false } } });
    expect(index.nearDuplicates('on')).toEqual({ threshold: 1, window: 1000 });
    expect(index.nearDuplicates('off')).toBeUndefined();
    expect(
      brief(
        await index.ingest('off', [
          { id: 'a', content: doc('a') },
          { id: 'b', content: doc('a').toUpperCase() },
        ]),
      ),
    ).toEqual(['new', 'new']);
    expect(
      brief(
        await index.ingest('on', [
          { id: 'a', content: doc('a') },
          { id: 'b', content: doc('a').toUpperCase() },
        ]),
      ),
    ).toEqual(['new', 'near:a']);
    await index.close();
  });
});

describe('near-duplicate check: native core vs the pure-JS reference and a naive index oracle', () => {
  // Lines from a small vocabulary, so that near duplicates are frequent; case and spaces vary.
  const line = fc.tuple(fc.integer({ min: 0, max: 7 }), fc.boolean(), fc.constantFrom('', ' ', '\t')).map(([x, upper, pad]) => {
    const text = `${pad}line ${x}`;
    return upper ? text.toUpperCase() : text;
  });
  const content = fc.array(line, { minLength: 0, maxLength: 9 }).map((lines) => lines.join('\n'));

  it('the native check equals the JS reference (the benchmark baseline)', () => {
    fc.assert(
      fc.property(fc.array(content, { maxLength: 20 }), fc.array(content, { maxLength: 20 }), fc.constantFrom(0.3, 0.5, 0.75, 0.85, 1), (window, batch, t) => {
        const kept = new native.NativeNearWindow();
        kept.push(window, 0);
        const found = kept.search(batch, new Uint8Array(batch.length), t, 0).run(batch, new Uint8Array(batch.length), t);
        const expected = refNearDuplicates(window, batch, t);
        expect([...found.target]).toEqual(expected.map((m) => m?.target ?? -1));
        expect([...found.similarity].map((s) => (Number.isNaN(s) ? undefined : s))).toEqual(expected.map((m) => m?.similarity));
      }),
      { numRuns: 300 },
    );
  });

  /** Naive model of the index: exact owners per content, and a list of recent new items. */
  function oracle(batches: { id: string; content: string }[][], threshold: number, windowSize: number): string[][] {
    const owner = new Map<string, string>();
    let recent: { id: string; lines: string[]; length: number }[] = [];
    const lines = (text: string): string[] =>
      text
        .split('\n')
        .map((l) => l.trim().toLowerCase())
        .filter((l) => l !== '');
    const count = (xs: string[]): Map<string, number> => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>());
    const similarity = (a: string[], al: number, b: string[], bl: number): number => {
      if (a.length < 2 || b.length < 2) return -1;
      let overlap = 0;
      for (const x of a.slice(0, 5)) for (const y of b.slice(0, 5)) if (x === y) overlap++;
      if (overlap < 3 || Math.min(al, bl) / Math.max(al, bl) < 0.7) return -1;
      const ca = count(a);
      const cb = count(b);
      let inter = 0;
      for (const [x, n] of ca) inter += Math.min(n, cb.get(x) ?? 0);
      return inter / (a.length + b.length - inter);
    };
    return batches.map((batch) => {
      const decided = new Map<string, string>(); // id + content -> decision of the first such item of the batch
      const checkedIds = new Set<string>();
      const out = batch.map(({ id, content }) => {
        const known = owner.get(content);
        if (known !== undefined && known !== id) return `exact:${known}`;
        if (known === undefined) owner.set(content, id);
        const key = `${id}\u0000${content}`;
        const earlier = decided.get(key);
        if (earlier !== undefined) return earlier;
        let decision = 'new';
        // A retry (id in the window, or already checked in this batch) is new and not compared.
        if (!recent.some((r) => r.id === id) && !checkedIds.has(id)) {
          const mine = lines(content);
          let best: { id: string; s: number } | undefined;
          for (const r of recent) {
            const s = similarity(mine, content.length, r.lines, r.length);
            if (s >= threshold && (best === undefined || s > best.s)) best = { id: r.id, s };
          }
          if (best === undefined) recent.push({ id, lines: mine, length: content.length });
          else decision = `near:${best.id}`;
        }
        checkedIds.add(id);
        decided.set(key, decision);
        return decision;
      });
      recent = recent.slice(Math.max(0, recent.length - windowSize));
      return out;
    });
  }

  it('an owner re-sending its content after an exact duplicate of it in the same batch re-enters the window', async () => {
    // Found by the oracle property below: `c` re-sends "" after `a` sent "" (an exact duplicate of
    // c's) in the same batch; c is new and, no longer in the window, is compared and added again.
    const batches = [
      [
        { id: 'c', content: '' },
        { id: 'a', content: 'line 0' },
        { id: 'g', content: '\tline 0' },
        { id: 'h', content: 'LINE 0' },
      ],
      [{ id: 'b', content: 'line 1' }],
      [
        { id: 'a', content: '' },
        { id: 'c', content: '' },
      ],
      [
        { id: 'a', content: 'line 3\nline 1\nline 3' },
        { id: 'd', content: ' line 0' },
      ],
      [{ id: 'h', content: ' line 1\nline 3' }],
    ];
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { threshold: 0.5, window: 4 } });
    const got: string[][] = [];
    for (const batch of batches) got.push(brief(await index.ingest('p', batch)));
    await index.close();
    expect(got).toEqual(oracle(batches, 0.5, 4));
    expect(got[4]).toEqual(['near:a']);
  });

  it('IngestIndex (memory store) decides like the naive oracle over several batches', async () => {
    const item = fc.record({ id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), content });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(item, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom(0.5, 0.75, 0.85),
        fc.integer({ min: 1, max: 6 }),
        async (batches, threshold, window) => {
          const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { threshold, window } });
          const got: string[][] = [];
          for (const batch of batches) got.push(brief(await index.ingest('p', batch)));
          await index.close();
          expect(got).toEqual(oracle(batches, threshold, window));
        },
      ),
      { numRuns: 200 },
    );
  });
});
