/**
 * `ctxdedup/conformance`: the behaviour of the stages as shipped vectors, checked against ctxdedup
 * itself or against any other implementation that exposes the same functions.
 *
 * The vectors live in the package's `conformance/` directory (schema: `conformance/FORMAT.md`).
 * Each vector names one function (`deduplicate`, `dedupeMessages`, `ResourceLedger`, ...), its
 * input, and the expected result as a projection of what that function returns; a run calls the
 * implementation's function of that name and compares.
 * @example
 * import { runConformance } from 'ctxdedup/conformance';
 * const report = await runConformance({ impl: './my-port.mjs', suites: ['scored'] });
 * for (const v of report.vectors) if (v.status === 'fail') console.log(v.id, v.diff);
 * @module
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe as describeType, expectArray, expectKnownKeys, expectObject, expectOptions, optionalBoolean, show, typeError } from '../validation.js';
import { packageRoot } from '../package-root.js';
import type { DeduplicateOptions, ScoredItem } from '../stages/deduplicate.js';
import type { DedupeMessagesOptions, Message } from '../stages/messages.js';
import type { DedupeFindingsOptions, DedupeSourcesOptions, Source } from '../stages/research.js';
import type { ResourceLedgerOptions } from '../stages/resources.js';
import { CALLS, type Projection } from './calls.js';
import { decodeValue, diffValues, renderValue } from './values.js';

/** The `format` field of the manifest and of every suite file. */
export const CONFORMANCE_FORMAT = 'ctxdedup/conformance';
/** The `version` field of the manifest and of every suite file (bumped on any schema change). */
export const CONFORMANCE_VERSION = 1;

/**
 * The functions an implementation may provide, under ctxdedup's names. Only the ones present are
 * checked; vectors of the others are reported as skipped. Results may be promises.
 */
export interface ConformanceImpl {
  deduplicate?(scored: ScoredItem[], options?: DeduplicateOptions): unknown;
  deduplicateWithReport?(scored: ScoredItem[], options?: DeduplicateOptions): unknown;
  dedupeMessages?(messages: Message[], options?: DedupeMessagesOptions): unknown;
  /** A class: `new ResourceLedger(options)` with `recordAttachment`, `process`, `forgetTurns`, `forgetCalls`, `compactBefore`. */
  ResourceLedger?: new (
    options?: ResourceLedgerOptions,
  ) => unknown;
  findingKey?(paragraph: string): unknown;
  dedupeFindings?(findings: string[], options?: DedupeFindingsOptions): unknown;
  dedupeSources?(sources: Source[], options?: DedupeSourcesOptions): unknown;
  canonicalizeUrl?(url: string): unknown;
  [name: string]: unknown;
}

/** Options of {@link runConformance}. */
export interface RunConformanceOptions {
  /** Suite names to run (see {@link listSuites}). Default: every suite. */
  suites?: string[];
  /**
   * The implementation under test: a module path (relative to the working directory), a file
   * URL, or an object exporting the functions of {@link ConformanceImpl}. Default: ctxdedup.
   */
  impl?: string | URL | ConformanceImpl;
  /** Run only the vectors marked `smoke` (a fast subset, what `ctxdedup doctor` runs). Default `false`. */
  smoke?: boolean;
  /** Directory holding `manifest.json` and the suite files. Default: the package's `conformance/`. */
  dir?: string;
}

/** The outcome of one vector. */
export interface VectorResult {
  suite: string;
  id: string;
  description: string;
  /** The rule the vector pins, in words. */
  rule: string;
  /** The function it calls. */
  call: string;
  /** `skip`: the implementation does not provide `call`. */
  status: 'pass' | 'fail' | 'skip';
  /** For failures: what differs, one line per path (`kept[0]: expected 0, got 1`). */
  diff?: string;
}

/** Counts of one suite or of a whole run. */
export interface ConformanceCounts {
  passed: number;
  failed: number;
  skipped: number;
}

/** One suite of a run. */
export interface SuiteResult extends ConformanceCounts {
  name: string;
  description: string;
}

