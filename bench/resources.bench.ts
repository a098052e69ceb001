/**
 * Resource ledger: a 200-turn synthetic agent session with about 5 MB of resource content
 * (attachments, repeated file reads, edits, an opted-out test runner, a compaction), replayed by
 * the native-backed `ResourceLedger` and by a pure-JS ledger with the same rules that hashes each
 * block with `node:crypto`, in the same run. Also reports what the session saves (o200k tokens).
 *
 *   npx tsx bench/resources.bench.ts
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import b from 'benny';
import {
  checksums as resourceChecksums,
  DEFAULT_RESOURCE_TEMPLATE,
  ResourceLedger,
  describeLocation,
  type ContentBlock,
  type DeliveryLocation,
  type ResourceLedgerOptions,
} from '../src/stages/resources.js';
import { freshCopy, mulberry32, type Rng } from './prng.js';
import { codeBlock, prose } from './text.js';
import type { BenchRow } from './harness.js';

export type { BenchRow };

const SELF = fileURLToPath(import.meta.url);
const TURNS = 200;
const TARGET_BYTES = 5 * 1024 * 1024;
const TOOLS: ResourceLedgerOptions['tools'] = { run_tests: { deduplicate: false } };

type SessionEvent =
  | { kind: 'attach'; turn: number; uri: string; content: string | Uint8Array }
  | { kind: 'tool'; turn: number; tool: string; callId: string; blocks: ContentBlock[] }
  | { kind: 'compact'; before: number };

interface Session {
  events: SessionEvent[];
  resourceBytes: number;
  resourceBlocks: number;
}

interface FileState {
  uri: string;
  content: string | Uint8Array;
}

function makeFile(rng: Rng, i: number): FileState {
  const size = Math.round(2000 * 20 ** rng.next()); // log-uniform 2 KB .. 40 KB
  if (i % 15 === 14) {
    const bytes = new Uint8Array(size);
    for (let k = 0; k < size; k++) bytes[k] = rng.int(256);
    return { uri: `file:///repo/assets/image${i}.png`, content: bytes };
  }
  if (i % 6 === 5) {
    const text = `${prose(rng, size).replace(/e /g, 'é ').replace(/\. /g, '. — ')}\n✓ done 🚀\n`;
    return { uri: `file:///repo/docs/guide${i}.md`, content: text };
  }
  return { uri: `file:///repo/src/module${i}.ts`, content: codeBlock(rng, size, `m${i}`).slice(0, size) };
}

const sizeOf = (c: string | Uint8Array): number => (typeof c === 'string' ? Buffer.byteLength(c) : c.byteLength);
const copy = (c: string | Uint8Array): string | Uint8Array => (typeof c === 'string' ? freshCopy(c) : c.slice());

/** The deterministic session: every delivered content is a fresh string, as a tool would return it. */
export function session(seed = 42): Session {
  const rng = mulberry32(seed);
  const files = Array.from({ length: 80 }, (_, i) => makeFile(rng, i));
  const testLog = (pass: number) => `running 120 tests\n${'test suite::case ... ok\n'.repeat(110)}result: ${pass} passed\n`;
  const events: SessionEvent[] = [];
  const recent: number[] = [];
  let resourceBytes = 0;
  let resourceBlocks = 0;
  let call = 0;
  const pickFile = (): number => {
    const i = recent.length > 0 && rng.chance(0.7) ? rng.pick(recent.slice(-12)) : rng.int(files.length);
    recent.push(i);
    return i;
  };
  for (let turn = 0; turn < TURNS; turn++) {
    if (turn === 0 || turn === 80) {
      for (let k = 0; k < 3; k++) {
        const f = files[pickFile()] as FileState;
        events.push({ kind: 'attach', turn, uri: f.uri, content: copy(f.content) });
        resourceBytes += sizeOf(f.content);
      }
    }
    if (turn === 120) events.push({ kind: 'compact', before: 100 });
    const remainingTurns = TURNS - turn;
    const budget = ((TARGET_BYTES - resourceBytes) / remainingTurns) * (0.5 + rng.next());
    let spent = 0;
    while (spent < budget) {
      const callId = `call_${++call}`;
      const r = rng.next();
      const blocks: ContentBlock[] = [];
      let tool = 'read_file';
      if (r < 0.15) {
        tool = 'run_tests';
        blocks.push({ type: 'resource', uri: 'test://results', content: testLog(rng.chance(0.8) ? 120 : 119) });
      } else {
        if (r < 0.3) tool = 'grep';
        blocks.push({ type: 'text', text: `${tool} output for turn ${turn}` });
        const n = tool === 'grep' ? 1 : rng.range(1, 3);
        for (let k = 0; k < n; k++) {
          const i = pickFile();
          const f = files[i] as FileState;
          if (typeof f.content === 'string' && rng.chance(0.06)) f.content += `\n// edit at turn ${turn}\n`;
          blocks.push({ type: 'resource', uri: f.uri, content: copy(f.content) });
        }
      }
      for (const block of blocks) {
        if (block.type === 'resource') {
          const bytes = sizeOf(block.content);
          spent += bytes;
          resourceBytes += bytes;
          resourceBlocks++;
        }
      }
      events.push({ kind: 'tool', turn, tool, callId, blocks });
    }
  }
  return { events, resourceBytes, resourceBlocks };
}

