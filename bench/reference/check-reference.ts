/**
 * Checks the pure-JS CCE reference against the golden vectors in shared/golden/cce, so the
 * message benchmarks compare ctxdedup with a baseline that does the same work.
 *
 *   npx tsx bench/reference/check-reference.ts [golden-dir]
 *
 * Prints `N passed, M failed` (plus the first difference of each failing case); exits 1 on
 * any failure. The comparison follows the golden README: sorted entries deep-equal, exact
 * values with exactly {duplicateOfIndex, contentLength}, similarities bit-identical. It also
 * checks the djb2-bucketed exact variant and the informational key order (README §6).
 * @module
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { refAnalyzeDuplicates, refAnalyzeDuplicatesDjb2, refAnalyzeFuzzyDuplicates, type RefAnnotation, type RefMessage } from './cce.js';

interface GoldenCase {
  name: string;
  params: { recencyStart: number; preserve: string[]; threshold: number };
  messages: RefMessage[];
  expected: {
    exact: [number, RefAnnotation][];
    fuzzy: [number, RefAnnotation][];
    order: { exact: number[]; fuzzy: number[] };
  };
}

const DEFAULT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'shared', 'golden', 'cce');

function sortedEntries(map: Map<number, RefAnnotation>): [number, RefAnnotation][] {
  return [...map.entries()].sort((a, b) => a[0] - b[0]);
}

/** First difference between two sorted annotation lists, or undefined if they agree. */
function difference(got: [number, RefAnnotation][], want: [number, RefAnnotation][], withSimilarity: boolean): string | undefined {
  if (got.length !== want.length) return `${got.length} entries, expected ${want.length}`;
  for (let i = 0; i < want.length; i++) {
    const [gk, gv] = got[i] as [number, RefAnnotation];
    const [wk, wv] = want[i] as [number, RefAnnotation];
    const keys = Object.keys(gv).sort().join(',');
    const wantKeys = withSimilarity ? 'contentLength,duplicateOfIndex,similarity' : 'contentLength,duplicateOfIndex';
    const same =
      gk === wk &&
      keys === wantKeys &&
      gv.duplicateOfIndex === wv.duplicateOfIndex &&
      gv.contentLength === wv.contentLength &&
      (!withSimilarity || Object.is(gv.similarity, wv.similarity));
    if (!same) return `at ${wk}: got ${JSON.stringify([gk, gv])}, expected ${JSON.stringify([wk, wv])}`;
  }
  return undefined;
}

/** Runs the reference on every case of `dir`; returns the failures as `name: reason`. */
export function checkReference(dir = DEFAULT_DIR): { passed: number; failures: string[] } {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== '_manifest.json')
    .sort();
  const failures: string[] = [];
  for (const file of files) {
    const c = JSON.parse(readFileSync(join(dir, file), 'utf8')) as GoldenCase;
    const before = JSON.stringify(c.messages);
    const preserve = new Set<unknown>(c.params.preserve);
    const exact = refAnalyzeDuplicates(c.messages, c.params.recencyStart, preserve);
    const fuzzy = refAnalyzeFuzzyDuplicates(c.messages, c.params.recencyStart, preserve, new Map(c.expected.exact), c.params.threshold);
    const djb2 = refAnalyzeDuplicatesDjb2(c.messages, c.params.recencyStart, preserve);
    const sameOrder = (got: Map<number, unknown>, want: number[]): boolean => JSON.stringify([...got.keys()]) === JSON.stringify(want);
    const problem =
      difference(sortedEntries(exact), c.expected.exact, false) ??
      difference(sortedEntries(fuzzy), c.expected.fuzzy, true) ??
      (difference(sortedEntries(djb2), c.expected.exact, false) === undefined ? undefined : 'djb2 variant differs') ??
      (sameOrder(djb2, c.expected.order.exact) ? undefined : 'djb2 variant: exact key order differs') ??
      (sameOrder(fuzzy, c.expected.order.fuzzy) ? undefined : 'fuzzy key order differs') ??
      (JSON.stringify(c.messages) === before ? undefined : 'input was mutated');
    if (problem === undefined) continue;
    failures.push(`${c.name}: ${problem}`);
  }
  return { passed: files.length - failures.length, failures };
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { passed, failures } = checkReference(process.argv[2] ?? DEFAULT_DIR);
  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(`${passed} passed, ${failures.length} failed`);
  process.exitCode = failures.length === 0 ? 0 : 1;
}
