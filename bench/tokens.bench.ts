/**
 * Token counting: the native counter (ctxdedup-core on the bpe-openai vocabularies) against
 * gpt-tokenizer (pure JS, the counter ctxdedup used before), in the same run, on the sample
 * corpus (examples/corpus and ../shared/corpus, about 2 MB of JSON lines: agent transcripts, code,
 * prose, some non-Latin text). Each op counts every line once, as the stages count contents: one
 * call per text. Both counters are warm (vocabularies loaded, their piece caches filled by the
 * calibration runs). Counts are checked equal before timing. A second row counts long runs of one
 * character, where gpt-tokenizer is quadratic (20,000 × '-', single runs, plus native-only times of
 * the inputs of issue 12 item 7).
 *
 *   npx tsx bench/run.ts tokens
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { countTokens, countTokensBatch, type TokenEncoding } from '../src/tokens.js';
import { get, measure, megaChars, msRow, opsRow, type BenchRow } from './harness.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..');
const CORPUS_CHARS = 2_000_000;

interface BpeModule {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}
const require = createRequire(import.meta.url);
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

function files(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((f) => {
      const path = join(dir, f);
      return statSync(path).isDirectory() ? files(path) : [path];
    });
}

/** Lines of the sample corpus, files interleaved, up to {@link CORPUS_CHARS} UTF-16 units. */
function corpusLines(): string[] {
  const perFile = [join(ROOT, 'examples/corpus'), join(ROOT, '../shared/corpus')].flatMap(files).map((file) => {
    let data = readFileSync(file);
    if (file.endsWith('.gz')) data = gunzipSync(data);
    return data
      .toString('utf8')
      .split('\n')
      .filter((l) => l.length > 0);
  });
  const lines: string[] = [];
  let total = 0;
  for (let i = 0; total < CORPUS_CHARS && perFile.some((f) => i < f.length); i++) {
    for (const f of perFile) {
      const line = f[i];
      if (line === undefined || total >= CORPUS_CHARS) continue;
      lines.push(line);
      total += line.length;
    }
  }
  return lines;
}

export async function run(): Promise<BenchRow[]> {
  const lines = corpusLines();
  const mc = megaChars(lines);
  const rows: BenchRow[] = [];
  for (const encoding of ['o200k_base', 'cl100k_base'] as TokenEncoding[]) {
    const gpt = require(`gpt-tokenizer/encoding/${encoding}`) as BpeModule;
    let nativeTotal = 0;
    let gptTotal = 0;
    for (const line of lines) {
      nativeTotal += countTokens(line, encoding);
      gptTotal += gpt.countTokens(line, PLAIN_TEXT);
    }
    if (nativeTotal !== gptTotal) throw new Error(`bench: ${encoding} counts differ: native ${nativeTotal}, gpt-tokenizer ${gptTotal}`);
    const batchTotal = countTokensBatch(lines, encoding).reduce((a, n) => a + n, 0);
    if (batchTotal !== gptTotal) throw new Error(`bench: ${encoding} batch count differs: ${batchTotal} vs ${gptTotal}`);
    const name = `tokens: ${encoding}, ${lines.length} corpus lines`;
    const results = await measure(
      name,
      [
        [
          'native',
          () => {
            let n = 0;
            for (const line of lines) n += countTokens(line, encoding);
            return n;
          },
        ],
        ['native batch', () => countTokensBatch(lines, encoding)],
        [
          'gpt-tokenizer',
          () => {
            let n = 0;
            for (const line of lines) n += gpt.countTokens(line, PLAIN_TEXT);
            return n;
          },
        ],
      ],
      { minSamples: 8, maxTime: 4 },
    );
    const note = `${gptTotal} tokens, counts equal; one call per line`;
    rows.push(
      opsRow('tokens', `${encoding}: ${(mc).toFixed(2)} MB corpus, countTokens per line`, get(results, 'native'), get(results, 'gpt-tokenizer'), mc, note),
    );
    rows.push(opsRow('tokens', `${encoding}: same, countTokensBatch (one call)`, get(results, 'native batch'), get(results, 'gpt-tokenizer'), mc, note));
  }

  // Adversarial: a long run of one character (gpt-tokenizer's merging is quadratic in its length).
  const gpt = require('gpt-tokenizer/encoding/o200k_base') as BpeModule;
  const run = '-'.repeat(20_000);
  const time = (fn: () => number): [number, number] => {
    const t = performance.now();
    const n = fn();
    return [n, performance.now() - t];
  };
  const [gptCount, gptMs] = time(() => gpt.countTokens(run, PLAIN_TEXT));
  const [nativeCount, nativeMs] = time(() => countTokens(run));
  if (gptCount !== nativeCount) throw new Error('bench: counts of the run differ');
  const [, dashesMs] = time(() => countTokens('-'.repeat(200_000)));
  const [, xMs] = time(() => countTokens('x'.repeat(5_000_000)));
  const [, spacesMs] = time(() => countTokens(' '.repeat(300_000)));
  rows.push(
    msRow(
      'tokens',
      "o200k_base: 20,000 × '-', one call",
      nativeMs,
      gptMs,
      run.length / 1e6,
      `native only: 200,000 × '-' ${dashesMs.toFixed(0)} ms, 5,000,000 × 'x' ${xMs.toFixed(0)} ms, 300,000 spaces ${spacesMs.toFixed(1)} ms`,
    ),
  );
  return rows;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.table(await run());
}
