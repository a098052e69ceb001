#!/usr/bin/env node
// Deduplicates the bundled sample transcript and prints what was replaced and what it saved.
// Usage: node examples/dedupe-sample.mjs [transcript.json]
import { readFileSync } from 'node:fs';
import { dedupeMessages, restoreMessages } from '../dist/index.js';

const path = process.argv[2] ?? new URL('./sample-transcript.json', import.meta.url);
const conversation = JSON.parse(readFileSync(path, 'utf8'));
const { messages, verbatim, decisions, stats } = dedupeMessages(conversation, { keep: 'earliest', near: true, threshold: 0.8 });

for (const d of decisions) {
  const how = d.kind === 'exact' ? 'exact copy' : `near copy (${(d.similarity * 100).toFixed(1)}% similar)`;
  console.log(`${d.id.padEnd(4)} ${how} of ${d.duplicateOfId}: ${d.charsBefore} -> ${d.charsAfter} chars`);
  console.log(`      now: ${messages[d.index].content}`);
}
console.log(`\n${stats.messages} messages, ${stats.exactDuplicates} exact + ${stats.nearDuplicates} near duplicates replaced`);
console.log(`${stats.charsBefore} -> ${stats.charsAfter} chars (${stats.charsSaved} saved, ~${stats.tokensSaved} tokens)`);
const restored = restoreMessages(messages, verbatim);
console.log(`restore gives the input back: ${JSON.stringify(restored) === JSON.stringify(conversation)}`);
