/**
 * `ctxdedup dedupe` / `restore`, run in-process: formats and lossless round trips, stdin, gzip,
 * errors and exit codes, cross-session dedup, the report (text, JSON, HTML) and progress.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM generator script without types
import { writeSampleCorpus, makePool, makeSession, rng, toOpenAI, sessionRecord } from '../examples/make-corpus.mjs';
import type { DedupeReport } from '../src/cli/report.js';
import { cli, diffJson, tempDir } from './cli-helpers.js';

const TAG = /^\[ctxdedup: (near-)?duplicate of /;

function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(relative(dir, join(d, e.name)));
    }
  };
  walk(dir);
  return out.sort();
}

function readText(path: string): string {
  const bytes = readFileSync(path);
  return (path.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf8');
}

function parseAny(path: string): unknown {
  const text = readText(path);
  return path.endsWith('.json') ? JSON.parse(text) : text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as unknown);
}

let tmp: { dir: string; cleanup: () => void };
let corpus: string;

beforeAll(() => {
  tmp = tempDir();
  corpus = join(tmp.dir, 'corpus');
  writeSampleCorpus(corpus);
});
afterAll(() => tmp.cleanup());

describe('dedupe on the sample corpus', () => {
  it('reads every format and reports what it saved (dry run)', async () => {
    const r = await cli(['dedupe', corpus, '--dry-run', '--json', '--fuzzy', '--keep', 'earliest']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as DedupeReport;
    expect(report.files).toBe(13);
    expect(Object.keys(report.formats).sort()).toEqual(['agent-jsonl', 'anthropic', 'ctxdedup', 'openai', 'sessions-jsonl']);
    expect(report.sessions).toBe(3 + 3 + 1 + 4 + 6 + 4);
    expect(report.exactDuplicates).toBeGreaterThan(0);
    expect(report.charsSaved).toBeGreaterThan(0);
    expect(report.tokensSaved).toBeGreaterThan(0);
    expect(report.charsAfter).toBe(report.charsBefore - report.charsSaved);
    expect(report.topRepeated.length).toBeGreaterThan(0);
    expect(report.topRepeated[0]?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(report.tokenizer).toBe('o200k_base');
    // Nothing was written.
    expect(files(corpus)).toHaveLength(13);
  });

  it('writes a mirrored tree where only reference tags differ, and restore gives the bytes back', async () => {
    const out = join(tmp.dir, 'out1');
    const verbatim = join(tmp.dir, 'v1.jsonl');
    const r = await cli(['dedupe', corpus, '-o', out, '--verbatim', verbatim, '--fuzzy', '--cross-session', '--keep', 'earliest', '-q']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    expect(files(out)).toEqual(files(corpus));
    let changed = 0;
    for (const f of files(corpus)) {
      for (const d of diffJson(parseAny(join(corpus, f)), parseAny(join(out, f)))) {
        expect(typeof d.before, `${f} ${d.path}`).toBe('string');
        expect(d.after, `${f} ${d.path}`).toMatch(TAG);
        changed++;
      }
    }
    expect(changed).toBeGreaterThan(20);
    const back = join(tmp.dir, 'back1');
    const rr = await cli(['restore', out, '--verbatim', verbatim, '-o', back]);
    expect(rr.code, rr.stderr).toBe(0);
    for (const f of files(corpus)) expect(readText(join(back, f)), f).toBe(readText(join(corpus, f)));
  });

  it('keeps unchanged files byte-identical and gzips .gz outputs', async () => {
    const out = join(tmp.dir, 'out2');
    const r = await cli(['dedupe', corpus, '-o', out, '-q', '--min-chars', '100000']);
    expect(r.code, r.stderr).toBe(0);
    for (const f of files(corpus)) expect(readText(join(out, f)), f).toBe(readText(join(corpus, f)));
    expect(readFileSync(join(out, 'ctxdedup/archive.jsonl.gz'))[0]).toBe(0x1f);
  });
});

describe('single inputs and stdin', () => {
  const conversation = (): unknown => {
    const big = 'x'.repeat(300);
    return { messages: [{ role: 'user', content: big }, { role: 'assistant', content: 'ok' }, { role: 'user', content: big }] };
  };

  it('reads - from stdin and writes stdout, report on stderr', async () => {
    const r = await cli(['dedupe', '-'], JSON.stringify(conversation()));
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { messages: { content: string }[] };
    expect(out.messages[0]?.content).toMatch(TAG);
    expect(out.messages[2]?.content).toBe('x'.repeat(300));
    expect(r.stderr).toContain('1 exact');
  });

  it('detects gzip on stdin and JSONL without an extension', async () => {
    const pool = makePool(1);
    const rand = rng(1);
    const lines = [0, 1, 2].map((i) => sessionRecord(makeSession(rand, pool, 30), `s${i}`)).join('\n') + '\n';
    const r = await cli(['dedupe', '-', '--json', '-o', join(tmp.dir, 'stdin-out.jsonl')], gzipSync(Buffer.from(lines)));
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as DedupeReport;
    expect(report.formats['sessions-jsonl']?.sessions).toBe(3);
    expect(readFileSync(join(tmp.dir, 'stdin-out.jsonl'), 'utf8').split('\n')).toHaveLength(4);
  });

  it('--keep latest replaces the earlier copy, --recency-window protects the tail', async () => {
    const file = join(tmp.dir, 'one.json');
    writeFileSync(file, JSON.stringify(conversation()));
    const latest = JSON.parse((await cli(['dedupe', file])).stdout) as { messages: { content: string }[] };
    expect(latest.messages[0]?.content).toMatch(TAG);
    const earliest = JSON.parse((await cli(['dedupe', file, '--keep', 'earliest'])).stdout) as { messages: { content: string }[] };
    expect(earliest.messages[2]?.content).toMatch(TAG);
    const windowed = JSON.parse((await cli(['dedupe', file, '--keep', 'earliest', '--recency-window', '1'])).stdout) as { messages: { content: string }[] };
    expect(windowed.messages[2]?.content).toBe('x'.repeat(300));
    const preserved = JSON.parse((await cli(['dedupe', file, '--preserve', 'user'])).stdout) as { messages: { content: string }[] };
    expect(preserved.messages[0]?.content).toBe('x'.repeat(300));
  });

  it('restore matches a renamed single output by position', async () => {
    const file = join(tmp.dir, 'two.json');
    writeFileSync(file, JSON.stringify(toOpenAI(makeSession(rng(5), makePool(5), 40)), null, 2) + '\n');
    const out = join(tmp.dir, 'two.dedup.json');
    const v = join(tmp.dir, 'two.verbatim.jsonl.gz');
    expect((await cli(['dedupe', file, '-o', out, '--verbatim', v, '-q'])).code).toBe(0);
    expect(readFileSync(out, 'utf8')).not.toBe(readFileSync(file, 'utf8'));
    const back = await cli(['restore', out, '--verbatim', v, '-q']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toBe(readFileSync(file, 'utf8'));
  });
});

describe('cross-session', () => {
  it('replaces a tool output already seen in an earlier session, exact only', async () => {
    const out = 'tool output line\n'.repeat(30);
    const a = { session: 'a', messages: [{ id: 'a1', index: 0, role: 'tool', content: out }] };
    const b = { session: 'b', messages: [{ id: 'b1', index: 0, role: 'tool', content: out }, { id: 'b2', index: 1, role: 'user', content: out }] };
    const file = join(tmp.dir, 'cross.jsonl');
    writeFileSync(file, `${JSON.stringify(a)}\n${JSON.stringify(b)}\n`);
    const plain = await cli(['dedupe', file]);
    expect(plain.stdout.split('\n')[0]).toBe(JSON.stringify(a));
    const r = await cli(['dedupe', file, '--cross-session', '--keep', 'earliest']);
    const [la, lb] = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as typeof a);
    expect(la?.messages[0]?.content).toBe(out);
    expect(lb?.messages[0]?.content).toBe(`[ctxdedup: duplicate of a#a1 — ${out.length} chars]`);
    expect(lb?.messages[1]?.content).toMatch(TAG);
  });
});

describe('errors and exit codes', () => {
  it('malformed JSON reports file:line and exits 1, leaving no output', async () => {
    const dir = join(tmp.dir, 'bad');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.jsonl'), `${JSON.stringify({ session: 1, messages: [] })}\n{"session": 2, "messages": [}\n`);
    writeFileSync(join(dir, 'b.json'), '{\n  "messages": [\n    {"role": "user" "content": "x"}\n  ]\n}\n');
    const out = join(tmp.dir, 'bad-out');
    const r = await cli(['dedupe', dir, '-o', out]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/a\.jsonl:2: malformed JSON/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(out, 'a.jsonl'))).toBe(false);

    const b = await cli(['dedupe', join(dir, 'b.json'), '--dry-run']);
    expect(b.code).toBe(1);
    expect(b.stderr).toMatch(/b\.json:3: malformed JSON.*column 21/);

    const skip = await cli(['dedupe', dir, '-o', out, '--on-error', 'skip', '--json']);
    expect(skip.code, skip.stderr).toBe(0);
    const report = JSON.parse(skip.stdout) as DedupeReport;
    expect(report.errorCount).toBe(2);
    expect(report.errors[0]).toMatchObject({ line: 2 });
    expect(readFileSync(join(out, 'a.jsonl'), 'utf8')).toBe(readFileSync(join(dir, 'a.jsonl'), 'utf8'));
    expect(readFileSync(join(out, 'b.json'), 'utf8')).toBe(readFileSync(join(dir, 'b.json'), 'utf8'));
  });

  it('a JSON file without messages is a data error', async () => {
    const file = join(tmp.dir, 'not-a-transcript.json');
    writeFileSync(file, '{"name": "x"}');
    const r = await cli(['dedupe', file, '--dry-run']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('not a transcript');
  });

  it.each([
    [['dedupe', '--nope', 'x']],
    [['dedupe']],
    [['dedupe', '/definitely/missing.json']],
    [['dedupe', 'examples', '--threshold', '1.5']],
    [['dedupe', 'examples', '--keep', 'middle']],
    [['dedupe', 'examples', '--min-chars', '-1']],
    [['dedupe', 'examples', '--dry-run', '--min-chars', '5000000000']],
    [['dedupe', 'examples/sample-transcript.json', 'examples/sample-transcript.json']],
    [['dedupe', '-', '--json']],
    [['frobnicate']],
    [['restore', 'examples']],
  ])('usage error %j exits 2 without a stack trace', async (args) => {
    const r = await cli(args);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stderr.length).toBeGreaterThan(0);
  });

  it('--help and --version exit 0', async () => {
    expect((await cli(['--version'])).code).toBe(0);
    const help = await cli(['dedupe', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--cross-session');
  });
});

describe('report and progress', () => {
  it('writes a self-contained HTML report with a chart', async () => {
    const html = join(tmp.dir, 'report.html');
    const r = await cli(['dedupe', corpus, '--dry-run', '--report', html, '-q']);
    expect(r.code, r.stderr).toBe(0);
    const page = readFileSync(html, 'utf8');
    expect(page).toContain('<svg');
    expect(page).toContain('Top repeated contents');
    expect(page).not.toMatch(/<script|src="http|href="http/);
  });

  it('draws progress only when asked (non-TTY) and never with --quiet', async () => {
    const silent = await cli(['dedupe', corpus, '--dry-run']);
    expect(silent.stderr).toBe('');
    const shown = await cli(['dedupe', corpus, '--dry-run', '--progress']);
    expect(shown.stderr).toMatch(/\r\x1b\[2Kctxdedup \[#+-*\] +\d+% .* sessions/);
    const quiet = await cli(['dedupe', corpus, '--dry-run', '--progress', '-q']);
    expect(quiet.stderr).toBe('');
    expect(quiet.stdout).toBe('');
  });
});
