/**
 * End-to-end throughput of `ctxdedup dedupe` (read, parse, dedup, write) on a generated sessions
 * JSONL corpus, for exact and exact+fuzzy, against the same pipeline with the pure-JS reference
 * dedup (bench/reference/cce.ts). Each run is a fresh child process, so peak RSS is its own.
 *
 *   npx tsx bench/cli.bench.ts                      # 1 GB corpus (CTXDEDUP_BENCH_MB=1000)
 *   CTXDEDUP_BENCH_MB=200 npx tsx bench/cli.bench.ts
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PassThrough } from 'node:stream';
import type { BenchRow } from './harness.js';

export type { BenchRow };

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(SELF, '..', '..');

interface ChildResult {
  mbPerSec: number;
  sessionsPerSec: number;
  peakRssMb: number;
  seconds: number;
}

/** The pure-JS reference as a per-session engine (CCE rules, keep latest, CCE's tags). */
async function referenceEngine(): Promise<import('../src/cli/dedupe.js').DedupeEngine> {
  const ref = await import('./reference/cce.js');
  return async (messages, options) => {
    const preserve = new Set<unknown>(options.preserve ?? ['system']);
    const start = messages.length;
    const exact = ref.refAnalyzeDuplicates(messages, start, preserve);
    const fuzzy = options.fuzzy ? ref.refAnalyzeFuzzyDuplicates(messages, start, preserve, exact, options.threshold ?? 0.85) : new Map();
    const out = messages.slice();
    const decisions: import('../src/stages/messages.js').MessageDecision[] = [];
    for (const [kind, annotations] of [['exact', exact], ['fuzzy', fuzzy]] as const) {
      for (const [index, a] of annotations) {
        const m = messages[index]!;
        const keepId = messages[a.duplicateOfIndex]!.id;
        const chars = a.contentLength;
        const tag = kind === 'exact' ? `[ctxdedup: duplicate of ${keepId} — ${chars} chars]` : `[ctxdedup: near-duplicate of ${keepId} — ${chars} chars, ~${Math.round((a.similarity ?? 1) * 100)}% match]`;
        out[index] = { ...m, content: tag };
        const before = (m.content as string).length;
        decisions.push({ index, id: m.id, kind, duplicateOfIndex: a.duplicateOfIndex, duplicateOfId: keepId, charsBefore: before, charsAfter: tag.length, charsSaved: before - tag.length });
      }
    }
    decisions.sort((x, y) => x.index - y.index);
    const saved = decisions.reduce((s, d) => s + d.charsSaved, 0);
    return {
      messages: out,
      verbatim: {},
      decisions,
      stats: { messages: messages.length, exactDuplicates: exact.size, nearDuplicates: fuzzy.size, keptInWindow: 0, charsBefore: 0, charsAfter: 0, charsSaved: saved, tokensSaved: 0 },
    };
  };
}

/** Child mode: run the CLI in this process and print the report's throughput. */
async function child(engine: string, fuzzy: boolean, corpus: string, out: string): Promise<void> {
  const { run } = await import('../src/cli/run.js');
  const hooks = engine === 'js' ? { engine: await referenceEngine() } : {};
  const stdout = new PassThrough();
  let text = '';
  stdout.on('data', (c: Buffer) => (text += c.toString()));
  const code = await run(['dedupe', corpus, '-o', out, '--json', ...(fuzzy ? ['--fuzzy'] : [])], { stdin: process.stdin, stdout, stderr: process.stderr }, hooks);
  if (code !== 0) process.exit(code);
  const report = JSON.parse(text) as { throughput: ChildResult };
  process.stdout.write(JSON.stringify(report.throughput) + '\n');
}

function runChild(engine: 'native' | 'js', fuzzy: boolean, corpus: string, out: string): ChildResult {
  const r = spawnSync(process.execPath, ['--import', 'tsx', SELF, '--child', engine, fuzzy ? 'fuzzy' : 'exact', corpus, out], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`child ${engine} ${fuzzy} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop() as string) as ChildResult;
}

/** Generates the corpus and measures the four pipelines. */
export async function run(): Promise<BenchRow[]> {
  const mb = Number(process.env['CTXDEDUP_BENCH_MB'] ?? 1000);
  const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-cli-bench-'));
  try {
    // @ts-expect-error -- plain ESM generator script without types
    const { writeSessionsJsonl } = (await import('../examples/make-corpus.mjs')) as {
      writeSessionsJsonl(path: string, bytes: number): Promise<{ bytes: number; sessions: number }>;
    };
    const corpus = join(dir, 'corpus.jsonl');
    const { sessions } = await writeSessionsJsonl(corpus, mb * 1e6);
    const size = statSync(corpus).size;
    const rows: BenchRow[] = [];
    const hasReference = existsSync(join(ROOT, 'bench', 'reference', 'cce.ts'));
    for (const fuzzy of [false, true]) {
      const native = runChild('native', fuzzy, corpus, join(dir, 'out.jsonl'));
      const baseline = hasReference ? runChild('js', fuzzy, corpus, join(dir, 'out-js.jsonl')) : undefined;
      rows.push({
        suite: 'cli',
        case: `dedupe ${fuzzy ? 'exact+fuzzy' : 'exact'} ${(size / 1e6).toFixed(0)} MB, ${sessions} sessions`,
        native: native.seconds,
        baseline: baseline?.seconds ?? Number.NaN,
        ratio: baseline ? baseline.seconds / native.seconds : Number.NaN,
        mbPerSec: native.mbPerSec,
        peakRssMb: native.peakRssMb,
        note:
          `seconds end to end; native ${native.sessionsPerSec} sessions/s` +
          (baseline ? `; JS reference ${baseline.mbPerSec} MB/s, ${baseline.sessionsPerSec} sessions/s, peak RSS ${baseline.peakRssMb} MB` : '; bench/reference/cce.ts missing: no baseline'),
      });
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  await child(args[1] as string, args[2] === 'fuzzy', args[3] as string, args[4] as string);
} else if (process.argv[1] === SELF) {
  const rows = await run();
  console.table(rows.map((r) => ({ ...r, native: r.native.toFixed(2), baseline: r.baseline?.toFixed(2), ratio: r.ratio?.toFixed(2) })));
}