/** Result of {@link runConformance}. */
export interface ConformanceReport {
  /** `true` when no checked vector failed and at least one was checked. */
  ok: boolean;
  format: typeof CONFORMANCE_FORMAT;
  version: typeof CONFORMANCE_VERSION;
  suites: SuiteResult[];
  vectors: VectorResult[];
  totals: ConformanceCounts;
  /** Functions the implementation provided, of those the selected vectors call. */
  provided: string[];
  /** Functions the selected vectors call that the implementation does not provide. */
  missing: string[];
}

/** A suite as listed in the manifest. */
export interface SuiteInfo {
  name: string;
  file: string;
  description: string;
}

/** One vector as stored (before decoding). @internal */
interface RawVector {
  id: string;
  description: string;
  rule: string;
  call: string;
  smoke?: boolean;
  input: unknown;
  expected: unknown;
}

function defaultDir(): string {
  return join(packageRoot(), 'conformance');
}

function readJson(path: string): Record<string, unknown> {
  const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
  expectObject(value, path);
  if (value['format'] !== CONFORMANCE_FORMAT) typeError(`${path}: format`, `must be ${show(CONFORMANCE_FORMAT)}, got ${show(value['format'])}`);
  if (value['version'] !== CONFORMANCE_VERSION) typeError(`${path}: version`, `must be ${CONFORMANCE_VERSION}, got ${show(value['version'])}`);
  return value;
}

/**
 * The suites in the manifest, in order.
 *
 * @param dir - directory holding `manifest.json`; default the package's `conformance/`.
 */
export function listSuites(dir: string = defaultDir()): SuiteInfo[] {
  const manifest = readJson(join(dir, 'manifest.json'));
  const suites = manifest['suites'];
  expectArray(suites, 'manifest.json: suites');
  return suites.map((s, i) => {
    expectObject(s, `manifest.json: suites[${i}]`);
    const { name, file, description } = s;
    if (typeof name !== 'string' || typeof file !== 'string' || typeof description !== 'string') {
      typeError(`manifest.json: suites[${i}]`, 'must have string name, file and description');
    }
    return { name, file, description };
  });
}

function readVectors(dir: string, suite: SuiteInfo): RawVector[] {
  const path = join(dir, suite.file);
  const data = readJson(path);
  const vectors = data['vectors'];
  expectArray(vectors, `${suite.file}: vectors`);
  const ids = new Set<string>();
  return vectors.map((v, i) => {
    const where = `${suite.file}: vectors[${i}]`;
    expectObject(v, where);
    for (const key of ['id', 'description', 'rule', 'call'] as const) {
      if (typeof v[key] !== 'string') typeError(`${where}.${key}`, `must be a string, got ${describeType(v[key])}`);
    }
    const id = v['id'] as string;
    if (ids.has(id)) typeError(`${where}.id`, `duplicates an earlier id: ${show(id)}`);
    ids.add(id);
    if (!Object.hasOwn(CALLS, v['call'] as string)) typeError(`${where}.call`, `names no known function: ${show(v['call'])}`);
    return v as unknown as RawVector;
  });
}

async function resolveImpl(impl: RunConformanceOptions['impl']): Promise<ConformanceImpl> {
  if (impl === undefined) return (await import('../index.js')) as unknown as ConformanceImpl;
  if (typeof impl === 'string' || impl instanceof URL) {
    const url = impl instanceof URL ? impl.href : /^[a-z][a-z0-9+.-]*:/i.test(impl) && !/^[a-z]:[\\/]/i.test(impl) ? impl : pathToFileURL(resolve(impl)).href;
    const module = (await import(url)) as Record<string, unknown>;
    const named = Object.keys(CALLS).some((name) => module[name] !== undefined);
    const fallback = module['default'];
    return (named || typeof fallback !== 'object' || fallback === null ? module : fallback) as ConformanceImpl;
  }
  if (typeof impl !== 'object' || impl === null) typeError('options.impl', `must be a module path, a URL or an object, got ${describeType(impl)}`);
  return impl;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return `a thrown ${describeType(error)}: ${show(error)}`;
}