interface Totals {
  matched: number;
  bytesSaved: number;
  tokensSaved: number;
}

/** Replays the session through the native-backed ledger. */
function replayNative(s: Session, options: ResourceLedgerOptions): Totals {
  const ledger = new ResourceLedger({ ...options, tools: TOOLS });
  for (const e of s.events) {
    if (e.kind === 'attach') ledger.recordAttachment(e);
    else if (e.kind === 'compact') ledger.compactBefore(e.before);
    else ledger.process(e);
  }
  const t = ledger.totals;
  return { matched: t.matched, bytesSaved: t.bytesSaved, tokensSaved: t.tokensSaved };
}

/** Valid UTF-8 as text, other bytes as base64 (the ledger's rule). */
function textOf(bytes: Uint8Array): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return Buffer.from(bytes).toString('base64');
  }
}

interface JsDelivery {
  sha256: string;
  location: DeliveryLocation;
}

/**
 * The pure-JS baseline: the same rules (minBytes in UTF-8 bytes, exact URI + SHA-256, earliest
 * delivery inside the lookback, opted-out tools recorded, references only when shorter, token
 * accounting), hashing each block with `node:crypto`.
 */
class JsLedger {
  readonly byUri = new Map<string, Map<string, JsDelivery[]>>();
  readonly tokenCache = new Map<string, number>();
  turn = -1;
  totals: Totals = { matched: 0, bytesSaved: 0, tokensSaved: 0 };
  constructor(
    readonly minBytes: number,
    readonly lookback: number,
    readonly optedOut: Set<string>,
    readonly count: (text: string) => number,
  ) {}

