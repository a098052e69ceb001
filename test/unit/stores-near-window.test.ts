/**
 * Eviction from the near-duplicate windows of the ingestion index: the oldest items leave first,
 * across compactions of the window's array, and evicting does not move every remaining item per
 * evicted one (which made a full large window quadratic).
 */
import { describe, expect, it } from 'vitest';
import { IngestIndex, type IngestResult } from '../../src/ingest/index.js';
import { NamespaceWindow } from '../../src/ingest/near.js';
import { mulberry32 } from '../../bench/prng.js';

/** A 20-line document; `edit` replaces one line (line Jaccard 19/21 with the original). */
function doc(name: string, edit?: number): string {
  return Array.from({ length: 20 }, (_, i) => (i === edit ? `edited line ${i} of ${name}` : `line ${i} of ${name}`)).join('\n');
}

const brief = (results: IngestResult[]): string[] =>
  results.map((r) => (r.status === 'new' ? 'new' : r.match === 'exact' ? `exact:${r.duplicateOf}` : `near:${r.duplicateOf}`));

describe('near-duplicate window eviction', () => {
  it('evicting thousands of items from a full window does not shift the array once per item', async () => {
    const window = 2000;
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { window } });
    const batch = (from: number, n: number): { id: string; content: string }[] =>
      Array.from({ length: n }, (_, i) => ({ id: `d${from + i}`, content: doc(`d${from + i}`) }));
    await index.ingest('docs', batch(0, window));
    expect(index.nearWindowSize('docs')).toBe(window);
    // Counts shift() calls (a vitest spy would itself call shift() on the patched prototype).
    const shift = Array.prototype.shift;
    let shifts = 0;
    Array.prototype.shift = function (this: unknown[]) {
      shifts++;
      return shift.call(this);
    };
    let results: IngestResult[];
    try {
      results = await index.ingest('docs', batch(window, 3000));
    } finally {
      Array.prototype.shift = shift;
    }
    expect(results.every((r) => r.status === 'new')).toBe(true);
    expect(index.nearWindowSize('docs')).toBe(window);
    // 3,000 items were evicted; shift() on the window moved all the others each time.
    expect(shifts).toBeLessThan(100);
    await index.close();
  });

  it('keeps exactly the most recent items, in order, across many evictions', async () => {
    const index = await IngestIndex.open({ store: 'memory', nearDuplicates: { window: 1500 } });
    for (let from = 0; from < 5000; from += 700) {
      const n = Math.min(700, 5000 - from);
      const items = Array.from({ length: n }, (_, i) => ({ id: `d${from + i}`, content: doc(`d${from + i}`) }));
      expect(brief(await index.ingest('docs', items)).every((s) => s === 'new')).toBe(true);
    }
    expect(index.nearWindowSize('docs')).toBe(1500);
    // Only d3500..d4999 remain: an edited copy of d3500 or d4999 is near (and does not enter the
    // window); of d3499, new (it enters, evicting d3500, so that a copy of d3500 is new now).
    expect(brief(await index.ingest('docs', [{ id: 'e3500', content: doc('d3500', 4) }]))).toEqual(['near:d3500']);
    expect(brief(await index.ingest('docs', [{ id: 'e4999', content: doc('d4999', 4) }]))).toEqual(['near:d4999']);
    expect(brief(await index.ingest('docs', [{ id: 'e3499', content: doc('d3499', 4) }]))).toEqual(['new']);
    expect(brief(await index.ingest('docs', [{ id: 'f3500', content: doc('d3500', 5) }]))).toEqual(['new']);
    // f3500 entered in turn and evicted d3501; d3502 is now the oldest.
    expect(brief(await index.ingest('docs', [{ id: 'f3502', content: doc('d3502', 5) }]))).toEqual(['near:d3502']);
    await index.close();
  });

  it('NamespaceWindow agrees with a plain array under random pushes and drops, natively too', () => {
    const random = mulberry32(7).next;
    const window = new NamespaceWindow();
    const model: { id: string; content: string; addedMs: number }[] = [];
    const always = { nowMs: 0, ttlMs: undefined };
    // Three lines of its own per entry, so that an exact copy finds exactly its entry.
    const text = (k: number) => `a ${k}\nb ${k}\nc ${k}${'x'.repeat(k % 7)}`;
    let next = 0;
    for (let step = 0; step < 40_000; step++) {
      // Bursts of pushes and of drops, so that the window grows past and shrinks below compaction sizes.
      const phase = Math.floor(step / 4000) % 2;
      const r = random();
      if (r < (phase === 0 ? 0.7 : 0.3)) {
        const burst = 1 + (next % 3);
        const items = Array.from({ length: burst }, (_, k) => ({ id: `i${next + k}`, content: text(next + k) }));
        window.push(items, next);
        for (const item of items) model.push({ ...item, addedMs: next });
        next += burst;
      } else {
        // Drop 0-2 entries, by a predicate on the oldest as the TTL and size rules do.
        let n = Math.floor(r * 10) % 3;
        const dropped = model.splice(0, n);
        expect(window.dropWhile(() => n-- > 0)).toBe(dropped.reduce((sum, e) => sum + e.content.length, 0));
      }
      if (step % 997 === 0 || model.length === 0) {
        expect(window.length).toBe(model.length);
        expect(window.units).toBe(model.reduce((sum, e) => sum + e.content.length, 0));
        expect([...window.ids].sort()).toEqual(model.map((e) => e.id).sort());
        // The native contents follow: the entries offered are the model's, and a copy of each
        // model content is found at its position.
        const copies = model.map((e) => e.content);
        const { windowLength, entryAt, found } = window.decide(copies, new Uint8Array(copies.length), 1, always, Number.POSITIVE_INFINITY);
        expect(windowLength).toBe(model.length);
        const targets = [...(found as { target: Int32Array }).target];
        expect(targets).toEqual(model.map((_, i) => i));
        expect(targets.map((t) => entryAt(t).id)).toEqual(model.map((e) => e.id));
      }
    }
  });

  it('the native window holds the contents pushed, in order, and offers only the entries still live', async () => {
    const window = new NamespaceWindow();
    const text = (k: number) => [`first ${k}`, `second ${k}`, `third ${k}`, `fourth ${k}`].join('\n');
    window.push(
      [0, 1, 2].map((k) => ({ id: `a${k}`, content: text(k) })),
      10,
    );
    window.push(
      [3, 4].map((k) => ({ id: `a${k}`, content: text(k) })),
      20,
    );
    expect(window.dropWhile((e) => e.id === 'a0')).toBe(text(0).length);
    const batch = [text(0), text(1), text(2), text(3), text(4)];
    const none = new Uint8Array(batch.length);
    // a0 was dropped: its copy matches nothing in the window, and is then a candidate itself.
    const everything = window.decide(batch, none, 1, { nowMs: 25, ttlMs: undefined }, Number.POSITIVE_INFINITY);
    expect(everything.windowLength).toBe(4);
    const targets = [...(everything.found as { target: Int32Array }).target];
    expect(targets).toEqual([-1, 0, 1, 2, 3]);
    expect(targets.slice(1).map((t) => everything.entryAt(t).id)).toEqual(['a1', 'a2', 'a3', 'a4']);
    // With a TTL of 10 at 25, only the entries added at 20 are live: targets stay window positions.
    const late = window.decide(batch, none, 1, { nowMs: 25, ttlMs: 10 }, 0);
    // The search is fixed when it is called: dropping everything meanwhile changes nothing.
    window.dropWhile(() => true);
    expect(window.length).toBe(0);
    const lateTargets = [...(await late.found).target];
    expect(lateTargets).toEqual([-1, -1, -1, 2, 3]);
    expect(lateTargets.slice(3).map((t) => late.entryAt(t).id)).toEqual(['a3', 'a4']);
  });
});
