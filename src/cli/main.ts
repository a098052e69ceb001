#!/usr/bin/env node
/**
 * Entry point of the `ctxdedup` binary. See {@link run} for the commands.
 * @module
 */
import type { run as Run } from './run.js';

process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  // A closed pipe (`ctxdedup dedupe big.jsonl | head`) is not an error worth a trace.
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const argv = process.argv.slice(2);

if (argv[0] === 'serve') {
  // The server owns its flags, signals and lifetime (src/server/main.ts); load it only when asked.
  const { main } = await import('../server/main.js');
  await main(argv.slice(1));
} else if (argv[0] === 'doctor') {
  // Before anything loads the native addon, so a broken install gets a diagnosis, not a crash.
  const { doctor } = await import('./doctor.js');
  process.exitCode = await doctor(argv.slice(1), process);
} else {
  // Loaded here, not at the top: run.js loads the native addon, which `doctor` must load itself.
  const { run } = await import('./run.js');
  runCli(run, argv);
}

function runCli(run: typeof Run, args: string[]): void {
  run(args, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`ctxdedup: internal error (please report it): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
  );
}
