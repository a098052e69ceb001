/**
 * Token counts shared by every thread of one `ctxdedup dedupe` run: an open-addressing table in a
 * SharedArrayBuffer, keyed by 128 bits of a content key (SHA-256). The same contents recur across
 * sessions that different workers handle; without it each worker would count them again.
 *
 * Slots are written once and never removed: a writer claims an empty slot with a compare-and-swap,
 * fills it, then publishes it. A reader that meets a slot still being written looks on (and may
 * count the text itself: the result is the same). When the probe limit is reached the table is
 * full for that key and the caller counts without it.
 * @module
 */

/** Int32s per slot: state, four key words, the count. */
const SLOT = 6;
const EMPTY = 0;
const WRITING = 1;
const READY = 2;
/** Slots probed per key, at most. */
const PROBES = 32;

/** Default number of slots: 2^18 (6 MB), far more than the distinct replaced contents of most runs. */
export const DEFAULT_SLOTS = 1 << 18;

/** Allocates the table's memory (pass it to every thread). */
export function sharedCountsBuffer(slots = DEFAULT_SLOTS): SharedArrayBuffer {
  return new SharedArrayBuffer(slots * SLOT * 4);
}

/** The four key words of a content key: 32 hex digits of its SHA-256 (the `u16:` kind flips a bit). */
function words(key: string): [number, number, number, number] {
  const at = key.startsWith('u16:') ? 4 : 0;
  const w = (i: number): number => Number.parseInt(key.slice(at + 8 * i, at + 8 * i + 8), 16) | 0;
  return [w(0), w(1), w(2), at === 0 ? w(3) : w(3) ^ 1];
}

/** A view of the shared table on one thread. */
export class SharedCounts {
  private readonly table: Int32Array;
  private readonly mask: number;

  /** @param buffer - from {@link sharedCountsBuffer}; its slot count is a power of two */
  constructor(buffer: SharedArrayBuffer) {
    this.table = new Int32Array(buffer);
    this.mask = this.table.length / SLOT - 1;
  }

  /** The count stored for `key`, if any. */
  get(key: string): number | undefined {
    const [a, b, c, d] = words(key);
    const t = this.table;
    for (let p = 0, slot = a & this.mask; p < PROBES; p++, slot = (slot + 1) & this.mask) {
      const at = slot * SLOT;
      const state = Atomics.load(t, at);
      if (state === EMPTY) return undefined;
      if (state === READY && t[at + 1] === a && t[at + 2] === b && t[at + 3] === c && t[at + 4] === d) return t[at + 5];
    }
    return undefined;
  }

  /** Stores the count of `key` (a no-op when the table is full around it). */
  set(key: string, tokens: number): void {
    const [a, b, c, d] = words(key);
    const t = this.table;
    for (let p = 0, slot = a & this.mask; p < PROBES; p++, slot = (slot + 1) & this.mask) {
      const at = slot * SLOT;
      const state = Atomics.compareExchange(t, at, EMPTY, WRITING);
      if (state === EMPTY) {
        t[at + 1] = a;
        t[at + 2] = b;
        t[at + 3] = c;
        t[at + 4] = d;
        t[at + 5] = tokens;
        Atomics.store(t, at, READY);
        return;
      }
      // Someone else stored it (or is storing it): nothing to add.
      if (state === READY && t[at + 1] === a && t[at + 2] === b && t[at + 3] === c && t[at + 4] === d) return;
    }
  }
}
