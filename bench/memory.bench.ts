/**
 * Memory batch clustering (issue 5): 20k memories with 384-dimensional embeddings, clustered at
 * cosine ≥ 0.90 with single linkage. Native (`cosineClusters`: SIMD f32 filter on both cores,
 * exact f64 rescoring, union-find) against a pure-JS all-pairs cosine with precomputed norms and
 * a JS union-find, in the same run. Both must find the same clusters or the suite fails.
 *
 * The corpus is seeded: 20k memories spread over topics of 1–7 members; each member is its
 * topic's random direction plus Gaussian noise whose size varies by topic, so within-topic
 * similarities range from about 0.85 to 0.98 and cross-topic ones stay near 0.
 * @module
 */
import { native } from '../src/native.js';
import { InMemoryStore, MemoryDeduplicator } from '../src/memory/index.js';
import { formatNumber, type BenchRow } from './harness.js';
import { mulberry32, type Rng } from './prng.js';

const DIM = 384;
const COUNT = 20_000;
const LOWER = 0.9;
const NATIVE_RUNS = 3;

function gaussian(rng: Rng): number {
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  return Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
}

/** Row-major embeddings of the seeded corpus. */
export function memoryCorpus(count: number, dim: number, seed = 5): Float32Array {
  const rng = mulberry32(seed);
  const out = new Float32Array(count * dim);
  const base = new Float64Array(dim);
  let row = 0;
  while (row < count) {
    for (let k = 0; k < dim; k++) base[k] = gaussian(rng);
    const norm = Math.hypot(...base);
    const members = 1 + Math.floor(rng.next() * 7);
    const sigma = (0.006 + rng.next() * 0.014) * 1;
    for (let m = 0; m < members && row < count; m++, row++) {
      for (let k = 0; k < dim; k++) out[row * dim + k] = base[k]! / norm + sigma * gaussian(rng);
    }
  }
  return out;
}

/** The baseline: what a careful pure-JS implementation does. */
function jsClusters(data: Float32Array, dim: number, threshold: number): number[][] {
  const n = data.length / dim;
  const unit = new Float64Array(data.length);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < dim; k++) s += data[i * dim + k]! * data[i * dim + k]!;
    const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
    for (let k = 0; k < dim; k++) unit[i * dim + k] = data[i * dim + k]! * inv;
  }
  const parent = Int32Array.from({ length: n }, (_, i) => i);
  const find = (x: number): number => {
    while (parent[x] !== x) x = parent[x] = parent[parent[x]!]!;
    return x;
  };
  for (let i = 0; i < n; i++) {
    const a = i * dim;
    for (let j = i + 1; j < n; j++) {
      const b = j * dim;
      let dot = 0;
      for (let k = 0; k < dim; k++) dot += unit[a + k]! * unit[b + k]!;
      if (dot >= threshold) {
        const ra = find(i);
        const rb = find(j);
        if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
      }
    }
  }
  const groups = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    const r = find(i);
    const g = groups.get(r);
    if (g) g.push(i);
    else groups.set(r, [i]);
  }
  return [...groups.values()].filter((g) => g.length > 1).sort((x, y) => x[0]! - y[0]!);
}

function nativeClusters(data: Float32Array, dim: number, threshold: number): number[][] {
  const c = native.cosineClusters(data, dim, threshold, 'single');
  const out: number[][] = [];
  for (let i = 0; i + 1 < c.offsets.length; i++) out.push(Array.from(c.members.subarray(c.offsets[i]!, c.offsets[i + 1]!)));
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

function timed<T>(fn: () => T): [T, number] {
  const start = performance.now();
  const value = fn();
  return [value, performance.now() - start];
}

export async function run(): Promise<BenchRow[]> {
  const data = memoryCorpus(COUNT, DIM);
  const nativeTimes: number[] = [];
  let found: number[][] = [];
  for (let r = 0; r < NATIVE_RUNS; r++) {
    const [clusters, ms] = timed(() => nativeClusters(data, DIM, LOWER));
    found = clusters;
    nativeTimes.push(ms);
    console.log(`  memory / native clusters: ${formatNumber(ms)} ms`);
  }
  const [expected, jsMs] = timed(() => jsClusters(data, DIM, LOWER));
  console.log(`  memory / pure-JS clusters: ${formatNumber(jsMs)} ms`);
  if (JSON.stringify(found) !== JSON.stringify(expected)) {
    throw new Error('bench: native and pure-JS clusters differ; the comparison would be void');
  }
  const nativeMs = median(nativeTimes);
  const pairs = (COUNT * (COUNT - 1)) / 2;

  // End to end through the public API: list the store, cluster off-thread, build the report.
  const store = new InMemoryStore();
  for (let i = 0; i < COUNT; i++) {
    await store.add({ id: `m${String(i).padStart(5, '0')}`, content: `memory ${i}`, timestamp: i, embedding: data.subarray(i * DIM, (i + 1) * DIM) });
  }
  const dedup = new MemoryDeduplicator({ store, upperThreshold: 0.95, lowerThreshold: LOWER });
  const start = performance.now();
  const report = await dedup.dedupeAll({ dryRun: true });
  const apiMs = performance.now() - start;
  console.log(`  memory / dedupeAll dry run: ${formatNumber(apiMs)} ms, ${report.clusters.length} clusters`);

  const note = `${COUNT} × ${DIM}-dim, cosine ≥ ${LOWER}, ${found.length} clusters, ${formatNumber(pairs / 1e6)} M pairs`;
  return [
    { suite: 'memory', case: 'batch clustering, native vs pure-JS all-pairs', native: nativeMs, baseline: jsMs, ratio: jsMs / nativeMs, unit: 'ms', note },
    {
      suite: 'memory',
      case: 'dedupeAll({ dryRun }) end to end (in-memory store)',
      native: apiMs,
      baseline: jsMs,
      ratio: jsMs / apiMs,
      unit: 'ms',
      note: 'baseline: the same pure-JS clustering alone',
    },
  ];
}
