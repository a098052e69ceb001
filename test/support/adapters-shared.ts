/**
 * Helpers of the adapter tests: test contents and a structural diff.
 */

/** A source file as a tool would return it: `lines` distinct lines, long enough to deduplicate. */
export function sourceFile(name: string, lines = 40): string {
  let text = '';
  for (let i = 0; i < lines; i++) text += `export const ${name}_${i} = compute(${i}, '${name}'); // line ${i} of ${name}\n`;
  return text;
}

/** Paths (JSON-ish) of every leaf where `a` and `b` differ. */
export function diffPaths(a: unknown, b: unknown, path = '$', out: string[] = []): string[] {
  if (Object.is(a, b)) return out;
  const objects = typeof a === 'object' && a !== null && typeof b === 'object' && b !== null;
  if (!objects || Array.isArray(a) !== Array.isArray(b)) {
    out.push(path);
    return out;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const step = Array.isArray(a) ? `${path}[${key}]` : `${path}.${key}`;
    diffPaths((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], step, out);
  }
  return out;
}
