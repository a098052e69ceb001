import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonStringBytes } from '../../src/cli/splice.js';
import { decodeInput, decodeUtf8, TRANSCODE_MIN_BYTES } from '../../src/cli/utf8.js';
import { cli, tempDir } from '../support/cli-helpers.js';

/** Bytes long enough to take the converter path: `fill` repeated around `core`. */
function padded(core: Uint8Array, fill: string): Buffer {
  const pad = Buffer.from(fill.repeat(Math.ceil(TRANSCODE_MIN_BYTES / Buffer.byteLength(fill))));
  return Buffer.concat([pad, core, pad]);
}

describe('decodeUtf8', () => {
  it('equals toString("utf8") on any string, ASCII or not, short or long', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 64 }), fc.constantFrom('a', 'é', '日本語', '\u{1F600}', '\n'), fc.nat(3000), (s, fill, reps) => {
        const b = Buffer.from(fill.repeat(reps) + s + fill.repeat(reps));
        expect(decodeUtf8(b)).toBe(b.toString('utf8'));
      }),
    );
  });

  it('equals toString("utf8") on arbitrary bytes, invalid UTF-8 included', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.constantFrom('a', 'é', '日本語'), (bytes, fill) => {
        const b = padded(bytes, fill);
        expect(decodeUtf8(b)).toBe(b.toString('utf8'));
      }),
    );
  });

  it('decodes sub-ranges, a BOM, lone-surrogate encodings and truncated sequences as toString does', () => {
    const cases = [
      Buffer.from([0xef, 0xbb, 0xbf]), // BOM stays U+FEFF
      Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate: invalid
      Buffer.from([0xe6, 0x97]), // truncated
      Buffer.from([0xf4, 0x90, 0x80, 0x80]), // beyond U+10FFFF
      Buffer.from([0xc0, 0xaf]), // overlong
    ];
    for (const c of cases) {
      const b = padded(c, '日本語');
      expect(decodeUtf8(b)).toBe(b.toString('utf8'));
      expect(decodeUtf8(b, 1, b.length - 2)).toBe(b.toString('utf8', 1, b.length - 2));
    }
  });
});

describe('jsonStringBytes', () => {
  it('equals Buffer.from(JSON.stringify(s)) on any string, lone surrogates and controls included', () => {
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.oneof(
            fc.constantFrom('"', '\\', '\n', '\u0000', '\u001f', '\u2028', '\u007f', '\ud800', '\udfff', '\u{1F600}'),
            fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
          ),
          maxLength: 64,
        }),
        fc.constantFrom('a', 'é', '日本語'),
        fc.nat(1500),
        (s, fill, reps) => {
          const value = fill.repeat(reps) + s + fill.repeat(reps % 7);
          expect(Buffer.from(jsonStringBytes(value)).equals(Buffer.from(JSON.stringify(value)))).toBe(true);
        },
      ),
    );
  });

  it('encodes rope strings (concatenations) like flat ones', () => {
    let value = '';
    for (let i = 0; i < 500; i++) value += `line ${i} "quoted" \t日本語\n`;
    expect(Buffer.from(jsonStringBytes(value)).toString('utf8')).toBe(JSON.stringify(value));
  });
});

describe('invalid UTF-8 input', () => {
  it('decodeInput refuses exactly the ranges toString would change', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.nat(3000), (core, reps) => {
        const b = padded(core, 'é'.repeat(1 + (reps % 3)));
        const decoded = decodeInput(b);
        const valid = Buffer.from(b.toString('utf8'), 'utf8').equals(b);
        expect('text' in decoded).toBe(valid);
        if ('text' in decoded) expect(decoded.text).toBe(b.toString('utf8'));
      }),
    );
  });

  it('the CLI reports a line that is not valid UTF-8 (it would not restore) and, skipping it, passes its bytes through', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const x = 'x'.repeat(300);
      const line = (a: string, b: string): Buffer =>
        Buffer.concat([
          Buffer.from('{"session":"s","messages":[{"id":"a","role":"user","content":"'),
          Buffer.from(a, 'latin1'),
          Buffer.from(`${x}"},{"id":"b","role":"user","content":"`),
          Buffer.from(b, 'latin1'),
          Buffer.from(`${x}"}]}\n`),
        ]);
      const bytes = Buffer.concat([line('\xff', '\xfe'), line('caf\xe9', 'caf\xe9')]);
      const input = join(dir, 'u.jsonl');
      writeFileSync(input, bytes);
      const out = join(dir, 'o.jsonl');
      const verbatim = join(dir, 'v.jsonl');
      const failed = await cli(['dedupe', input, '-o', out, '--verbatim', verbatim, '-q']);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(/u\.jsonl:1: not valid UTF-8/);
      const skipped = await cli(['dedupe', input, '-o', out, '--verbatim', verbatim, '--on-error', 'skip', '--json']);
      expect(skipped.code).toBe(0);
      expect((JSON.parse(skipped.stdout) as { exactDuplicates: number }).exactDuplicates).toBe(0);
      expect(readFileSync(out)).toEqual(bytes);
      const back = join(dir, 'b.jsonl');
      expect((await cli(['restore', out, '--verbatim', verbatim, '-o', back])).code).toBe(0);
      expect(readFileSync(back)).toEqual(bytes);
    } finally {
      cleanup();
    }
  });
});