  #checkTurn(turn: number): void {
    if (!Number.isInteger(turn) || turn < 0 || turn < this.turn) throw new RangeError(`bad turn ${turn}`);
  }

  #checksum(content: string | Uint8Array): { bytes: number; sha256?: string } {
    if (typeof content === 'string' && !content.isWellFormed()) throw new TypeError('lone surrogate: pass bytes');
    const bytes = typeof content === 'string' ? Buffer.byteLength(content) : content.byteLength;
    if (bytes <= this.minBytes) return { bytes };
    return { bytes, sha256: createHash('sha256').update(content).digest('hex') };
  }

  #add(uri: string, d: JsDelivery): void {
    let m = this.byUri.get(uri);
    if (m === undefined) this.byUri.set(uri, (m = new Map()));
    const list = m.get(d.sha256);
    if (list === undefined) m.set(d.sha256, [d]);
    else list.push(d);
  }

  attach(uri: string, content: string | Uint8Array, turn: number): void {
    this.#checkTurn(turn);
    const { sha256 } = this.#checksum(content);
    this.turn = turn;
    if (sha256 !== undefined) this.#add(uri, { sha256, location: { kind: 'attachment', turn } });
  }

  process(turn: number, tool: string, callId: string, blocks: readonly ContentBlock[]): ContentBlock[] {
    this.#checkTurn(turn);
    const out = blocks.slice();
    const location: DeliveryLocation = { kind: 'tool', turn, tool, callId };
    const pending: { uri: string; d: JsDelivery }[] = [];
    blocks.forEach((block, index) => {
      if (block.type === 'text') return;
      if (block.type !== 'resource' || typeof block.uri !== 'string') throw new TypeError(`blocks[${index}]`);
      const { bytes, sha256 } = this.#checksum(block.content);
      if (sha256 === undefined) return;
      const list = this.byUri.get(block.uri)?.get(sha256);
      let original = list?.find((d) => turn - d.location.turn <= this.lookback);
      original ??= pending.find((p) => p.uri === block.uri && p.d.sha256 === sha256)?.d;
      if (this.optedOut.has(tool) || original === undefined) {
        pending.push({ uri: block.uri, d: { sha256, location } });
        return;
      }
      const text = DEFAULT_RESOURCE_TEMPLATE.replace('{uri}', block.uri)
        .replace('{checksum}', `sha256:${sha256.slice(0, 12)}`)
        .replace('{location}', describeLocation(original.location));
      const refBytes = Buffer.byteLength(text);
      if (refBytes >= bytes) {
        pending.push({ uri: block.uri, d: { sha256, location } });
        return;
      }
      let tokens = this.tokenCache.get(sha256);
      if (tokens === undefined) {
        tokens = this.count(typeof block.content === 'string' ? block.content : textOf(block.content));
        this.tokenCache.set(sha256, tokens);
      }
      out[index] = { type: 'text', text };
      this.totals.matched++;
      this.totals.bytesSaved += bytes - refBytes;
      this.totals.tokensSaved += tokens - this.count(text);
    });
    this.turn = turn;
    for (const p of pending) this.#add(p.uri, p.d);
    return out;
  }

  compactBefore(before: number): void {
    for (const [uri, m] of this.byUri) {
      for (const [sha, list] of m) {
        const kept = list.filter((d) => d.location.turn >= before);
        if (kept.length === 0) m.delete(sha);
        else m.set(sha, kept);
      }
      if (m.size === 0) this.byUri.delete(uri);
    }
  }
}

function replayJs(s: Session, count: (text: string) => number): Totals {
  const ledger = new JsLedger(300, 30, new Set(['run_tests']), count);
  for (const e of s.events) {
    if (e.kind === 'attach') ledger.attach(e.uri, e.content, e.turn);
    else if (e.kind === 'compact') ledger.compactBefore(e.before);
    else ledger.process(e.turn, e.tool, e.callId, e.blocks);
  }
  return ledger.totals;
}

/** Each tool response's resource contents, for the checksum-only comparison. */
function responses(s: Session): (string | Uint8Array)[][] {
  const out: (string | Uint8Array)[][] = [];
  for (const e of s.events) {
    if (e.kind === 'attach') out.push([e.content]);
    if (e.kind === 'tool') out.push(e.blocks.flatMap((bl) => (bl.type === 'resource' ? [bl.content] : [])));
  }
  return out;
}

/**
 * How much faster the session's hashing could be with `lanes` messages hashed at once and no
 * other cost: each response's hashed blocks are spread over the lanes (largest first, each to the
 * least loaded lane), and a response costs its most loaded lane.
 */
function laneBound(batches: (string | Uint8Array)[][], lanes: number): number {
  let serial = 0;
  let parallel = 0;
  for (const batch of batches) {
    const sizes = batch.map(sizeOf).filter((n) => n > 300);
    sizes.sort((a, b) => b - a);
    const load = new Array<number>(lanes).fill(0);
    for (const size of sizes) {
      const least = load.indexOf(Math.min(...load));
      load[least] = (load[least] as number) + size;
    }
    serial += sizes.reduce((a, b) => a + b, 0);
    parallel += Math.max(...load);
  }
  return serial / parallel;
}

async function compare(name: string, nativeFn: () => void, baselineFn: () => void): Promise<{ native: number; baseline: number }> {
  const summary = await b.suite(
    name,
    b.configure({ cases: { minSamples: 10, maxTime: 3 } }),
    b.add('native', nativeFn),
    b.add('baseline (node:crypto)', baselineFn),
    b.cycle(),
  );
  const [n, j] = summary.results;
  return { native: n?.ops ?? 0, baseline: j?.ops ?? 0 };
}

