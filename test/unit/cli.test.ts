/**
 * `ctxdedup dedupe` / `restore`, run in-process: formats and lossless round trips, stdin, gzip,
 * errors and exit codes, cross-session dedup, the report (text, JSON, HTML) and progress.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM generator script without types
import { writeSampleCorpus, makePool, makeSession, rng, toOpenAI, sessionRecord } from '../../examples/make-corpus.mjs';
import { cliMessage } from '../../src/cli/errors.js';
import type { DedupeReport } from '../../src/cli/report.js';
import { cli, diffJson, tempDir } from '../support/cli-helpers.js';

const TAG = /^\[ctxdedup: (near-)?duplicate of /;
const TAG_IN_JSON = /"\[ctxdedup: (near-)?duplicate of /;

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
  return path.endsWith('.json')
    ? JSON.parse(text)
    : text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as unknown);
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
    const r = await cli(['dedupe', corpus, '--dry-run', '--json', '--near', '--keep', 'earliest']);
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
    const r = await cli(['dedupe', corpus, '-o', out, '--verbatim', verbatim, '--near', '--cross-session', '--keep', 'earliest', '-q']);
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
    return {
      messages: [
        { role: 'user', content: big },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: big },
      ],
    };
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
    const lines = `${[0, 1, 2].map((i) => sessionRecord(makeSession(rand, pool, 30), `s${i}`)).join('\n')}\n`;
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
    writeFileSync(file, `${JSON.stringify(toOpenAI(makeSession(rng(5), makePool(5), 40)), null, 2)}\n`);
    const out = join(tmp.dir, 'two.dedup.json');
    const v = join(tmp.dir, 'two.verbatim.jsonl.gz');
    expect((await cli(['dedupe', file, '-o', out, '--verbatim', v, '-q'])).code).toBe(0);
    expect(readFileSync(out, 'utf8')).not.toBe(readFileSync(file, 'utf8'));
    const back = await cli(['restore', out, '--verbatim', v, '-q']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toBe(readFileSync(file, 'utf8'));
    // An empty file is not a verbatim file (every run writes its header line).
    const empty = join(tmp.dir, 'empty.jsonl');
    writeFileSync(empty, '');
    const refused = await cli(['restore', out, '--verbatim', empty, '-q']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/empty\.jsonl: not a ctxdedup verbatim file/);
  });

  it('dedupe --dry-run -o is a usage error (nothing would be written)', async () => {
    const out = join(tmp.dir, 'dry.jsonl');
    const r = await cli(['dedupe', '-', '--dry-run', '-o', out], '');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/-o has nothing to write with --dry-run/);
    expect(existsSync(out)).toBe(false);
  });

  it('dedupe --verbatim - is a usage error (restore reads - as stdin; dedupe would write a file named -)', async () => {
    const r = await cli(['dedupe', '-', '--verbatim', '-'], '');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--verbatim needs a file path/);
    expect(existsSync('-')).toBe(false);
  });

  it('restore refuses a verbatim file of another version, or with an edit that would write a non-string', async () => {
    const file = join(tmp.dir, 'three.json');
    writeFileSync(file, `${JSON.stringify(toOpenAI(makeSession(rng(6), makePool(5), 40)), null, 2)}\n`);
    const out = join(tmp.dir, 'three.dedup.json');
    const v = join(tmp.dir, 'three.verbatim.jsonl');
    expect((await cli(['dedupe', file, '-o', out, '--verbatim', v, '-q'])).code).toBe(0);
    const [header, entry] = readFileSync(v, 'utf8').trim().split('\n') as [string, string];
    const crafted = (name: string, text: string) => {
      const path = join(tmp.dir, name);
      writeFileSync(path, text);
      return cli(['restore', out, '--verbatim', path, '-q']);
    };
    const future = await crafted('v99.jsonl', `${header.replace('"version":1', '"version":99')}\n${entry}\n`);
    expect(future.code).toBe(1);
    expect(future.stderr).toMatch(/v99\.jsonl:1: a verbatim file of version 99: this ctxdedup reads version 1/);
    const parsed = JSON.parse(entry) as { edits: { original: unknown }[] };
    (parsed.edits[0] as { original: unknown }).original = { a: 1 };
    const object = await crafted('object.jsonl', `${header}\n${JSON.stringify(parsed)}\n`);
    expect(object.code).toBe(1);
    expect(object.stderr).toMatch(/object\.jsonl:2: not a verbatim entry: an edit needs a path/);
  });
});

describe('pipes as inputs', () => {
  it('reads a named pipe once (its writer is not lost) and gives the same output as the file', async () => {
    const source = join(tmp.dir, 'pipe-source.jsonl');
    writeFileSync(source, `${JSON.stringify(sessionRecord(makeSession(rng(7), makePool(7), 30), 'p'))}\n`);
    const fifo = join(tmp.dir, 'in.jsonl');
    execFileSync('mkfifo', [fifo]);
    const writer = spawn('sh', ['-c', 'cat "$1" > "$2"', 'sh', source, fifo]);
    const written = new Promise((resolve) => writer.on('close', resolve));
    const out = join(tmp.dir, 'pipe-out.jsonl');
    // Bounded by the test's timeout: before the fix the run waited for a second writer forever.
    const r = await cli(['dedupe', fifo, '-o', out, '-q']);
    expect(r.code, r.stderr).toBe(0);
    expect(await written).toBe(0);
    expect((await cli(['dedupe', source, '-q'])).stdout).toBe(readFileSync(out, 'utf8'));
  }, 20_000);
});

describe('cross-session', () => {
  it('replaces a tool output already seen in an earlier session, exact only', async () => {
    const out = 'tool output line\n'.repeat(30);
    const a = { session: 'a', messages: [{ id: 'a1', index: 0, role: 'tool', content: out }] };
    const b = {
      session: 'b',
      messages: [
        { id: 'b1', index: 0, role: 'tool', content: out },
        { id: 'b2', index: 1, role: 'user', content: out },
      ],
    };
    const c = { session: 'c', messages: [{ id: 'c1', index: 0, role: 'tool', content: out }] };
    const file = join(tmp.dir, 'cross.jsonl');
    writeFileSync(file, `${JSON.stringify(a)}\n${JSON.stringify(b)}\n${JSON.stringify(c)}\n`);
    const plain = await cli(['dedupe', file]);
    expect(plain.stdout.split('\n')[0]).toBe(JSON.stringify(a));
    const r = await cli(['dedupe', file, '--cross-session', '--keep', 'earliest']);
    const [la, lb, lc] = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as typeof a);
    expect(la?.messages[0]?.content).toBe(out);
    // b1 is what b2's tag points at: it stays whole (a tag never points at a tag).
    expect(lb?.messages[0]?.content).toBe(out);
    expect(lb?.messages[1]?.content).toBe(`[ctxdedup: duplicate of b1 — ${out.length} chars]`);
    expect(lc?.messages[0]?.content).toBe(`[ctxdedup: duplicate of a#a1 — ${out.length} chars]`);
  });

  it('leaves alone what the references of a session point at: no chained tags, no dangling block references', async () => {
    const file12 = Array.from({ length: 12 }, (_, i) => `line ${i} of the file with some padding text`).join('\n');
    const s1 = { session: 's1', messages: [{ id: 't', role: 'tool', content: file12 }] };
    // Keep latest: a is tagged as a copy of b, so b must stay; cross-session must not replace it.
    const s2 = {
      session: 's2',
      messages: [
        { id: 'a', role: 'tool', content: file12 },
        { id: 'b', role: 'tool', content: file12 },
      ],
    };
    // Keep earliest with blocks: d's lines refer to c, so c must stay whole.
    const s3 = {
      session: 's3',
      messages: [
        { id: 'c', role: 'tool', content: file12 },
        { id: 'd', role: 'tool', content: `${file12}\nand one new line` },
      ],
    };
    const file = join(tmp.dir, 'cross-targets.jsonl');
    writeFileSync(file, `${[s1, s2, s3].map((s) => JSON.stringify(s)).join('\n')}\n`);
    const latest = await cli(['dedupe', file, '--cross-session']);
    expect(latest.code, latest.stderr).toBe(0);
    const [, l2] = latest.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as typeof s2);
    expect(l2?.messages[0]?.content).toBe(`[ctxdedup: duplicate of b — ${file12.length} chars]`);
    expect(l2?.messages[1]?.content).toBe(file12);
    const earliest = await cli(['dedupe', file, '--cross-session', '--keep', 'earliest', '--blocks']);
    expect(earliest.code, earliest.stderr).toBe(0);
    const [, , l3] = earliest.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as typeof s3);
    expect(l3?.messages[0]?.content).toBe(file12);
    expect(l3?.messages[1]?.content).toBe('[ctxdedup: 12 lines unchanged, = c lines 1–12]\nand one new line');
  });

  it('with keep earliest, a cross-session tag is used only when it has fewer o200k tokens too', async () => {
    // 400 × `a` is 50 tokens; a tag naming a long path-like session is shorter in characters
    // but longer in tokens.
    const out = 'a'.repeat(400);
    const name = 'ai-workflow-agent:.ai-workflow/issue-119/00_planning/execute/agent_log_raw@420a65f0a5d0';
    const a = { session: name, messages: [{ id: `${name}#item_0:out`, role: 'tool', content: out }] };
    const b = { session: 'b', messages: [{ id: 'b1', role: 'tool', content: out }] };
    const file = join(tmp.dir, 'cross-tokens.jsonl');
    writeFileSync(file, `${JSON.stringify(a)}\n${JSON.stringify(b)}\n`);
    const r = await cli(['dedupe', file, '--cross-session', '--keep', 'earliest']);
    expect(r.code, r.stderr).toBe(0);
    const lb = JSON.parse(r.stdout.trim().split('\n')[1] as string) as typeof b;
    expect(lb.messages[0]?.content).toBe(out);
    // Keep latest makes no token promise: the shorter tag is used.
    const latest = await cli(['dedupe', file, '--cross-session']);
    expect((JSON.parse(latest.stdout.trim().split('\n')[1] as string) as typeof b).messages[0]?.content).toMatch(/^\[ctxdedup: duplicate of /);
  });

  it('names the earlier copy verbatim, even when its session name looks like a replacement pattern', async () => {
    const out = 'tool output line\n'.repeat(30);
    // `$&`, `$'` and `$1` mean something to String.prototype.replace: the tag must not care.
    const a = { session: "s$&-$'-$1", messages: [{ id: 'a1', index: 0, role: 'tool', content: out }] };
    const b = { session: 'b', messages: [{ id: 'b1', index: 0, role: 'tool', content: out }] };
    const file = join(tmp.dir, 'cross-dollar.jsonl');
    writeFileSync(file, `${JSON.stringify(a)}\n${JSON.stringify(b)}\n`);
    const r = await cli(['dedupe', file, '--cross-session', '--keep', 'earliest']);
    expect(r.code, r.stderr).toBe(0);
    const lb = JSON.parse(r.stdout.trim().split('\n')[1] as string) as typeof b;
    expect(lb.messages[0]?.content).toBe(`[ctxdedup: duplicate of s$&-$'-$1#a1 — ${out.length} chars]`);
  });
});

describe('names in tags', () => {
  const file = Array.from({ length: 12 }, (_, i) => `line ${i} of the file with some padding text`).join('\n');
  const other = file.replaceAll('line', 'row');

  it('a repeated message id gives way to the position, so a tag never names a suffixed id or another message', async () => {
    // Ids b, a, a, a~2: the second `a` is message 2 (`m2`); the real `a~2` is another text.
    const s = {
      session: 's',
      messages: [
        { id: 'b', role: 'tool', content: file },
        { id: 'a', role: 'tool', content: other },
        { id: 'a', role: 'tool', content: file },
        { id: 'a~2', role: 'tool', content: other },
      ],
    };
    const r = await cli(['dedupe', '-', '-q'], `${JSON.stringify(s)}\n`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as typeof s;
    expect(out.messages.map((m) => m.content)).toEqual([
      `[ctxdedup: duplicate of m2 — ${file.length} chars]`,
      `[ctxdedup: duplicate of a~2 — ${other.length} chars]`,
      file,
      other,
    ]);
  });

  it('an agent log with a repeated uuid names the later event by its line', async () => {
    const event = (uuid: string, content: string) => JSON.stringify({ type: 'user', uuid, message: { role: 'tool', content } });
    const log = [event('u1', file), event('u2', other), event('u2', file)].join('\n');
    const r = await cli(['dedupe', '-', '--format', 'agent-jsonl', '-q'], `${log}\n`);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { message: { content: string } });
    expect(lines[0]?.message.content).toBe(`[ctxdedup: duplicate of l3 — ${file.length} chars]`);
  });
});

describe('inputs without a telling extension (stdin)', () => {
  const content = 'the same tool output, long enough to be replaced by a reference tag\n'.repeat(4);
  const record = (name: string, big = '') =>
    JSON.stringify({
      session: name,
      messages: [
        { id: 'a', role: 'tool', content: content + big },
        { id: 'b', role: 'tool', content: content + big },
      ],
    });

  it('a first line longer than a megabyte still makes it JSONL', async () => {
    const input = `${record('s1', 'x'.repeat(1_200_000))}\n${record('s2')}\n`;
    const r = await cli(['dedupe', '-', '--json', '-o', join(tmp.dir, 'long-first.jsonl')], input);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ sessions: 2, exactDuplicates: 2 });
  });

  it('blank lines before the first record are skipped, and empty input is an empty file', async () => {
    const r = await cli(['dedupe', '-', '--json', '-o', join(tmp.dir, 'blank-first.jsonl')], `\n  \n${record('s1')}\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ sessions: 1, exactDuplicates: 1 });
    const empty = await cli(['dedupe', '-', '-q'], '');
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toBe('');
  });

  it('a corrupt first line does not make JSONL one JSON document; a document over several lines stays one', async () => {
    const input = `{"session":"broken",\n${record('s1')}\n${record('s2')}\n`;
    const skip = await cli(['dedupe', '-', '--json', '--on-error', 'skip', '-o', join(tmp.dir, 'corrupt-first.jsonl')], input);
    expect(skip.code, skip.stderr).toBe(0);
    expect(JSON.parse(skip.stdout)).toMatchObject({ sessions: 2, exactDuplicates: 2 });
    const abort = await cli(['dedupe', '-', '-q'], input);
    expect(abort.code).toBe(1);
    expect(abort.stderr).toMatch(/-:1: malformed JSON/);
    const doc = JSON.stringify({ messages: JSON.parse(record('d')).messages }, null, 2);
    const pretty = await cli(['dedupe', '-', '--json', '-o', join(tmp.dir, 'pretty.json')], `${doc}\n`);
    expect(pretty.code, pretty.stderr).toBe(0);
    expect(JSON.parse(pretty.stdout)).toMatchObject({ sessions: 1, exactDuplicates: 1 });
  });

  it('a header record before the sessions does not make the file one agent log', async () => {
    const input = `{"type":"header","version":1}\n${record('s1')}\n${record('s2')}\n`;
    const abort = await cli(['dedupe', '-', '-q'], input);
    expect(abort.code).toBe(1);
    expect(abort.stderr).toMatch(/-:1: not a session record/);
    const skip = await cli(['dedupe', '-', '--json', '--on-error', 'skip', '-o', join(tmp.dir, 'header.jsonl')], input);
    expect(skip.code, skip.stderr).toBe(0);
    expect(JSON.parse(skip.stdout)).toMatchObject({ sessions: 2, exactDuplicates: 2 });
  });
});

describe('errors and exit codes', () => {
  it('numeric options take plain decimal notation only, with their range in the message', async () => {
    for (const [flag, value, message] of [
      ['--min-chars', '0x10', /--min-chars must be an integer from 0 to 4294967295/],
      ['--min-chars', '1e3', /--min-chars must be an integer from 0 to 4294967295/],
      ['--min-chars', '99999999999999999999', /--min-chars must be an integer from 0 to 4294967295/],
      ['--threshold', '0x1', /must be a number in \[0, 1\]/],
      ['--threshold', '5e-1', /must be a number in \[0, 1\]/],
    ] as const) {
      const r = await cli(['dedupe', '-', flag, value], '');
      expect(r.code, `${flag} ${value}`).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect((await cli(['dedupe', '-', '--threshold', '.9', '--min-chars', '16', '-q'], '')).code).toBe(0);
  });

  it('a line longer than one string can hold is a data error naming the file, not a crash', async () => {
    const file = join(tmp.dir, 'long-line.jsonl');
    writeFileSync(file, `${JSON.stringify({ session: 1, messages: [{ id: 'a', role: 'user', content: 'x'.repeat(10_000) }] })}\n`);
    const r = await cli(['dedupe', file, '--dry-run'], '', { batchBytes: 1024, maxLineBytes: 4096 });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/long-line\.jsonl: has a line \(or document\) longer than 4096 bytes/);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect((await cli(['dedupe', file, '--dry-run'], '', { batchBytes: 1024 })).code).toBe(0);
  });

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

/** Every file under `dir` (symlinks as `-> target`), with its bytes: what a run must not change. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = join(e.parentPath, e.name);
    if (e.isSymbolicLink()) out.set(relative(dir, full), `-> ${readlinkSync(full)}`);
    else if (e.isFile()) out.set(relative(dir, full), readFileSync(full).toString('base64'));
  }
  return out;
}

describe('outputs never alias an input or each other (issue 12, item 1)', () => {
  let dir: string;
  const conversation = JSON.stringify({
    messages: [
      { role: 'user', content: 'y'.repeat(300) },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'y'.repeat(300) },
    ],
  });

  beforeAll(async () => {
    dir = join(tmp.dir, 'alias');
    mkdirSync(join(dir, 'tree'), { recursive: true });
    mkdirSync(join(dir, 'real'));
    writeFileSync(join(dir, 'in.json'), conversation);
    writeFileSync(join(dir, 'tree', 'a.json'), conversation);
    writeFileSync(join(dir, 'tree', 'b.json'), conversation);
    symlinkSync(join(dir, 'in.json'), join(dir, 'link.json'));
    symlinkSync('real', join(dir, 'linkdir'));
    linkSync(join(dir, 'in.json'), join(dir, 'hard.json'));
    // A mirror whose entry for a.json is a symlink to the input b.json.
    mkdirSync(join(dir, 'mirror'));
    symlinkSync(join(dir, 'tree', 'b.json'), join(dir, 'mirror', 'a.json'));
    // A deduplicated file and its verbatim file, for restore.
    const r = await cli(['dedupe', join(dir, 'in.json'), '-o', join(dir, 'd.json'), '--verbatim', join(dir, 'v.jsonl'), '-q']);
    expect(r.code, r.stderr).toBe(0);
  });

  const at = (p: string): string => join(dir, p);
  it.each([
    ['--verbatim is the input', ['dedupe', 'in.json', '-o', 'o.json', '--verbatim', 'in.json']],
    ['--report is the input', ['dedupe', 'in.json', '-o', 'o.json', '--report', 'in.json']],
    ['--report is the input (dry run)', ['dedupe', 'in.json', '--dry-run', '--report', 'in.json']],
    ['-o is the target of an input symlink', ['dedupe', 'link.json', '-o', 'in.json']],
    ['-o is a symlink to the input', ['dedupe', 'in.json', '-o', 'link.json']],
    ['-o is a hard link to the input', ['dedupe', 'in.json', '-o', 'hard.json']],
    ['--verbatim is a file of an input directory', ['dedupe', 'tree', '-o', 'out', '--verbatim', 'tree/a.json']],
    ['a mirrored output is a symlink to another input', ['dedupe', 'tree', '-o', 'mirror']],
    ['--verbatim is -o', ['dedupe', 'in.json', '--verbatim', 'o.json', '-o', 'o.json']],
    ['--report is -o', ['dedupe', 'in.json', '-o', 'o.json', '--verbatim', 'o.jsonl', '--report', 'o.json']],
    ['--report is --verbatim through a symlinked folder', ['dedupe', 'in.json', '-o', 'o.json', '--verbatim', 'real/x.jsonl', '--report', 'linkdir/x.jsonl']],
    ['--verbatim is a directory', ['dedupe', 'in.json', '-o', 'o.json', '--verbatim', 'real']],
    ['restore: -o is its --verbatim input', ['restore', 'd.json', '--verbatim', 'v.jsonl', '-o', 'v.jsonl']],
    ['restore: -o is its input', ['restore', 'd.json', '--verbatim', 'v.jsonl', '-o', 'd.json']],
  ])('%s: usage error, nothing written', async (_name, args) => {
    const before = snapshot(dir);
    const r = await cli(args.map((a, i) => (i === 0 || a.startsWith('-') ? a : at(a))));
    expect(r.stderr).toMatch(/^ctxdedup: .+\n$/);
    expect(r.code, r.stderr).toBe(2);
    expect(snapshot(dir)).toEqual(before);
  });

  it('an output reached through symlinks is written at its real path, and the links stay', async () => {
    const target = join(dir, 'real', 'target.json');
    writeFileSync(target, 'old');
    symlinkSync(target, join(dir, 'out-link.json'));
    const r = await cli(['dedupe', join(dir, 'in.json'), '-o', join(dir, 'out-link.json'), '--verbatim', join(dir, 'linkdir', 'target.verbatim.jsonl'), '-q']);
    expect(r.code, r.stderr).toBe(0);
    expect(readlinkSync(join(dir, 'out-link.json'))).toBe(target);
    expect(readFileSync(target, 'utf8')).toMatch(TAG_IN_JSON);
    expect(existsSync(join(dir, 'real', 'target.verbatim.jsonl'))).toBe(true);
    expect(readlinkSync(join(dir, 'linkdir'))).toBe('real');
  });

  it('a failed run commits no output, and earlier outputs stay as they were', async () => {
    const bad = join(dir, 'bad');
    mkdirSync(bad);
    writeFileSync(join(bad, 'a.json'), conversation);
    writeFileSync(join(bad, 'b.jsonl'), `${JSON.stringify({ session: 's', messages: [] })}\n`);
    const out = join(dir, 'bad-out');
    const v = join(dir, 'bad.verbatim.jsonl');
    expect((await cli(['dedupe', bad, '-o', out, '--verbatim', v, '-q'])).code).toBe(0);
    const before = snapshot(dir);
    // Now b.jsonl is malformed: a.json was processed first, but nothing may be committed.
    writeFileSync(join(bad, 'b.jsonl'), '{"session": "s", "messages": [}\n');
    writeFileSync(
      join(bad, 'a.json'),
      JSON.stringify({
        messages: [
          { role: 'user', content: 'z'.repeat(300) },
          { role: 'user', content: 'z'.repeat(300) },
        ],
      }),
    );
    const r = await cli(['dedupe', bad, '-o', out, '--verbatim', v, '-q']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/b\.jsonl:1: malformed JSON/);
    const after = snapshot(dir);
    for (const f of ['bad-out/a.json', 'bad-out/b.jsonl', 'bad.verbatim.jsonl']) expect(after.get(f), f).toBe(before.get(f));
    expect([...after.keys()].filter((f) => f.includes('.tmp'))).toEqual([]);
  });
});

describe('CLI usage errors speak in flags', () => {
  it.each([
    [['--blocks'], '--blocks requires --keep earliest (a reference must point at a copy already sent)'],
    [
      ['--blocks', '--keep', 'earliest', '--near'],
      '--blocks cannot be combined with --near (near-duplicate replacement is lossy and rewrites earlier messages)',
    ],
    [
      ['--blocks', '--keep', 'earliest', '--recency-window', '2'],
      '--blocks requires --recency-window 0 (a window would rewrite messages already sent once they leave it), got 2',
    ],
  ])('%j', async (flags, message) => {
    const r = await cli(['dedupe', 'examples/corpus', '--dry-run', ...flags]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`ctxdedup: ${message}\n`);
  });

  it("a library message's own ctxdedup: prefixes are not repeated", () => {
    expect(cliMessage(new Error('ctxdedup: the server needs fastify'))).toBe('the server needs fastify');
    expect(cliMessage(new TypeError('sqlite:./m.db: ctxdedup: SqliteMemoryStore needs better-sqlite3'))).toBe(
      'sqlite:./m.db: SqliteMemoryStore needs better-sqlite3',
    );
    expect(cliMessage('plain')).toBe('plain');
  });
});

describe('CLI faults (issue 12, item 8)', () => {
  it.each([['--jobs'], ['-j'], ['--concurrency']])('%s is bounded to an integer in [1, 256]', async (flag) => {
    for (const bad of ['1e9', '257', '4294967297', '0', '1.5', 'x']) {
      const r = await cli(['dedupe', 'examples/corpus', '--dry-run', flag, bad]);
      expect(r.code, `${flag} ${bad}`).toBe(2);
      expect(r.stderr).toMatch(/must be an integer from 1 to 256/);
    }
  });

  it('a truncated gzip input names the file', async () => {
    const dir = join(tmp.dir, 'truncated');
    mkdirSync(dir);
    const whole = gzipSync(Buffer.from(`${JSON.stringify({ session: 's', messages: [{ role: 'user', content: 'q'.repeat(5000) }] })}\n`.repeat(20)));
    const cut = whole.subarray(0, whole.length - 20);
    writeFileSync(join(dir, 'cut.jsonl.gz'), cut);
    writeFileSync(join(dir, 'cut-noext'), cut);
    for (const [args, stdin, name] of [
      [['dedupe', join(dir, 'cut.jsonl.gz'), '--dry-run'], '', 'cut.jsonl.gz'],
      [['dedupe', join(dir, 'cut-noext'), '--dry-run', '--format', 'sessions-jsonl'], '', 'cut-noext'],
      [['dedupe', '-', '--dry-run'], cut, '-'],
    ] as const) {
      const r = await cli([...args], stdin);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^ctxdedup: (.*/)?${name.replace(/[.]/g, '\\.')}: .*unexpected end of file.*\\n$`));
    }
    // The verbatim file restore reads is an input too.
    const file = join(dir, 'one.json');
    writeFileSync(
      file,
      JSON.stringify({
        messages: [
          { role: 'user', content: 'w'.repeat(300) },
          { role: 'user', content: 'w'.repeat(300) },
        ],
      }),
    );
    const v = join(dir, 'one.verbatim.jsonl.gz');
    expect((await cli(['dedupe', file, '-o', join(dir, 'one.out.json'), '--verbatim', v, '-q'])).code).toBe(0);
    const bytes = readFileSync(v);
    writeFileSync(v, bytes.subarray(0, bytes.length - 10));
    const r = await cli(['restore', join(dir, 'one.out.json'), '--verbatim', v]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^ctxdedup: .*one\.verbatim\.jsonl\.gz: .*unexpected end of file.*\n$/);
  });

  it('an input that exists but cannot be read is named with the reason, not "not found"', async () => {
    const dir = join(tmp.dir, 'loop');
    mkdirSync(dir);
    symlinkSync(join(dir, 'b.json'), join(dir, 'a.json'));
    symlinkSync(join(dir, 'a.json'), join(dir, 'b.json'));
    const r = await cli(['dedupe', join(dir, 'a.json'), '--dry-run']);
    expect(r.stderr).toMatch(/^ctxdedup: .*a\.json: ELOOP.*\n$/);
    expect(r.code).toBe(1);
  });

  it('restore gives back strings written with escapes JSON.stringify would not use (ensure_ascii, \\/), in every layout', async () => {
    const dir = join(tmp.dir, 'escapes');
    mkdirSync(dir);
    // As Python's json.dumps writes it (every non-ASCII character escaped), plus escaped slashes.
    const asciiJson = (value: unknown): string =>
      JSON.stringify(value)
        .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
        .replaceAll('/', '\\/');
    const text = `café / naïve — 日本語 ${'x'.repeat(300)}\nsecond line 😀`;
    const messages = [
      { id: 'a', role: 'tool', content: text },
      { id: 'b', role: 'user', content: 'ok' },
      { id: 'c', role: 'tool', content: text },
    ];
    writeFileSync(join(dir, 'a.jsonl'), `${asciiJson({ session: 's1', messages })}\n${asciiJson({ session: 's2', messages })}\n`);
    writeFileSync(join(dir, 'b.json'), `${asciiJson(messages).replaceAll('},{', '},\n  {')}\n`);
    const event = (t: string): string => asciiJson({ type: 'user', sessionId: 'ag', message: { role: 'user', content: t } });
    writeFileSync(join(dir, 'c-agent.jsonl'), `${[event(text), event('short'), event(text)].join('\n')}\n`);
    for (const flags of [[], ['--keep', 'earliest', '--cross-session'], ['--keep', 'earliest', '--blocks']]) {
      const out = join(tmp.dir, `escapes-out-${flags.length}`);
      const v = join(tmp.dir, `escapes-${flags.length}.verbatim.jsonl`);
      const d = await cli(['dedupe', dir, '-o', out, '--verbatim', v, '--json', ...flags]);
      expect(d.code, d.stderr).toBe(0);
      expect((JSON.parse(d.stdout) as DedupeReport).exactDuplicates).toBeGreaterThan(0);
      const back = join(tmp.dir, `escapes-back-${flags.length}`);
      const r = await cli(['restore', out, '--verbatim', v, '-o', back]);
      expect(r.code, r.stderr).toBe(0);
      for (const f of files(dir)) expect(readFileSync(join(back, f)).equals(readFileSync(join(dir, f))), `${f} ${flags.join(' ')}`).toBe(true);
    }
    // A raw literal is written as it is, so restore checks it is the JSON string of its original.
    const v = join(tmp.dir, 'escapes-0.verbatim.jsonl');
    const lines = readFileSync(v, 'utf8').trimEnd().split('\n');
    const entry = JSON.parse(lines[1] as string) as { edits: { raw?: string }[] };
    expect((entry.edits[0] as { raw?: string }).raw).toMatch(/^"caf\\u00e9 \\\/ /);
    (entry.edits[0] as { raw?: string }).raw = '"x", "injected": "y"';
    writeFileSync(v, `${[lines[0], JSON.stringify(entry), ...lines.slice(2)].join('\n')}\n`);
    const tampered = await cli(['restore', join(tmp.dir, 'escapes-out-0'), '--verbatim', v, '-o', join(tmp.dir, 'escapes-tampered')]);
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toMatch(/raw literal is not the JSON string of its original/);
  });

  it('--on-error skip and restore round-trip byte-exact, malformed inputs included', async () => {
    const dir = join(tmp.dir, 'skip-rt');
    mkdirSync(dir);
    const big = 'r'.repeat(400);
    const record = (s: string): string =>
      JSON.stringify({
        session: s,
        messages: [
          { role: 'user', content: big },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: big },
        ],
      });
    writeFileSync(join(dir, 'a.jsonl'), [record('s1'), '{"session": "s2", "messages": [}', '{"session": "no messages"}', record('s3'), ''].join('\n'));
    writeFileSync(join(dir, 'b.json'), '{\n  "messages": [\n    {"role": "user" "content": "x"}\n  ]\n}\n');
    writeFileSync(join(dir, 'c.json'), '{"name": "not a transcript"}');
    const event = (t: string): string => JSON.stringify({ type: 'user', sessionId: 'ag', message: { role: 'user', content: t } });
    writeFileSync(join(dir, 'd-agent.jsonl'), `${[event(big), '{"type": "user", "message": ', event(big), event('short')].join('\n')}\n`);
    const out = join(tmp.dir, 'skip-rt-out');
    const v = join(tmp.dir, 'skip-rt.verbatim.jsonl');
    const d = await cli(['dedupe', dir, '-o', out, '--verbatim', v, '--on-error', 'skip', '--json']);
    expect(d.code, d.stderr).toBe(0);
    expect((JSON.parse(d.stdout) as DedupeReport).errorCount).toBe(5);
    expect(readFileSync(join(out, 'a.jsonl'), 'utf8')).toMatch(TAG_IN_JSON);
    const back = join(tmp.dir, 'skip-rt-back');
    const r = await cli(['restore', out, '--verbatim', v, '-o', back]);
    expect(r.code, r.stderr).toBe(0);
    expect(files(back)).toEqual(files(dir));
    for (const f of files(dir)) expect(readFileSync(join(back, f)).equals(readFileSync(join(dir, f))), f).toBe(true);

    // A single file, renamed by -o, round-trips too.
    const single = join(tmp.dir, 'skip-rt-single.jsonl');
    const sv = join(tmp.dir, 'skip-rt-single.verbatim.jsonl');
    expect((await cli(['dedupe', join(dir, 'a.jsonl'), '-o', single, '--verbatim', sv, '--on-error', 'skip', '-q'])).code).toBe(0);
    const rs = await cli(['restore', single, '--verbatim', sv, '-q']);
    expect(rs.code, rs.stderr).toBe(0);
    expect(rs.stdout).toBe(readFileSync(join(dir, 'a.jsonl'), 'utf8'));

    // A malformed line the verbatim file does not list is still an error.
    writeFileSync(single, `${readFileSync(single, 'utf8')}{broken\n`);
    const tampered = await cli(['restore', single, '--verbatim', sv, '-q']);
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toMatch(/skip-rt-single\.jsonl:5: malformed JSON/);
  });
});
