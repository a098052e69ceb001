/**
 * Ingestion throughput of `ctxdedup serve`: a bounded load test (autocannon, loopback only, fixed
 * duration) posting batches of 100 items of 1 KB (about 1 in 5 a repeat of earlier content), for
 * the SQLite store and for Redis, against the same server with the pure-JS hashing path
 * (node:crypto + Map, `--hashing js`) in the same run. Each server is a fresh child process, so its
 * peak RSS is its own. A second suite times batch hashing alone, in process.
 *
 *   npx tsx bench/ingest.bench.ts                          # 10 s per server, 10 connections
 *   CTXDEDUP_BENCH_SECONDS=5 npx tsx bench/ingest.bench.ts
 *
 * Redis rows need redis-server on PATH (started on a free 127.0.0.1 port, no persistence).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { hashBatch, hashBatchJs } from '../src/ingest/hash.js';
import type { BenchRow } from './harness.js';

export type { BenchRow };

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(SELF, '..', '..');
const SECONDS = Number(process.env['CTXDEDUP_BENCH_SECONDS'] ?? 10);
const CONNECTIONS = Number(process.env['CTXDEDUP_BENCH_CONNECTIONS'] ?? 10);
const BATCH = 100;
const ITEM_BYTES = 1024;

/** A deterministic 1 KB filler (printable ASCII), varied per item by its prefix. */
const FILLER = (() => {
  let x = 0x9e3779b9;
  let s = '';
  while (s.length < ITEM_BYTES) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    s += String.fromCharCode(32 + ((x >>> 0) % 95));
  }
  return s;
})();

/** Item `n` of the stream: every 5th repeats the content of an earlier item. */
function item(n: number, run: string): { id: string; content: string } {
  const source = n % 5 === 4 ? Math.floor(n / 2) : n;
  const prefix = `${run}:${source}:`;
  return { id: `${run}-${n}`, content: prefix + FILLER.slice(prefix.length) };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function waitFor(child: ChildProcess, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`not ready:\n${seen}`)), 20_000);
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      const match = seen.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}:\n${seen}`));
    });
  });
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Peak resident set (VmHWM) of a live process in MB, Linux only. */
function peakRssMb(pid: number | undefined): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]);
    return Number.isFinite(kb) ? Math.round(kb / 1024) : undefined;
  } catch {
    return undefined;
  }
}

interface LoadResult {
  itemsPerSec: number;
  p50: number;
  p99: number;
  peakRssMb: number | undefined;
  newShare: number;
}

/** Starts a server on `store` with `hashing`, loads it for SECONDS, stops it. */
async function load(store: string, hashing: 'native' | 'js', run: string): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'server', 'main.ts'), '--port', '0', '--store', store, '--hashing', hashing], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const url = (await waitFor(child, /listening on (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
    let n = 0;
    const result = await autocannon({
      url,
      connections: CONNECTIONS,
      duration: SECONDS,
      requests: [
        {
          method: 'POST',
          path: `/v1/namespaces/${run}/items`,
          headers: { 'content-type': 'application/json' },
          setupRequest: (request) => {
            const items = Array.from({ length: BATCH }, () => item(n++, run));
            return { ...request, body: JSON.stringify(items) };
          },
        },
      ],
    });
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${store}/${hashing}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const fresh = Number(/ctxdedup_ingest_items_total\{status="new"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    const dup = Number(/ctxdedup_ingest_items_total\{status="duplicate"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    return {
      itemsPerSec: (result['2xx'] * BATCH) / SECONDS,
      p50: result.latency.p50,
      p99: result.latency.p99,
      peakRssMb: peakRssMb(child.pid),
      newShare: fresh / Math.max(1, fresh + dup),
    };
  } finally {
    await stop(child);
  }
}

async function startRedis(): Promise<{ url: string; stop(): Promise<void> } | undefined> {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) return undefined;
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await waitFor(child, /Ready to accept connections/);
  return { url: `redis://127.0.0.1:${port}`, stop: () => stop(child) };
}

