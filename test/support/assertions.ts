/**
 * Small helpers shared by the test files.
 */

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
