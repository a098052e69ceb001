// Child process of bench/cli.bench.ts: runs the built CLI (dist/) in this process and prints its
// figures as one JSON line. Plain JavaScript on purpose: worker threads inherit their parent's
// `execArgv`, so a child started under the bench's TypeScript loader (`--import tsx`) gave every
// CLI worker thread that loader too, which an installed CLI never has (about 0.3 CPU s a worker).
//
//   node bench/cli-child.mjs <engine module URL or ""> <ctxdedup dedupe arguments...>

import { PassThrough } from 'node:stream';

const [engineModule, ...args] = process.argv.slice(2);
const { run } = await import(new URL('../dist/cli/run.js', import.meta.url).href);
const { peakRssMb } = await import(new URL('../dist/cli/report.js', import.meta.url).href);

const stdout = new PassThrough();
let text = '';
stdout.on('data', (chunk) => {
  text += chunk.toString();
});
const code = await run(args, { stdin: process.stdin, stdout, stderr: process.stderr }, engineModule ? { engineModule } : {});
if (code !== 0) process.exit(code);
const report = JSON.parse(text);
const { user, system } = process.cpuUsage();
const t = report.throughput;
process.stdout.write(
  `${JSON.stringify({
    seconds: t.seconds,
    mbPerSec: t.mbPerSec,
    sessionsPerSec: t.sessionsPerSec,
    peakRssMb: peakRssMb(),
    cpuSeconds: (user + system) / 1e6,
    sessions: report.sessions,
    exact: report.exactDuplicates,
    near: report.nearDuplicates,
  })}\n`,
);
