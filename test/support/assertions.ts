/**
 * Small helpers shared by the test files.
 */
import fc from 'fast-check';
import type { BlockDecision, BlockReference, BlocksMarker, Message, MessageDecision, WholeMessageDecision } from '../../src/index.js';

/** Casts a deliberately ill-typed value for bad-input tests. */
export function unsafe<T>(value: unknown): T {
  return value as T;
}

/** The Error that `f` throws (fails the test if it returns, or throws a non-Error). */
export function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (error) {
    if (error instanceof Error) return error;
    throw new Error(`threw a non-Error: ${String(error)}`);
  }
  throw new Error('did not throw');
}

/**
 * Any JavaScript value, the awkward ones included (BigInts, boxed values, Maps, Sets,
 * null-prototype objects, typed and sparse arrays), for properties over hostile input.
 */
export function anyValue(maxDepth?: number): fc.Arbitrary<unknown> {
  return fc.anything({
    withBigInt: true,
    withBoxedValues: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withTypedArray: true,
    withSparseArray: true,
    ...(maxDepth === undefined ? {} : { maxDepth }),
  });
}

/**
 * The decisions of a call made without `blocks`: all whole-message ones (fails the test if a
 * block decision is among them), typed as such.
 */
export function wholeDecisions(decisions: readonly MessageDecision[]): WholeMessageDecision[] {
  return decisions.map((d) => {
    if (d.kind === 'block') throw new Error(`a block decision in a call without blocks: ${JSON.stringify(d)}`);
    return d;
  });
}

/**
 * What block decision `d`, the `k`-th reference of its message, stands for: the lines it replaced
 * (from the input), its reference as the marker records it, and the reference line in the output.
 */
export function blockTexts(
  input: readonly Message[],
  output: readonly Message[],
  d: BlockDecision,
  k: number,
): { run: string; ref: BlockReference | undefined; reference: string | undefined } {
  const run = (input[d.index]?.content as string)
    .split('\n')
    .slice(d.lines.from - 1, d.lines.to)
    .join('\n');
  const ref = (output[d.index]?.metadata?.['ctxdedup'] as BlocksMarker).references[k];
  const reference = ref === undefined ? undefined : (output[d.index]?.content as string).split('\n')[ref.line];
  return { run, ref, reference };
}
