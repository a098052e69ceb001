/**
 * `ctxdedup dedupe --jobs N`: worker threads must not change a single output byte, report entry
 * or error. Each case runs once on the main thread with the default batch size and once on two
 * workers with tiny batches (many jobs in flight, completing out of order), then compares.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM generator script without types
import { writeSampleCorpus, makePool, makeSession, rng, sessionRecord, toAgentJsonl, toOpenAI } from '../../examples/make-corpus.mjs';
import { stageEngine } from '../../src/cli/dedupe-session.js';
import type { DedupeReport } from '../../src/cli/report.js';
import { cli, tempDir, type Ran } from '../support/cli-helpers.js';

/** Small enough that every file of a few sessions becomes several jobs. */
const TINY_BATCH = 4096;

function tree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.set(relative(dir, join(d, e.name)), readFileSync(join(d, e.name)));
    }
  };
  walk(dir);
  return out;
}

/** The report without what legitimately differs between runs (timing, memory). */
function stable(r: Ran): Omit<DedupeReport, 'throughput'> & { bytes: number[] } {
  const report = JSON.parse(r.stdout) as DedupeReport;
  const { throughput, ...rest } = report;
  return { ...rest, bytes: [throughput.bytesIn, throughput.bytesParsed, throughput.bytesOut] };
}

let tmp: { dir: string; cleanup: () => void };

beforeAll(() => {
  tmp = tempDir('ctxdedup-jobs-');
});
afterAll(() => tmp.cleanup());

/** Runs the same dedupe in-process and on two workers; returns both runs and output trees. */
async function both(input: string, flags: string[], name: string): Promise<{ one: Ran; two: Ran; outOne: string; outTwo: string }> {
  const outOne = join(tmp.dir, `${name}-1`);
  const outTwo = join(tmp.dir, `${name}-2`);
  const one = await cli(['dedupe', input, '-o', outOne, '--json', '--jobs', '1', '--verbatim', `${outOne}.verbatim.jsonl`, ...flags]);
  const two = await cli(['dedupe', input, '-o', outTwo, '--json', '--jobs', '2', '--verbatim', `${outTwo}.verbatim.jsonl`, ...flags], '', {
    batchBytes: TINY_BATCH,
  });
  return { one, two, outOne, outTwo };
}

function expectSame({ one, two, outOne, outTwo }: { one: Ran; two: Ran; outOne: string; outTwo: string }): void {
  expect(one.code, one.stderr).toBe(0);
  expect(two.code, two.stderr).toBe(0);
  expect(stable(two)).toEqual(stable(one));
  const a = tree(outOne);
  const b = tree(outTwo);
  expect([...b.keys()]).toEqual([...a.keys()]);
  for (const [file, bytes] of a) expect(b.get(file)?.equals(bytes), file).toBe(true);
  expect(readFileSync(`${outTwo}.verbatim.jsonl`).equals(readFileSync(`${outOne}.verbatim.jsonl`))).toBe(true);
}

