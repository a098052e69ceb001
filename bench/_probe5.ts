import { readFileSync } from 'node:fs';
const msgs = JSON.parse(readFileSync('/tmp/t100k.json', 'utf8')) as {role:string; content:string; tool_calls?: unknown[]}[];
// bucket sizes of fingerprint lines among eligible
const buckets = new Map<string, number>();
let elig = 0;
for (const m of msgs) {
  if (m.role === 'system' || m.tool_calls || m.content.length < 200) continue;
  elig++;
  const lines = m.content.split('\n').map(l => l.trim().toLowerCase()).filter(Boolean);
  if (lines.length < 2) continue;
  for (const l of new Set(lines.slice(0, 5))) buckets.set(l, (buckets.get(l) ?? 0) + 1);
}
const big = [...buckets].sort((a, b) => b[1] - a[1]).slice(0, 8);
let pairs = 0; for (const [, c] of buckets) pairs += c * (c - 1) / 2;
console.log('eligible', elig, 'pairs (upper bound)', pairs.toExponential(2), big);
