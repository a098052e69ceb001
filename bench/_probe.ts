import { transcript, totalChars, scoredCorpus, longScoredCorpus, adversarialCorpus } from './corpus.js';
import { refAnalyzeDuplicates, refAnalyzeFuzzyDuplicates } from './reference/cce.js';
import { analyzeDuplicates, analyzeFuzzyDuplicates } from '../src/compat/cce.js';
import { dedupeMessages, deduplicate } from '../src/index.js';
import { deduplicateBaseline } from './reference/stage3.js';
const time = <T>(label: string, f: () => T): T => { const t = performance.now(); const r = f(); console.log(label, (performance.now() - t).toFixed(1), 'ms'); return r; };
for (const n of [1000, 10000, 100000]) {
  const msgs = time(`gen ${n}`, () => transcript(n, 42));
  const eligible = msgs.filter(m => !m.tool_calls && m.role !== 'system' && m.content.length >= 200).length;
  console.log('MB', (totalChars(msgs.map(m => m.content)) / 1e6).toFixed(1), 'eligible', eligible, 'avg eligible len', (totalChars(msgs.filter(m=>!m.tool_calls).map(m=>m.content))/eligible).toFixed(0));
  const pres = new Set(['system']);
  const rx = time('ref exact', () => refAnalyzeDuplicates(msgs, n, pres));
  const nx = time('nat exact', () => analyzeDuplicates(msgs, n, pres));
  time('nat exact again', () => analyzeDuplicates(msgs, n, pres));
  time('ref exact again', () => refAnalyzeDuplicates(msgs, n, pres));
  const rf = time('ref fuzzy', () => refAnalyzeFuzzyDuplicates(msgs, n, pres, rx, 0.85));
  const nf = time('nat fuzzy', () => analyzeFuzzyDuplicates(msgs, n, pres, nx, 0.85));
  time('dedupeMessages exact+fuzzy', () => dedupeMessages(msgs, { fuzzy: true }));
  console.log('exact', rx.size, nx.size, 'fuzzy', rf.size, nf.size, JSON.stringify([...rf].sort((a,b)=>a[0]-b[0])) === JSON.stringify([...nf].sort((a,b)=>a[0]-b[0])));
}
