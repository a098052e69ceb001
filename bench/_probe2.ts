import { transcript } from './corpus.js';
import { native } from '../src/native.js';
import { analysisInput } from '../src/stages/message-analysis.js';
const time = <T>(label: string, f: () => T): T => { const t = performance.now(); const r = f(); console.log(label, (performance.now() - t).toFixed(1), 'ms'); return r; };
const n = Number(process.argv[2] ?? 100000);
const msgs = transcript(n, 42);
const pres = new Set<unknown>(['system']);
const input = time('analysisInput', () => analysisInput(msgs, pres));
const base = { minChars: 200, skipPrefixes: ['[summary:', '[summary#', '[truncated'], keepEarliest: false, recencyStart: n };
const ex = new Uint8Array(n);
for (let r = 0; r < 3; r++) {
  time('eligibility only (exact off, fuzzy t=2)', () => native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: false, fuzzyThreshold: 2 }));
  time('eligibility, no prefixes', () => native.analyzeMessages(input.contents, input.blocked, ex, { ...base, skipPrefixes: [], exact: false, fuzzyThreshold: 2 }));
  time('exact', () => native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: true }));
  time('groupExact all', () => native.groupExact(input.contents));
  time('fuzzy only 0.85', () => native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: false, fuzzyThreshold: 0.85 }));
  time('fuzzy only 1.0', () => native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: false, fuzzyThreshold: 1 }));
  time('JS split/trim/lower only', () => { let c = 0; for (let i = 0; i < n; i++) { if (input.blocked[i]) continue; for (const l of input.contents[i]!.split('\n')) { const t = l.trim().toLowerCase(); if (t) c++; } } return c; });
}