describe('--jobs 1 and --jobs 2 agree byte for byte', () => {
  it('on the sample corpus (exact, fuzzy, cross-session)', async () => {
    const corpus = join(tmp.dir, 'sample');
    writeSampleCorpus(corpus);
    const exact = await both(corpus, [], 'sample-exact');
    expectSame(exact);
    expect(stable(exact.one).exactDuplicates).toBeGreaterThan(0);
    const all = await both(corpus, ['--near', '--cross-session', '--keep', 'earliest'], 'sample-all');
    expectSame(all);
    expect(stable(all.one).crossSessionDuplicates).toBeGreaterThan(0);
  }, 120_000);

  it('on mixed formats, odd layouts and bad lines skipped with --on-error skip', async () => {
    const dir = join(tmp.dir, 'mixed');
    mkdirSync(dir);
    const pool = makePool(3);
    const rand = rng(3);
    const record = (i: number): string => sessionRecord(makeSession(rand, pool, 14), `m${i}`);
    // Sessions JSONL: a malformed line, a blank line, a line that is not a session record, CRLF.
    const lines = Array.from({ length: 30 }, (_, i) => record(i));
    lines.splice(7, 0, '{"session": "broken", "messages": [');
    lines.splice(12, 0, '   ');
    lines.splice(20, 0, '{"session": "no messages"}');
    writeFileSync(join(dir, 'a-sessions.jsonl'), `${lines.join('\r\n')}\r\n`);
    // The first line is malformed: the format is decided by the second.
    writeFileSync(join(dir, 'b-late.jsonl'), ['{oops', ...Array.from({ length: 8 }, (_, i) => record(100 + i))].join('\n'));
    // Pretty-printed sessions with spaces and a BOM: only the replaced strings may change.
    const spaced = Array.from({ length: 6 }, (_, i) =>
      JSON.stringify(JSON.parse(record(200 + i)), null, 0)
        .replace(/":/g, '": ')
        .replace(/,"/g, ', "'),
    );
    writeFileSync(join(dir, 'c-spaced.jsonl'), `\uFEFF${spaced.join('\n')}\n`);
    // An agent log with a malformed event, a gzipped sessions file, an OpenAI document, a bad document.
    const agent = (toAgentJsonl(makeSession(rand, pool, 20), 'agent-1', rand) as string).split('\n');
    agent.splice(4, 0, '{"type": "user", "message": ');
    writeFileSync(join(dir, 'd-agent.jsonl'), agent.join('\n'));
    writeFileSync(join(dir, 'e-archive.jsonl.gz'), gzipSync(Buffer.from(`${Array.from({ length: 10 }, (_, i) => record(300 + i)).join('\n')}\n`)));
    writeFileSync(join(dir, 'f-chat.json'), JSON.stringify(toOpenAI(makeSession(rand, pool, 30)), null, 4));
    writeFileSync(join(dir, 'g-bad.json'), '{\n  "messages": [\n    {"role": "user" "content": "x"}\n  ]\n}\n');
    const runs = await both(dir, ['--on-error', 'skip', '--near', '--cross-session'], 'mixed');
    expectSame(runs);
    const report = stable(runs.one);
    expect(report.errorCount).toBe(5);
    expect(report.errors.map((e) => [relative(dir, e.file), e.line])).toEqual([
      ['a-sessions.jsonl', 8],
      ['a-sessions.jsonl', 21],
      ['b-late.jsonl', 1],
      ['d-agent.jsonl', 5],
      ['g-bad.json', 3],
    ]);
    expect(Object.keys(report.formats).sort()).toEqual(['agent-jsonl', 'openai', 'sessions-jsonl']);
    // Untouched bytes stay: the spaced file keeps its BOM, spacing and line structure.
    const spacedOut = readFileSync(join(runs.outOne, 'c-spaced.jsonl'), 'utf8');
    expect(spacedOut.startsWith('\uFEFF{"session": "m200", "messages": [')).toBe(true);
    expect(spacedOut).toMatch(/"content": "\[ctxdedup: duplicate of /);
    const crlf = readFileSync(join(runs.outOne, 'a-sessions.jsonl'), 'utf8');
    expect(crlf.split('\r\n')).toHaveLength(lines.length + 1);
    // Restore puts every original string back: the input's bytes, its layout included.
    const single = join(tmp.dir, 'spaced.jsonl');
    const verbatim = join(tmp.dir, 'spaced.verbatim.jsonl');
    expect((await cli(['dedupe', join(dir, 'c-spaced.jsonl'), '-o', single, '--verbatim', verbatim, '-q'])).code).toBe(0);
    const restored = await cli(['restore', single, '--verbatim', verbatim, '-q']);
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toBe(readFileSync(join(dir, 'c-spaced.jsonl'), 'utf8'));
  }, 120_000);
});

describe('the CLI engine', () => {
  it('decides exactly what dedupeMessagesAsync decides', async () => {
    const corpus = join(tmp.dir, 'engine');
    writeSampleCorpus(corpus, 77);
    const variants = [
      [],
      ['--near', '--threshold', '0.6'],
      ['--keep', 'earliest', '--recency-window', '3', '--near'],
      ['--min-chars', '50', '--preserve', 'system,user'],
    ];
    for (const [i, flags] of variants.entries()) {
      const runs: { ran: Ran; out: string }[] = [];
      for (const hooks of [{}, { engine: stageEngine }]) {
        const out = join(tmp.dir, `engine-${i}-${runs.length}`);
        runs.push({ ran: await cli(['dedupe', corpus, '-o', out, '--json', '--jobs', '1', '--verbatim', `${out}.verbatim.jsonl`, ...flags], '', hooks), out });
      }
      const [own, stage] = runs as [(typeof runs)[0], (typeof runs)[0]];
      expectSame({ one: stage.ran, two: own.ran, outOne: stage.out, outTwo: own.out });
      expect(stable(own.ran).exactDuplicates + stable(own.ran).keptInWindow, flags.join(' ')).toBeGreaterThan(0);
    }
  }, 120_000);
});

describe('stdin', () => {
  it('sniffs JSONL on stdin whatever the batch size, and agrees across --jobs', async () => {
    const pool = makePool(6);
    const rand = rng(6);
    const text = `${Array.from({ length: 12 }, (_, i) => sessionRecord(makeSession(rand, pool, 16), `in${i}`)).join('\n')}\n`;
    const outs: string[] = [];
    for (const [jobs, hooks] of [
      ['1', {}],
      ['2', { batchBytes: TINY_BATCH }],
    ] as const) {
      const out = join(tmp.dir, `stdin-${jobs}.jsonl`);
      const r = await cli(['dedupe', '-', '-o', out, '--json', '--jobs', jobs], text, hooks);
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as DedupeReport).formats['sessions-jsonl']?.sessions).toBe(12);
      outs.push(readFileSync(out, 'utf8'));
    }
    expect(outs[1]).toBe(outs[0]);
    expect(outs[0]).toMatch(/\[ctxdedup: duplicate of /);
  }, 60_000);
});

describe('errors from worker threads', () => {
  it('abort with the same file:line message and exit code as the main thread', async () => {
    const dir = join(tmp.dir, 'abort');
    mkdirSync(dir);
    const pool = makePool(4);
    const rand = rng(4);
    const lines = Array.from({ length: 40 }, (_, i) => sessionRecord(makeSession(rand, pool, 12), `s${i}`));
    lines[26] = '{"session": "s26", "messages": [}';
    writeFileSync(join(dir, 'big.jsonl'), `${lines.join('\n')}\n`);
    const outOne = join(tmp.dir, 'abort-1');
    const outTwo = join(tmp.dir, 'abort-2');
    const one = await cli(['dedupe', dir, '-o', outOne, '--jobs', '1']);
    const two = await cli(['dedupe', dir, '-o', outTwo, '--jobs', '2'], '', { batchBytes: TINY_BATCH });
    expect(one.code).toBe(1);
    expect(two.code).toBe(1);
    expect(two.stderr).toBe(one.stderr);
    expect(one.stderr).toMatch(/^ctxdedup: .*big\.jsonl:27: malformed JSON/);
    expect(two.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(outTwo, 'big.jsonl'))).toBe(false);
  }, 120_000);

  it('--jobs must be a positive integer', async () => {
    for (const bad of ['0', '-1', 'two', '1.5']) {
      const r = await cli(['dedupe', 'examples/corpus', '--dry-run', '--jobs', bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain('--jobs must be an integer from 1 to 256');
    }
  });
});

describe('WorkerPool', () => {
  it('starts worker threads only as jobs need them: a small input never pays for --jobs threads', async () => {
    const { WorkerPool } = await import('../../src/cli/pool.js');
    const settings = {
      keep: 'latest' as const,
      fuzzy: false,
      threshold: 0.85,
      minChars: 200,
      recencyWindow: 0,
      preserve: ['system'],
      crossSession: false,
      blocks: false,
      verbatim: false,
      tokenizer: 'o200k_base' as const,
    };
    const pool = new WorkerPool(8, { settings, loader: new URL('../support/worker-loader.mjs', import.meta.url).href });
    expect(pool.threads).toBe(0);
    const job = () => ({
      kind: 'sessions' as const,
      file: { path: 'x.jsonl', rel: 'x.jsonl' },
      data: new Uint8Array(Buffer.from(`${sessionRecord(makeSession(rng(3), makePool(3), 10), 's')}\n`)),
      firstLine: 1,
    });
    try {
      const first = await pool.run(job());
      expect(first.sessions).toHaveLength(1);
      expect(pool.threads).toBe(1);
      // One job after another: the started worker is idle again, and takes it.
      await pool.run(job());
      expect(pool.threads).toBe(1);
      // Jobs at once: more workers, up to the size.
      await Promise.all(Array.from({ length: 12 }, () => pool.run(job())));
      expect(pool.threads).toBe(8);
    } finally {
      await pool.close();
    }
  });
});
