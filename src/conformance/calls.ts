/**
 * How a vector calls each function and what part of its result it compares: the projections
 * documented in conformance/FORMAT.md. A vector's `expected` lists the projection keys it asserts.
 * @internal
 * @module
 */
import { describe, expectArray, expectObject, show, typeError } from '../validation.js';

/** The compared part of a result. @internal */
export type Projection = Record<string, unknown>;

type Fn = (...args: unknown[]) => unknown;

/** One callable function of the vectors. @internal */
export interface CallSpec {
  /** Calls `fn` with the decoded `input` and projects its result (or the error it throws). */
  run(fn: Fn, input: unknown, expected: unknown): Promise<Projection>;
}

function record(value: unknown, path: string): Record<string, unknown> {
  expectObject(value, path);
  return value;
}

/** The expected error of a vector or step, if it expects one. */
function expectedError(expected: unknown): { type: string; path: string } | undefined {
  if (typeof expected !== 'object' || expected === null || !Object.hasOwn(expected, 'error')) return undefined;
  const error = (expected as Record<string, unknown>)['error'];
  expectObject(error, 'expected.error');
  if (typeof error['type'] !== 'string' || typeof error['path'] !== 'string') typeError('expected.error', 'must have string type and path');
  return { type: error['type'], path: error['path'] };
}

/**
 * The projection of a thrown error: its type, and the expected path when the message names it
 * (the message itself otherwise, so the diff shows what was said).
 */
function errorProjection(error: unknown, want: { type: string; path: string } | undefined): Projection {
  if (!(error instanceof Error)) return { error: { type: `a thrown ${describe(error)}`, path: show(error) } };
  const names = want !== undefined && error.message.includes(want.path);
  return { error: { type: error.name, path: names ? (want as { path: string }).path : `(not named by the message ${show(error.message)})` } };
}

/** Calls `invoke`, projecting its result, or the error when one is expected or thrown. */
async function guarded(expected: unknown, invoke: () => Promise<Projection>): Promise<Projection> {
  const want = expectedError(expected);
  let projection: Projection;
  try {
    projection = await invoke();
  } catch (error) {
    if (want !== undefined) return errorProjection(error, want);
    throw error;
  }
  return want === undefined ? projection : { returned: projection };
}

/** Only the keys `expected` lists (a vector asserts the parts it names). */
function pick(projection: Projection, expected: unknown): Projection {
  if (typeof expected !== 'object' || expected === null) return projection;
  const out: Projection = {};
  for (const key of Object.keys(expected)) if (Object.hasOwn(projection, key)) out[key] = projection[key];
  if (Object.hasOwn(projection, 'returned')) out['returned'] = projection['returned'];
  return out;
}

function args(main: unknown, options: unknown): unknown[] {
  return options === undefined ? [main] : [main, options];
}

/** Positions in `input` of the entries of `output`, by identity (what the stages promise). */
function positions(output: unknown, input: readonly unknown[], path: string): unknown[] {
  expectArray(output, path);
  return output.map((entry) => {
    const index = input.indexOf(entry);
    return index >= 0 ? index : `(not one of the input objects: ${show(entry)})`;
  });
}

function array(value: unknown, path: string): unknown[] {
  expectArray(value, path);
  return value;
}

const scoredCall = (report: boolean): CallSpec => ({
  run: (fn, input, expected) =>
    guarded(expected, async () => {
      const { scored, options } = record(input, 'input');
      const result = await fn(...args(scored, options));
      if (!report) return { kept: positions(result, scored as unknown[], 'result') };
      const r = record(result, 'result');
      // Format v1 names the list `removed` and the characters `charsRemoved`: ctxdedup's
      // `decisions` and `stats.charsSaved` (an implementation may still use the old names).
      const list = r['decisions'] === undefined ? 'removed' : 'decisions';
      const stats = r['stats'];
      let projectedStats = stats;
      if (typeof stats === 'object' && stats !== null && (stats as Record<string, unknown>)['charsSaved'] !== undefined) {
        const { charsSaved, charsRemoved: _, ...rest } = stats as Record<string, unknown>;
        projectedStats = { ...rest, charsRemoved: charsSaved };
      }
      return {
        kept: positions(r['kept'], scored as unknown[], 'result.kept'),
        removed: array(r[list], `result.${list}`).map((d, i) => {
          const x = record(d, `result.${list}[${i}]`);
          return { index: x['index'], duplicateOf: x['duplicateOf'] };
        }),
        stats: projectedStats,
      };
    }),
});