/** Runs the resource-ledger suite and returns its rows. */
export async function run(): Promise<BenchRow[]> {
  const s = session();
  const mb = s.resourceBytes / 1e6;
  const estimate = (text: string): number => Math.ceil(text.length / 4);

  // Both implementations must agree before their speed means anything.
  const a = replayNative(s, { countTokens: estimate });
  const c = replayJs(s, estimate);
  if (JSON.stringify(a) !== JSON.stringify(c)) throw new Error(`native ${JSON.stringify(a)} != baseline ${JSON.stringify(c)}`);
  const real = replayNative(s, {}); // o200k_base, the default counter
  const savedPct = ((real.bytesSaved / s.resourceBytes) * 100).toFixed(1);
  const tokenNote = `${s.resourceBlocks} resource blocks, ${mb.toFixed(2)} MB; ${real.matched} replaced by references, ${(real.bytesSaved / 1e6).toFixed(2)} MB (${savedPct}%) and ${real.tokensSaved} o200k tokens saved`;

  const session_ = await compare(
    'resources: 200-turn session replay',
    () => replayNative(s, { countTokens: estimate }),
    () => replayJs(s, estimate),
  );
  const checksumRow = async (batches: (string | Uint8Array)[][]) =>
    compare(
      'resources: checksums of every response (one native call per response vs one hash per block)',
      () => {
        for (const batch of batches) resourceChecksums(batch, 300);
      },
      () => {
        for (const batch of batches) {
          for (const content of batch) {
            const bytes = typeof content === 'string' ? Buffer.byteLength(content) : content.byteLength;
            if (bytes > 300) createHash('sha256').update(content).digest('hex');
          }
        }
      },
    );
  const checksums = await checksumRow(responses(s));
  const singleBlock = responses(s).filter((r) => r.filter((c) => sizeOf(c) > 300).length === 1).length;
  const laneNote = `${singleBlock} of ${responses(s).length} responses hash one block; ideal speed-up of hashing with 2 lanes ${laneBound(responses(s), 2).toFixed(2)}×, 4 lanes ${laneBound(responses(s), 4).toFixed(2)}×`;
  // The same 5 MB as 1 KB blocks, 10 per response: where per-block overhead dominates.
  const rng = mulberry32(7);
  const small = Array.from({ length: Math.round(s.resourceBytes / 1024 / 10) }, () =>
    Array.from({ length: 10 }, () => freshCopy(codeBlock(rng, 1024).slice(0, 1024))),
  );
  const smallChecksums = await checksumRow(small);
  // Where the hash itself is the whole cost: two 4 MB contents in one response. One SHA-256 stream
  // is bound by the latency of the CPU's round instruction on both sides; native interleaves two.
  const big = [0, 1].map((k) => Uint8Array.from({ length: 4 << 20 }, (_, i) => (i * 31 + k) & 0xff));
  const bigChecksums = await checksumRow([big]);
  return [
    {
      suite: 'resources',
      case: `session replay, ${TURNS} turns, ${mb.toFixed(1)} MB (token estimate chars/4 in both)`,
      native: session_.native,
      baseline: session_.baseline,
      ratio: session_.native / session_.baseline,
      mbPerSec: session_.native * mb,
      note: `sessions/s; ${tokenNote}`,
    },
    {
      suite: 'resources',
      case: 'checksums only, batched per response',
      native: checksums.native,
      baseline: checksums.baseline,
      ratio: checksums.native / checksums.baseline,
      mbPerSec: checksums.native * mb,
      note: `sessions/s; ${laneNote}`,
    },
    {
      suite: 'resources',
      case: `checksums only, same volume as 1 KB blocks, 10 per response`,
      native: smallChecksums.native,
      baseline: smallChecksums.baseline,
      ratio: smallChecksums.native / smallChecksums.baseline,
      mbPerSec: smallChecksums.native * mb,
      note: 'runs/s',
    },
    {
      suite: 'resources',
      case: 'checksums only, one response of two 4 MB blocks',
      native: bigChecksums.native,
      baseline: bigChecksums.baseline,
      ratio: bigChecksums.native / bigChecksums.baseline,
      mbPerSec: bigChecksums.native * 2 * 4.194304,
      note: 'responses/s; MB/s here = 10^6 bytes hashed per second',
    },
  ];
}

if (process.argv[1] === SELF) {
  const rows = await run();
  console.table(
    rows.map((r) => ({ ...r, native: r.native.toFixed(2), baseline: r.baseline?.toFixed(2), ratio: r.ratio?.toFixed(2), mbPerSec: r.mbPerSec?.toFixed(0) })),
  );
}
