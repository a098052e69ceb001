/**
 * Adapters: the latency the AI SDK middleware (`ctxdedup/ai-sdk`) adds to a model call, on a
 * 40-message prompt of about 100 KB (a coding-agent tool loop: system, user, then 19 pairs of a
 * tool call and a file read, a third of them re-reads). Each call runs the middleware's
 * `transformParams` on a fresh prompt array (the AI SDK builds one per step; the strings are the
 * conversation's own), timed one by one; the row reports the wall-clock p99 over 1,000 calls
 * (target < 1 ms), the note p50, p95, the maximum and the load average (on a shared 2-core machine
 * the tail is mostly time the process was not scheduled) and what the prompt saves. There is no
 * pure-JS baseline for this row.
 *
 *   npx tsx bench/adapters.bench.ts
 */
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { dedupeMiddleware, dedupePrompt, type AdapterOptions } from '../src/adapters/ai-sdk.js';
import type { BenchRow } from './harness.js';
import { mulberry32 } from './prng.js';
import { codeBlock } from './text.js';

export type { BenchRow };

const SELF = fileURLToPath(import.meta.url);
const CALLS = 1000;
const WARMUP = 100;

type Part = Record<string, unknown>;
type PromptMessage = { role: string; content: string | Part[] };

/** The 40-message prompt. */
export function agentPrompt(seed = 7): PromptMessage[] {
  const rng = mulberry32(seed);
  const files = Array.from({ length: 13 }, (_, i) => codeBlock(rng, 5000, `f${i}`));
  const prompt: PromptMessage[] = [
    { role: 'system', content: 'You are a coding agent. Read files with the readFile tool before editing them.' },
    { role: 'user', content: [{ type: 'text', text: 'Find why the cache key changes between runs and fix it.' }] },
  ];
  for (let k = 0; k < 19; k++) {
    const file = k < 13 ? k : rng.int(13);
    const id = `call-${k}`;
    prompt.push({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: id, toolName: 'readFile', input: { path: `src/f${file}.ts` } }] });
    prompt.push({ role: 'tool', content: [{ type: 'tool-result', toolCallId: id, toolName: 'readFile', output: { type: 'text', value: files[file] } }] });
  }
  return prompt;
}

function chars(prompt: PromptMessage[]): number {
  let n = 0;
  for (const m of prompt) {
    if (typeof m.content === 'string') n += m.content.length;
    else for (const p of m.content) n += JSON.stringify(p).length;
  }
  return n;
}

/** Wall times (ms, sorted) of the middleware's `transformParams` on fresh prompt arrays. */
async function latencies(prompt: PromptMessage[], options: AdapterOptions): Promise<number[]> {
  const middleware = dedupeMiddleware(options) as unknown as {
    transformParams: (o: { params: { prompt: unknown }; type: 'generate' }) => PromiseLike<{ prompt: unknown }>;
  };
  const times: number[] = [];
  for (let i = 0; i < WARMUP + CALLS; i++) {
    const params = { prompt: prompt.map((m) => ({ ...m, content: Array.isArray(m.content) ? m.content.slice() : m.content })) };
    const start = performance.now();
    await middleware.transformParams({ params, type: 'generate' });
    const ms = performance.now() - start;
    if (i >= WARMUP) times.push(ms);
  }
  return times.sort((a, b) => a - b);
}

export async function run(): Promise<BenchRow[]> {
  const prompt = agentPrompt();
  const kb = chars(prompt) / 1000;
  const rows: BenchRow[] = [];
  for (const [label, options] of [
    ['blocks on (default)', {}],
    ['exact only (blocks: false)', { blocks: false }],
  ] as const) {
    const times = await latencies(prompt, options);
    const p = (q: number): number => times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)] as number;
    const { stats: report } = dedupePrompt(prompt, options);
    rows.push({
      suite: 'adapters',
      case: `AI SDK middleware, ${label}: added latency per call (${prompt.length} messages, ${kb.toFixed(0)} KB prompt), p99 of ${CALLS}`,
      native: p(0.99),
      baseline: null,
      ratio: null,
      unit: 'ms',
      mbPerSec: report.charsBefore / 1e6 / (p(0.5) / 1000),
      note: `p50 ${p(0.5).toFixed(3)} ms, p95 ${p(0.95).toFixed(3)} ms, max ${p(1).toFixed(3)} ms; load average ${loadavg()[0]?.toFixed(1)}; target p99 < 1 ms; saves ${report.charsSaved} of ${report.charsBefore} chars (${report.rewritten} texts rewritten)`,
    });
  }
  return rows;
}

if (process.argv[1] === SELF) {
  const rows = await run();
  console.table(rows.map((r) => ({ ...r, native: r.native.toFixed(3) })));
}