const dedupeMessages: CallSpec = {
  run: (fn, input, expected) =>
    guarded(expected, async () => {
      const { messages, options } = record(input, 'input');
      const r = record(await fn(...args(messages, options)), 'result');
      const out = array(r['messages'], 'result.messages');
      const stats = record(r['stats'], 'result.stats');
      const replaced = array(r['decisions'], 'result.decisions').map((d, i) => {
        const x = record(d, `result.decisions[${i}]`);
        // Format v1 vectors name a near-duplicate decision `fuzzy` (ctxdedup's old word for `near`).
        const kind = x['kind'] === 'near' ? 'fuzzy' : x['kind'];
        const entry: Projection = { index: x['index'], kind, duplicateOf: x['duplicateOfIndex'] };
        if (x['similarity'] !== undefined) entry['similarity'] = x['similarity'];
        // Block decisions also say which lines were replaced and which they point at.
        for (const key of ['lines', 'targetLines', 'numbered'] as const) if (x[key] !== undefined) entry[key] = x[key];
        return entry;
      });
      const verbatim = record(r['verbatim'], 'result.verbatim');
      return {
        replaced,
        contents: out.map((m, i) => record(m, `result.messages[${i}]`)['content']),
        keptInWindow: stats['keptInWindow'],
        verbatim: Object.keys(verbatim),
      };
    }),
};

function deliveryProjection(d: unknown, path: string): Projection {
  const x = record(d, path);
  return x['action'] === 'referenced'
    ? { index: x['index'], action: x['action'], bytes: x['bytes'], original: x['original'] }
    : { index: x['index'], action: x['action'], reason: x['reason'], bytes: x['bytes'] };
}

function blockProjection(b: unknown, path: string): Projection {
  const x = record(b, path);
  return x['type'] === 'text' ? { type: 'text', text: x['text'] } : { type: x['type'], uri: x['uri'] };
}

const LEDGER_OPS = ['recordAttachment', 'process', 'forgetTurns', 'forgetCalls', 'compactBefore'] as const;

const resourceLedger: CallSpec = {
  run: async (ctor, input, expected) => {
    const { options, steps } = record(input, 'input');
    const want = array(record(expected, 'expected')['steps'], 'expected.steps');
    const stepList = array(steps, 'input.steps');
    if (want.length !== stepList.length) typeError('expected.steps', `has ${want.length} entries for ${stepList.length} steps`);
    const Ledger = ctor as unknown as new (...a: unknown[]) => Record<string, unknown>;
    const ledger = options === undefined ? new Ledger() : new Ledger(options);
    const results: Projection[] = [];
    for (let k = 0; k < stepList.length; k++) {
      const step = record(stepList[k], `input.steps[${k}]`);
      const op = step['op'];
      if (typeof op !== 'string' || !(LEDGER_OPS as readonly string[]).includes(op)) {
        typeError(`input.steps[${k}].op`, `must be one of ${LEDGER_OPS.join(', ')}, got ${show(op)}`);
      }
      const method = ledger[op];
      const projection = await guarded(want[k], async () => {
        try {
          return await ledgerStep(ledger, op as string, method, step['arg']);
        } catch (error) {
          // Say which step threw; an expected error keeps its type and message for the check.
          if (expectedError(want[k]) !== undefined) throw error;
          throw new Error(`steps[${k}] (${op as string}) threw ${error instanceof Error ? `${error.name}: ${error.message}` : show(error)}`);
        }
      });
      results.push(pick(projection, want[k]));
    }
    return { steps: results };
  },
};

