/**
 * Long synchronous work split into steps, so async entry points let the event loop run (timers,
 * I/O) between them. A step is a `yield` of a generator: {@link drain} runs every step at once
 * (the sync entry points), {@link drainPaced} pauses between steps once
 * {@link YIELD_AFTER_MS} have passed (the async ones). One generator, so the two results are
 * built by the same code.
 * @internal
 * @module
 */

/**
 * Longest stretch of work, in milliseconds, an async entry point does before letting the event
 * loop run again.
 */
export const YIELD_AFTER_MS = 8;

/** Resolves on a later turn of the event loop, after pending timers and I/O callbacks. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Calls `pause()` (a turn of the event loop) once at least {@link YIELD_AFTER_MS} have passed since the last one. */
export class Pacer {
  #since = performance.now();

  async pause(): Promise<void> {
    if (performance.now() - this.#since < YIELD_AFTER_MS) return;
    await yieldToEventLoop();
    this.#since = performance.now();
  }
}

/** Work that may pause at each `yield` and returns a `T`. */
export type Steps<T> = Generator<void, T, void>;

/** Runs every step now and returns the result. */
export function drain<T>(steps: Steps<T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/** Runs the steps, letting the event loop run between them every {@link YIELD_AFTER_MS}. */
export async function drainPaced<T>(steps: Steps<T>): Promise<T> {
  const pacer = new Pacer();
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
    await pacer.pause();
  }
}

/** Items a step handles between two chances to pause (a few milliseconds of work at most). */
export const STEP_ITEMS = 256;

/**
 * Flattens the strings, in steps. A string built by concatenation is a tree until something reads
 * its characters in one go; the first native read of a batch flattens every such string at once,
 * on the JS thread (about 0.5 s for 100,000 concatenated messages of 800 characters). Converting
 * a string to a number flattens it (and stops at its first non-numeric character), so the
 * async entry points do it here first, letting the event loop run between steps. Returns how
 * many texts read as numbers (of no use but to keep the conversions).
 */
export function* flatten(texts: readonly string[]): Steps<number> {
  let units = 0;
  // Returned (and unused by callers) so that no compiler drops the conversions as dead code.
  let numeric = 0;
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i] as string;
    // The conversion flattens `text` in place.
    if (!Number.isNaN(Number(text))) numeric++;
    units += text.length;
    if (units >= STEP_UNITS) {
      units = 0;
      yield;
    }
  }
  return numeric;
}

/** Code units a flattening step covers at most (past its last string). */
const STEP_UNITS = 1 << 22;