/** Runs one vector; never throws (anything the implementation throws is a failure). */
async function runVector(suite: string, raw: RawVector, impl: ConformanceImpl): Promise<VectorResult> {
  const base = { suite, id: raw.id, description: raw.description, rule: raw.rule, call: raw.call };
  const call = CALLS[raw.call] as (typeof CALLS)[string];
  const fn = impl[raw.call];
  if (typeof fn !== 'function') return { ...base, status: 'skip' };
  const input = decodeValue(raw.input, `${raw.id}.input`);
  const expected = decodeValue(raw.expected, `${raw.id}.expected`);
  let actual: Projection;
  try {
    actual = await call.run(fn as (...args: unknown[]) => unknown, input, expected);
  } catch (error) {
    return { ...base, status: 'fail', diff: `threw ${errorText(error)}` };
  }
  const lines = Object.hasOwn(actual, 'returned')
    ? [`expected ${renderValue((expected as Record<string, unknown>)['error'])} to be thrown, but it returned ${renderValue(actual['returned'])}`]
    : diffValues(expected, actual, '', true);
  if (lines.length === 0) return { ...base, status: 'pass' };
  const shown = lines.slice(0, 12);
  if (lines.length > shown.length) shown.push(`... and ${lines.length - shown.length} more differences`);
  return { ...base, status: 'fail', diff: shown.join('\n') };
}

function counts(results: readonly VectorResult[]): ConformanceCounts {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const r of results) {
    if (r.status === 'pass') passed++;
    else if (r.status === 'fail') failed++;
    else skipped++;
  }
  return { passed, failed, skipped };
}

/**
 * Runs the conformance vectors against an implementation (ctxdedup by default).
 *
 * @returns one result per vector (with a readable diff for each failure), counts per suite and in
 *   total, and which of the called functions the implementation provides.
 * @throws RangeError if a suite name is unknown; TypeError if an option has the wrong type or a
 *   vector file is malformed; whatever importing an `impl` module throws.
 */
export async function runConformance(options?: RunConformanceOptions): Promise<ConformanceReport> {
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  expectKnownKeys(o, 'options', ['suites', 'impl', 'smoke', 'dir']);
  const dirOption = o['dir'];
  if (dirOption !== undefined && typeof dirOption !== 'string') typeError('options.dir', `must be a string, got ${describeType(dirOption)}`);
  const dir = dirOption ?? defaultDir();
  const smoke = optionalBoolean(o['smoke'], 'options.smoke', false);
  const all = listSuites(dir);
  let selected = all;
  const names = o['suites'];
  if (names !== undefined) {
    expectArray(names, 'options.suites');
    selected = names.map((name, i) => {
      const suite = all.find((s) => s.name === name);
      if (suite === undefined) {
        throw new RangeError(`options.suites[${i}] is ${show(name)}, not a suite (one of ${all.map((s) => s.name).join(', ')})`);
      }
      return suite;
    });
  }
  const impl = await resolveImpl(o['impl'] as RunConformanceOptions['impl']);

  const vectors: VectorResult[] = [];
  const suites: SuiteResult[] = [];
  const called = new Set<string>();
  for (const suite of selected) {
    const raws = readVectors(dir, suite).filter((v) => !smoke || v.smoke === true);
    const results: VectorResult[] = [];
    for (const raw of raws) {
      called.add(raw.call);
      results.push(await runVector(suite.name, raw, impl));
    }
    vectors.push(...results);
    suites.push({ name: suite.name, description: suite.description, ...counts(results) });
  }
  const totals = counts(vectors);
  const provided = [...called].filter((name) => typeof impl[name] === 'function');
  const missing = [...called].filter((name) => typeof impl[name] !== 'function');
  return {
    ok: totals.failed === 0 && totals.passed > 0,
    format: CONFORMANCE_FORMAT,
    version: CONFORMANCE_VERSION,
    suites,
    vectors,
    totals,
    provided,
    missing,
  };
}

export { renderValue };
