/**
 * Child process of the adversarial suite: builds one adversarial corpus, times ONE exact + fuzzy
 * dedup call (threshold 0.85) and reports the process's peak RSS (VmHWM, see {@link peakRssMb}).
 * A fresh process per case keeps peak RSS meaningful (it is a high-water mark) and lets the
 * parent kill a run that blows up.
 *
 *   node --expose-gc --import tsx bench/adversarial-case.ts <case> [native|reference]
 *
 * Prints one JSON line ({@link CaseReport}) on stdout.
 * @module
 */
import { dedupeMessages } from '../src/index.js';
import { type CaseReportBase, runChildCase } from './child-case.js';
import { ADVERSARIAL_CASES, adversarialCorpus, type AdversarialCase } from './corpus.js';
import { refAnalyzeDuplicates, refAnalyzeFuzzyDuplicates } from './reference/cce.js';

/** What the child reports. */
export interface CaseReport extends CaseReportBase<AdversarialCase> {
  exact: number;
  fuzzy: number;
}

runChildCase('adversarial-case.ts', ADVERSARIAL_CASES, adversarialCorpus, (engine, messages) => {
  const start = performance.now();
  if (engine === 'native') {
    const result = dedupeMessages(messages, { near: true, threshold: 0.85 });
    return { ms: performance.now() - start, counts: { exact: result.stats.exactDuplicates, fuzzy: result.stats.nearDuplicates } };
  }
  const n = messages.length;
  const preserve = new Set(['system']);
  const exactMap = refAnalyzeDuplicates(messages, n, preserve);
  const fuzzy = refAnalyzeFuzzyDuplicates(messages, n, preserve, exactMap, 0.85).size;
  return { ms: performance.now() - start, counts: { exact: exactMap.size, fuzzy } };
});
