import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { transcript } from './corpus.js';
import { native } from '../src/native.js';
import { analysisInput } from '../src/stages/message-analysis.js';
const n = 100000;
const f = '/tmp/t100k.json';
if (!existsSync(f)) writeFileSync(f, JSON.stringify(transcript(n, 42)));
const msgs = JSON.parse(readFileSync(f, 'utf8'));
const input = analysisInput(msgs, new Set<unknown>(['system']));
const base = { minChars: 200, skipPrefixes: ['[summary:', '[summary#', '[truncated'], keepEarliest: false, recencyStart: n };
const ex = new Uint8Array(n);
const mode = process.argv[2];
const t = performance.now();
for (let r = 0; r < Number(process.env.REPS ?? 4); r++) {
  if (mode === 'exact') native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: true });
  else native.analyzeMessages(input.contents, input.blocked, ex, { ...base, exact: false, fuzzyThreshold: 0.85 });
}
console.log(mode, 'x4', performance.now() - t);