async function ledgerStep(ledger: Record<string, unknown>, op: string, method: unknown, arg: unknown): Promise<Projection> {
  if (typeof method !== 'function') throw new TypeError(`the ledger has no method ${op}`);
  const result = await (method as Fn).call(ledger, arg);
  if (op === 'process') {
    const r = record(result, 'result');
    return {
      decisions: array(r['decisions'], 'result.decisions').map((d, i) => deliveryProjection(d, `result.decisions[${i}]`)),
      blocks: array(r['blocks'], 'result.blocks').map((b, i) => blockProjection(b, `result.blocks[${i}]`)),
    };
  }
  if (op === 'recordAttachment') {
    const r = record(result, 'result');
    const p: Projection = { recorded: r['recorded'], bytes: r['bytes'] };
    if (r['sha256'] !== undefined) p['sha256'] = r['sha256'];
    return p;
  }
  return { forgotten: result };
}

const findingKey: CallSpec = {
  run: (fn, input, expected) => guarded(expected, async () => ({ key: await fn(record(input, 'input')['paragraph']) })),
};

const dedupeFindings: CallSpec = {
  run: (fn, input, expected) =>
    guarded(expected, async () => {
      const { findings, options } = record(input, 'input');
      const r = record(await fn(...args(findings, options)), 'result');
      // Format v1 reads the counts at the top level, the list as `duplicates` and the kept
      // paragraph as `duplicateOf`: ctxdedup's `stats`, `decisions` and `duplicateOfParagraph`
      // (an implementation may still use the old shape).
      const flat = r['stats'] === undefined;
      const stats = flat ? r : record(r['stats'], 'result.stats');
      const list = flat ? 'duplicates' : 'decisions';
      return {
        text: r['text'],
        paragraphs: stats['paragraphs'],
        kept: stats['kept'],
        removed: stats['removed'],
        duplicates: array(r[list], `result.${list}`).map((d, i) => {
          const x = record(d, `result.${list}[${i}]`);
          const duplicateOf = x['duplicateOfParagraph'] === undefined ? x['duplicateOf'] : x['duplicateOfParagraph'];
          return { finding: x['finding'], paragraph: x['paragraph'], duplicateOfFinding: x['duplicateOfFinding'], duplicateOf };
        }),
      };
    }),
};

const dedupeSources: CallSpec = {
  run: (fn, input, expected) =>
    guarded(expected, async () => {
      const { sources, options } = record(input, 'input');
      const r = record(await fn(...args(sources, options)), 'result');
      // Format v1 says `unique`, `pruned` and stats `{ total, unique, pruned, … }`: ctxdedup's
      // `kept`, `decisions` and `{ input, kept, removed, … }` (an implementation may still use the old names).
      const old = r['decisions'] === undefined;
      const keptKey = old ? 'unique' : 'kept';
      const listKey = old ? 'pruned' : 'decisions';
      let stats = r['stats'];
      if (!old && typeof stats === 'object' && stats !== null) {
        const { input, kept, removed, total: _t, unique: _u, pruned: _p, ...rest } = stats as Record<string, unknown>;
        stats = { total: input, unique: kept, pruned: removed, ...rest };
      }
      return {
        unique: positions(r[keptKey], sources as unknown[], `result.${keptKey}`),
        pruned: array(r[listKey], `result.${listKey}`).map((p, i) => {
          const x = record(p, `result.${listKey}[${i}]`);
          const entry: Projection = { index: x['index'], reason: x['reason'] };
          if (x['duplicateOf'] !== undefined) entry['duplicateOf'] = x['duplicateOf'];
          if (x['key'] !== undefined) entry['key'] = x['key'];
          return entry;
        }),
        stats,
      };
    }),
};

const canonicalizeUrl: CallSpec = {
  run: (fn, input, expected) => guarded(expected, async () => ({ url: await fn(record(input, 'input')['url']) })),
};

/**
 * The functions vectors may call, by ctxdedup's export names. A new suite (e.g. `blocks`) adds
 * its vectors under an existing name or registers a new entry here. @internal
 */
export const CALLS: Record<string, CallSpec> = {
  deduplicate: scoredCall(false),
  deduplicateWithReport: scoredCall(true),
  dedupeMessages,
  ResourceLedger: resourceLedger,
  findingKey,
  dedupeFindings,
  dedupeSources,
  canonicalizeUrl,
};
