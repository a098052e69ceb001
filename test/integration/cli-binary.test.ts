/**
 * The built `ctxdedup` binary as a user runs it: exit codes, streaming with bounded memory, and
 * the HTML report rendered by headless Chromium.
 *
 * The streaming test runs on a 200 MB corpus; set CTXDEDUP_BIG_TESTS=1 for the multi-GB run.
 * The screenshot test needs Debian's `chromium` at /usr/bin/chromium and skips without it.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM generator script without types
import { writeSessionsJsonl, writeSampleCorpus } from '../../examples/make-corpus.mjs';
import { tempDir } from '../support/cli-helpers.js';
import { ensureBuilt } from '../support/build.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'dist', 'cli', 'main.js');
const CHROMIUM = '/usr/bin/chromium';
const BIG = process.env['CTXDEDUP_BIG_TESTS'] === '1';

let tmp: { dir: string; cleanup: () => void };

beforeAll(() => {
  // Tests run the compiled binary.
  ensureBuilt(BIN);
  tmp = tempDir('ctxdedup-bin-');
}, 120_000);
afterAll(() => tmp?.cleanup());

function ctxdedup(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, input, encoding: 'utf8', maxBuffer: 1 << 26 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('ctxdedup binary', () => {
  it('has a node shebang', () => {
    expect(readFileSync(BIN, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  });

  it('exits 0 / 1 / 2 without stack traces', () => {
    const ok = ctxdedup(['dedupe', 'examples/', '--dry-run']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/tokens saved [\d,]+ \(o200k_base\)/);
    const data = ctxdedup(['dedupe', '-', '--format', 'openai'], '{"messages": [');
    expect(data.code).toBe(1);
    expect(data.stderr).toMatch(/^ctxdedup: -:1: malformed JSON/);
    const usage = ctxdedup(['dedupe', 'examples/', '--threshold', 'lots']);
    expect(usage.code).toBe(2);
    for (const r of [data, usage]) expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it(
    `streams a ${BIG ? '2 GB' : '200 MB'} corpus with bounded peak RSS`,
    async () => {
      const mb = BIG ? 2000 : 200;
      const corpus = join(tmp.dir, 'big.jsonl');
      const { sessions } = (await writeSessionsJsonl(corpus, mb * 1e6, { seed: 11 })) as { sessions: number };
      const out = join(tmp.dir, 'big-out.jsonl');
      const r = ctxdedup(['dedupe', corpus, '-o', out, '--json', '--near']);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { sessions: number; exactDuplicates: number; throughput: { peakRssMb: number; mbPerSec: number } };
      if (BIG) console.info(`ctxdedup ${mb} MB streaming run: ${JSON.stringify(report.throughput)}`);
      expect(report.sessions).toBe(sessions);
      expect(report.exactDuplicates).toBeGreaterThan(0);
      // Memory is bounded by a few sessions (each well under 1 MB here), not by the corpus.
      expect(report.throughput.peakRssMb).toBeLessThan(BIG ? 600 : 450);
      expect(statSync(out).size).toBeLessThan(statSync(corpus).size);
    },
    BIG ? 1_800_000 : 180_000,
  );
});

describe('ctxdedup binary with worker threads', () => {
  it('writes the same bytes and report with --jobs 1 and --jobs 2 (dist/cli/worker.js)', async () => {
    const corpus = join(tmp.dir, 'jobs.jsonl');
    await writeSessionsJsonl(corpus, 24e6, { seed: 5 });
    const runs = ['1', '2'].map((jobs) => {
      const out = join(tmp.dir, `jobs-${jobs}.jsonl`);
      const r = ctxdedup(['dedupe', corpus, '-o', out, '--json', '--near', '--jobs', jobs]);
      expect(r.code, r.stderr).toBe(0);
      const { throughput, ...report } = JSON.parse(r.stdout) as { throughput: { bytesOut: number } };
      return { out, report, bytesOut: throughput.bytesOut };
    });
    const [one, two] = runs as [(typeof runs)[0], (typeof runs)[0]];
    expect(two.report).toEqual(one.report);
    expect(two.bytesOut).toBe(one.bytesOut);
    expect(readFileSync(two.out).equals(readFileSync(one.out))).toBe(true);
  }, 120_000);
});

describe('ctxdedup binary interrupted', () => {
  it('SIGINT and SIGTERM stop a run with 130 / 143 and leave no temporary output behind', async () => {
    const corpus = join(tmp.dir, 'signals.jsonl');
    await writeSessionsJsonl(corpus, 60e6, { seed: 9 });
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
    ] as const) {
      const out = join(tmp.dir, `signals-${signal}`);
      const child = spawn(process.execPath, [BIN, 'dedupe', corpus, '-o', join(out, 'o.jsonl'), '--verbatim', join(out, 'v.jsonl'), '-q'], { cwd: ROOT });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      // Interrupt once its temporary outputs exist (polled; bounded by the test's timeout).
      while (!existsSync(out) || readdirSync(out).filter((f) => f.endsWith('.ctxdedup.tmp')).length < 2) await new Promise((r) => setTimeout(r, 20));
      child.kill(signal);
      expect(await exited).toBe(code);
      // Nothing left: no temporary output, and not the folder the run created for them.
      expect(existsSync(out)).toBe(false);
    }
  }, 120_000);
});

describe('ctxdedup binary interrupted while publishing', () => {
  it('a signal once the verbatim file is published lets the run finish: all outputs or none, never a failure with files written', async () => {
    const corpus = join(tmp.dir, 'commit.jsonl');
    await writeSessionsJsonl(corpus, 60e6, { seed: 10 });
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const out = join(tmp.dir, `commit-${signal}`);
      const verbatim = join(out, 'v.jsonl');
      const child = spawn(process.execPath, [BIN, 'dedupe', corpus, '-o', join(out, 'o.jsonl'), '--verbatim', verbatim, '-q'], { cwd: ROOT });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      let running = true;
      void exited.then(() => (running = false));
      // The verbatim file is published first: signal as soon as it appears (polled).
      while (running && !existsSync(verbatim)) await new Promise((r) => setTimeout(r, 1));
      if (running) child.kill(signal);
      const code = await exited;
      const written = existsSync(out) ? readdirSync(out).sort() : [];
      if (code === 0) expect(written, stderr).toEqual(['o.jsonl', 'v.jsonl']);
      else expect(written, `exit ${code}: ${stderr}`).toEqual([]);
    }
  }, 120_000);
});

describe('ctxdedup binary when stdout fails (issue 12, item 8)', () => {
  const conversation = JSON.stringify({
    messages: [
      { role: 'user', content: 'v'.repeat(300) },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'v'.repeat(300) },
    ],
  });

  /** Runs the binary with stdout on `path` opened with `flags`. */
  function withStdout(path: string, flags: string, args: string[]): { code: number | null; stderr: string } {
    const fd = openSync(path, flags);
    try {
      const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ['ignore', fd, 'pipe'], encoding: 'utf8' });
      return { code: r.status, stderr: r.stderr };
    } finally {
      closeSync(fd);
    }
  }

  it.skipIf(!existsSync('/dev/full'))('a full stdout (/dev/full) ends with one clean line and exit 1', () => {
    const file = join(tmp.dir, 'full.json');
    writeFileSync(file, conversation);
    const v = join(tmp.dir, 'full.verbatim.jsonl');
    for (const args of [
      ['dedupe', file],
      ['dedupe', file, '--verbatim', v],
      ['dedupe', file, '--dry-run'],
      ['dedupe', file, '--dry-run', '--json'],
      ['--help'],
    ]) {
      const r = withStdout('/dev/full', 'w', args);
      expect(r.stderr, args.join(' ')).toMatch(/^ctxdedup: cannot write to stdout: ENOSPC[^\n]*\n$/);
      expect(r.code, args.join(' ')).toBe(1);
    }
    // The verbatim file of a failed run is never committed.
    expect(existsSync(v)).toBe(false);
    expect(readdirSync(tmp.dir).filter((f) => f.includes('.tmp'))).toEqual([]);
  });

  it.skipIf(!existsSync('/dev/full'))('a report that cannot be written (stdout full, --report path) commits no file: the old output stays', () => {
    const file = join(tmp.dir, 'commit.json');
    writeFileSync(file, conversation);
    const out = join(tmp.dir, 'commit.out.json');
    const v = join(tmp.dir, 'commit.verbatim.jsonl');
    const before = '{"old":true}\n';
    for (const [args, stdout] of [
      [['dedupe', file, '-o', out, '--verbatim', v, '--json'], '/dev/full'],
      [['dedupe', file, '-o', out, '--verbatim', v], '/dev/full'],
      // /proc takes no new file: found only when the report is written.
      [['dedupe', file, '-o', out, '--verbatim', v, '-q', '--report', '/proc/report.html'], '/dev/null'],
    ] as const) {
      writeFileSync(out, before);
      const r = withStdout(stdout, 'w', [...args]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/^ctxdedup: cannot write to [^\n]*(ENOSPC|ENOENT)[^\n]*\n$/);
      expect(readFileSync(out, 'utf8'), args.join(' ')).toBe(before);
      expect(existsSync(v), args.join(' ')).toBe(false);
    }
    expect(readdirSync(tmp.dir).filter((f) => f.includes('.tmp'))).toEqual([]);
    // A directory output: the folders the failed run created for its outputs are removed too.
    const tree = join(tmp.dir, 'tree', 'out');
    const failed = withStdout('/dev/full', 'w', ['dedupe', join(ROOT, 'examples', 'corpus'), '-o', tree, '--json']);
    expect(failed.code).toBe(1);
    expect(existsSync(join(tmp.dir, 'tree'))).toBe(false);
    // The same run with a writable stdout commits the output, the verbatim file and the report.
    const html = join(tmp.dir, 'commit.html');
    const ok = withStdout('/dev/null', 'w', ['dedupe', file, '-o', out, '--verbatim', v, '--json', '--report', html]);
    expect(ok.code).toBe(0);
    expect(readFileSync(out, 'utf8')).not.toBe(before);
    expect(existsSync(v) && existsSync(html)).toBe(true);
  });

  it('a closed pipe (EPIPE) ends with one clean line and exit 1', async () => {
    const file = join(tmp.dir, 'pipe.jsonl');
    const record = (i: number): string => JSON.stringify({ session: `s${i}`, messages: [{ role: 'user', content: `${i} `.repeat(200) }] });
    writeFileSync(file, `${Array.from({ length: 4000 }, (_, i) => record(i)).join('\n')}\n`);
    const child = spawn(process.execPath, [BIN, 'dedupe', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(stderr).toMatch(/^ctxdedup: cannot write to stdout: [^\n]*EPIPE[^\n]*\n$/);
    expect(code).toBe(1);
  });

  it('a file output that cannot be written (EFBIG under ulimit -f) leaves the old output and no verbatim file', () => {
    const file = join(tmp.dir, 'efbig.jsonl');
    const record = (i: number): string =>
      JSON.stringify({
        session: `s${i}`,
        messages: [
          { role: 'user', content: 'u'.repeat(300) },
          { role: 'user', content: 'u'.repeat(300) },
          { role: 'user', content: `${i} `.repeat(300) },
        ],
      });
    writeFileSync(file, `${Array.from({ length: 2000 }, (_, i) => record(i)).join('\n')}\n`);
    const out = join(tmp.dir, 'efbig-out.jsonl');
    const v = join(tmp.dir, 'efbig.verbatim.jsonl');
    writeFileSync(out, 'the previous output\n');
    // Files may grow to 100 KB (the output would be about 2 MB); EFBIG instead of SIGXFSZ.
    const r = spawnSync(
      '/bin/sh',
      ['-c', 'trap "" XFSZ; ulimit -f 200; exec "$0" "$@"', process.execPath, BIN, 'dedupe', file, '-o', out, '--verbatim', v, '-q'],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(r.stderr).toMatch(/^ctxdedup: cannot write to [^\n]*efbig-out\.jsonl: EFBIG[^\n]*\n$/);
    expect(r.status).toBe(1);
    expect(readFileSync(out, 'utf8')).toBe('the previous output\n');
    expect(existsSync(v)).toBe(false);
    expect(readdirSync(tmp.dir).filter((f) => f.includes('.tmp'))).toEqual([]);
  });

  it('refuses a stdout that is one of its inputs (>> in.json)', () => {
    const file = join(tmp.dir, 'append.json');
    writeFileSync(file, conversation);
    for (const args of [
      ['dedupe', file],
      ['dedupe', file, '--dry-run'],
    ]) {
      const r = withStdout(file, 'a', args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^ctxdedup: [^\n]*stdout[^\n]*\n$/);
      expect(readFileSync(file, 'utf8')).toBe(conversation);
    }
  });

  it('refuses an output that is the file stdin is redirected from (- -o in.json < in.json)', () => {
    const file = join(tmp.dir, 'stdin.json');
    writeFileSync(file, conversation);
    const fd = openSync(file, 'r');
    try {
      const r = spawnSync(process.execPath, [BIN, 'dedupe', '-', '-o', file], { cwd: ROOT, stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^ctxdedup: -o [^\n]* would overwrite an input [^\n]*stdin[^\n]*\n$/);
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(file, 'utf8')).toBe(conversation);
  });
});

/** Width, height and a rough "is anything drawn" measure of a PNG. */
function pngInfo(png: Buffer): { width: number; height: number; distinctBytes: number } {
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  return { width, height, distinctBytes: new Set(raw).size };
}

describe.skipIf(!existsSync(CHROMIUM))('HTML report in headless Chromium', () => {
  it('renders the report (screenshot)', () => {
    const corpus = join(tmp.dir, 'corpus');
    writeSampleCorpus(corpus);
    const html = join(tmp.dir, 'report.html');
    const r = ctxdedup(['dedupe', corpus, '--dry-run', '--near', '--cross-session', '--report', html, '-q']);
    expect(r.code, r.stderr).toBe(0);
    const shot = join(tmp.dir, 'report.png');
    const dom = execFileSync(
      CHROMIUM,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--hide-scrollbars',
        '--window-size=1200,1000',
        `--screenshot=${shot}`,
        `file://${html}`,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 },
    );
    void dom;
    const info = pngInfo(readFileSync(shot));
    expect(info.width).toBe(1200);
    expect(info.height).toBe(1000);
    // A blank page compresses to a handful of byte values; text, cards and bars give many.
    expect(info.distinctBytes).toBeGreaterThan(64);
    writeFileSync(join(tmp.dir, 'ok'), '');
  }, 90_000);
});

if (!existsSync(CHROMIUM)) {
  describe('HTML report in headless Chromium', () => {
    it.skip('skipped: /usr/bin/chromium not found (run `bash .ci/services.sh` to install it)', () => undefined);
  });
}