function row(name: string, native: LoadResult, baseline: LoadResult): BenchRow {
  const r: BenchRow = {
    suite: 'ingest',
    case: name,
    native: Math.round(native.itemsPerSec),
    baseline: Math.round(baseline.itemsPerSec),
    ratio: native.itemsPerSec / baseline.itemsPerSec,
    mbPerSec: (native.itemsPerSec * ITEM_BYTES) / 1e6,
    note:
      `items/s; batch p50/p99 ${native.p50}/${native.p99} ms native, ${baseline.p50}/${baseline.p99} ms JS; ` +
      `${Math.round(native.newShare * 100)}% new; ${CONNECTIONS} connections, ${SECONDS} s`,
  };
  if (native.peakRssMb !== undefined) r.peakRssMb = native.peakRssMb;
  return r;
}

/** Batch hashing alone (100 × 1 KB per call), in process: items/s native vs node:crypto + Map. */
async function hashingRows(): Promise<BenchRow[]> {
  const batches = Array.from({ length: 200 }, (_, b) => Array.from({ length: BATCH }, (_, i) => item(b * BATCH + i, 'h').content));
  const units = BATCH * ITEM_BYTES;
  const time = async (f: (batch: string[]) => unknown): Promise<number> => {
    for (const batch of batches.slice(0, 20)) await f(batch);
    const start = process.hrtime.bigint();
    let rounds = 0;
    while (process.hrtime.bigint() - start < 1_000_000_000n) {
      for (const batch of batches) await f(batch);
      rounds++;
    }
    return (rounds * batches.length * BATCH) / (Number(process.hrtime.bigint() - start) / 1e9);
  };
  const nativeSync = await time((batch) => hashBatch(batch, units, 'native', Infinity));
  const nativeAsync = await time((batch) => hashBatch(batch, units, 'native', 0));
  const js = await time((batch) => hashBatchJs(batch));
  return [
    { suite: 'ingest-hash', case: 'sha256 + in-batch grouping, 100 × 1 KB, sync', native: Math.round(nativeSync), baseline: Math.round(js), ratio: nativeSync / js, mbPerSec: (nativeSync * ITEM_BYTES) / 1e6, note: 'items/s' },
    { suite: 'ingest-hash', case: 'sha256 + in-batch grouping, 100 × 1 KB, worker thread', native: Math.round(nativeAsync), baseline: Math.round(js), ratio: nativeAsync / js, mbPerSec: (nativeAsync * ITEM_BYTES) / 1e6, note: 'items/s (off the main thread)' },
  ];
}

/** Runs the ingestion suites and returns their rows. */
export async function run(): Promise<BenchRow[]> {
  const rows = await hashingRows();
  const dir = mkdtempSync(join(tmpdir(), 'ctxdedup-bench-ingest-'));
  try {
    const sqliteNative = await load(`sqlite:${join(dir, 'native.sqlite')}`, 'native', 'sn');
    const sqliteJs = await load(`sqlite:${join(dir, 'js.sqlite')}`, 'js', 'sj');
    rows.push(row('serve, SQLite store, 100 × 1 KB per batch', sqliteNative, sqliteJs));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const redis = await startRedis();
  if (redis === undefined) {
    console.warn('ingest bench: redis-server not found, skipping the Redis rows');
  } else {
    try {
      const redisNative = await load(redis.url, 'native', 'rn');
      const redisJs = await load(redis.url, 'js', 'rj');
      rows.push(row('serve, Redis store, 100 × 1 KB per batch', redisNative, redisJs));
    } finally {
      await redis.stop();
    }
  }
  return rows;
}

if (process.argv[1] === SELF) {
  const rows = await run();
  console.table(rows.map((r) => ({ ...r, ratio: r.ratio === null ? null : Number(r.ratio.toFixed(2)), mbPerSec: r.mbPerSec?.toFixed(1) })));
}
