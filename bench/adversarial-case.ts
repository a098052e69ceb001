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
import { ADVERSARIAL_CASES, adversarialCorpus, type AdversarialCase } from './corpus.js';
import { megaChars, peakRssMb } from './harness.js';
import { refAnalyzeDuplicates, refAnalyzeFuzzyDuplicates } from './reference/cce.js';

/** What the child reports. */
export interface CaseReport {
  case: AdversarialCase;
  engine: 'native' | 'reference';
  messages: number;
  megaChars: number;
  ms: number;
  /** Peak RSS after building the corpus (and a GC), before the call. */
  rssBeforeMb: number;
  /** Peak RSS after the call: the high-water mark of the whole process. */
  peakRssMb: number;
  exact: number;
  fuzzy: number;
}

function main(): void {
  const name = process.argv[2] as AdversarialCase;
  const engine = process.argv[3] ?? 'native';
  if (!ADVERSARIAL_CASES.includes(name) || (engine !== 'native' && engine !== 'reference')) {
    console.error(`usage: adversarial-case.ts <${ADVERSARIAL_CASES.join('|')}> [native|reference]`);
    process.exit(2);
  }
  const messages = adversarialCorpus(name);
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const rssBeforeMb = peakRssMb();
  const start = performance.now();
  let exact: number;
  let fuzzy: number;
  if (engine === 'native') {
    const result = dedupeMessages(messages, { near: true, threshold: 0.85 });
    exact = result.stats.exactDuplicates;
    fuzzy = result.stats.nearDuplicates;
  } else {
    const n = messages.length;
    const preserve = new Set(['system']);
    const exactMap = refAnalyzeDuplicates(messages, n, preserve);
    exact = exactMap.size;
    fuzzy = refAnalyzeFuzzyDuplicates(messages, n, preserve, exactMap, 0.85).size;
  }
  const ms = performance.now() - start;
  const report: CaseReport = {
    case: name,
    engine,
    messages: messages.length,
    megaChars: megaChars(messages.map((m) => m.content)),
    ms,
    rssBeforeMb,
    peakRssMb: peakRssMb(),
    exact,
    fuzzy,
  };
  console.log(JSON.stringify(report));
}

main();
