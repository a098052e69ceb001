#!/usr/bin/env node
/**
 * Entry point of the `ctxdedup` binary. See {@link run} for the commands.
 * @module
 */
import type { run as Run } from './run.js';

const given = process.argv.slice(2);
// `ctxdedup help serve` is `ctxdedup serve --help` (the server parses its own flags).
const argv = given[0] === 'help' && given[1] === 'serve' ? ['serve', '--help'] : given;

if (argv[0] === 'serve') {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    // A closed pipe (`ctxdedup serve | head`) is not an error worth a trace.
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
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
  const { isCommitting, removeTemporaries } = await import('./output.js');
  // Interrupted, the run commits nothing, as a failed one: its temporary outputs go too.
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    process.once(signal, () => {
      if (isCommitting()) {
        // Every output is finished and being published: stopping now would leave some written and
        // some not. The run ends on its own in a moment (a second signal stops it at once).
        process.stderr.write(`ctxdedup: ${signal}: the outputs are being written; finishing\n`);
        return;
      }
      removeTemporaries();
      process.stderr.write(`ctxdedup: ${signal}: stopped, nothing written\n`);
      process.exit(code);
    });
  }
  runCli(run, argv);
}

function runCli(run: typeof Run, args: string[]): void {
  // A failing stdout (a full disk, `> /dev/full`, a closed pipe) ends the run with one line and
  // exit 1. The commands see their own write failures and report them; this catches the rest
  // (the help text, a failure after the run), once.
  let running = true;
  let stdoutError: Error | undefined;
  const stdoutFailed = (error: Error): string => `ctxdedup: cannot write to stdout: ${error.message}\n`;
  process.stdout.on('error', (error: Error) => {
    if (stdoutError !== undefined) return;
    stdoutError = error;
    process.exitCode = 1;
    if (!running) process.stderr.write(stdoutFailed(error));
  });
  // Nothing more can be said when stderr fails.
  process.stderr.on('error', () => undefined);
  run(args, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }).then(
    (code) => {
      running = false;
      if (stdoutError !== undefined && code === 0) process.stderr.write(stdoutFailed(stdoutError));
      process.exitCode = stdoutError === undefined ? code : Math.max(code, 1);
    },
    (error: unknown) => {
      running = false;
      process.stderr.write(`ctxdedup: internal error (please report it): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
