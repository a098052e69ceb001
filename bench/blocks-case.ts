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
import { type CaseReportBase, runChildCase } from './child-case.js';
import { BLOCK_ADVERSARIAL_CASES, blockAdversarialCorpus, type BlockAdversarialCase } from './corpus.js';
import { peakRssMb } from './harness.js';
import { jsTokenCounter } from './reference/blocks-tokens.js';
import { refDedupeBlocks } from './reference/blocks.js';

/** What the child reports. */
export interface BlocksCaseReport extends CaseReportBase<BlockAdversarialCase> {
  /** Whole-message exact replacements and block references. */
  exact: number;
  references: number;
  charsSaved: number;
  /** Native only, checked after the timed call: `expandMessages(out)` equals the input. */
  expands: boolean;
}

const count = jsTokenCounter();
runChildCase(
  'blocks-case.ts',
  BLOCK_ADVERSARIAL_CASES,
  blockAdversarialCorpus,
  (engine, messages) => {
    if (engine === 'native') {
      const start = performance.now();
      const result = dedupeMessages(messages, { keep: 'earliest', blocks: true });
      const ms = performance.now() - start;
      const peak = peakRssMb();
      const { exactDuplicates: exact, blockReferences: references, charsSaved } = result.stats;
      return { ms, peakRssMb: peak, counts: { exact, references, charsSaved, expands: isDeepStrictEqual(expandMessages(result.messages), messages) } };
    }
    const start = performance.now();
    const result = refDedupeBlocks(messages, count);
    const ms = performance.now() - start;
    const counts = { exact: 0, references: 0, charsSaved: 0, expands: false };
    for (const d of result.decisions) {
      if (d['kind'] === 'exact') counts.exact++;
      else counts.references++;
      counts.charsSaved += d['charsSaved'] as number;
    }
    return { ms, counts };
  },
  () => count('warm up the vocabulary'),
);
