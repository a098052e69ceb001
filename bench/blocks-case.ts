/**
 * Child process of the blocks suite's adversarial rows: builds one adversarial corpus, times ONE
 * `dedupeMessages(messages, { keep: 'earliest', blocks: true })` call (or the plain-JS baseline
 * of the same rules) and reports the process's peak RSS (VmHWM). A fresh process per run keeps
 * peak RSS meaningful and lets the parent kill a run that blows up.
 *
 *   node --expose-gc --import tsx bench/blocks-case.ts <case> [native|reference]
 *
 * Prints one JSON line ({@link BlocksCaseReport}) on stdout.
 * @module
 */
import { isDeepStrictEqual } from 'node:util';
import { dedupeMessages, expandMessages } from '../src/index.js';
import { BLOCK_ADVERSARIAL_CASES, blockAdversarialCorpus, type BlockAdversarialCase } from './corpus.js';
import { megaChars, peakRssMb } from './harness.js';
import { jsTokenCounter } from './reference/blocks-tokens.js';
import { refDedupeBlocks } from './reference/blocks.js';

/** What the child reports. */
export interface BlocksCaseReport {
  case: BlockAdversarialCase;
  engine: 'native' | 'reference';
  messages: number;
  megaChars: number;
  ms: number;
  /** Peak RSS after building the corpus (and a GC), before the call. */
  rssBeforeMb: number;
  /** Peak RSS after the call: the high-water mark of the whole process. */
  peakRssMb: number;
  /** Whole-message exact replacements and block references. */
  exact: number;
  references: number;
  charsSaved: number;
  /** Native only, checked after the timed call: `expandMessages(out)` equals the input. */
  expands: boolean;
}

function main(): void {
  const name = process.argv[2] as BlockAdversarialCase;
  const engine = process.argv[3] ?? 'native';
  if (!BLOCK_ADVERSARIAL_CASES.includes(name) || (engine !== 'native' && engine !== 'reference')) {
    console.error(`usage: blocks-case.ts <${BLOCK_ADVERSARIAL_CASES.join('|')}> [native|reference]`);
    process.exit(2);
  }
  const messages = blockAdversarialCorpus(name);
  const count = jsTokenCounter();
  count('warm up the vocabulary');
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const rssBeforeMb = peakRssMb();
  let exact = 0;
  let references = 0;
  let charsSaved = 0;
  let expands = false;
  let ms: number;
  if (engine === 'native') {
    const start = performance.now();
    const result = dedupeMessages(messages, { keep: 'earliest', blocks: true });
    ms = performance.now() - start;
    exact = result.stats.exactDuplicates;
    references = result.stats.blockReferences;
    charsSaved = result.stats.charsSaved;
    const peak = peakRssMb();
    expands = isDeepStrictEqual(expandMessages(result.messages), messages);
    report(peak);
  } else {
    const start = performance.now();
    const result = refDedupeBlocks(messages, count);
    ms = performance.now() - start;
    for (const d of result.decisions) {
      if (d['kind'] === 'exact') exact++;
      else references++;
      charsSaved += d['charsSaved'] as number;
    }
    report(peakRssMb());
  }
  function report(peak: number): void {
    const out: BlocksCaseReport = {
      case: name,
      engine: engine as 'native' | 'reference',
      messages: messages.length,
      megaChars: megaChars(messages.map((m) => m.content)),
      ms,
      rssBeforeMb,
      peakRssMb: peak,
      exact,
      references,
      charsSaved,
      expands,
    };
    console.log(JSON.stringify(out));
  }
}

main();
