/**
 * The `ctxdedup` command line: argument parsing, output of reports, and exit codes.
 * @module
 */
import { Command, CommanderError, Option } from 'commander';
import { dedupeCommand, type CliIO, type DedupeEngine } from './dedupe.js';
import { cliMessage, DataError, EXIT, OutputError, UsageError } from './errors.js';
import { FORMATS, type FormatName } from './formats.js';
import { renderText, type DedupeReport } from './report.js';
import { addMemoriesCommand } from './memories.js';
import { print } from './output.js';
import { addConformanceCommand } from './conformance.js';
import { doctor } from './doctor.js';
import { restoreCommand } from './restore.js';
import { bounded, fraction } from './arguments.js';

const VERSION = '0.1.0';

/** Most threads or batches in flight `--jobs` and `--concurrency` accept: each costs memory up front. */
export const MAX_JOBS = 256;

function list(value: string, previous: string[] | undefined): string[] {
  return [
    ...(previous ?? []),
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  ];
}

/** Extra knobs for tests and benchmarks. */
export interface RunHooks {
  /** A per-session dedup function (main thread only: implies `--jobs 1`). */
  engine?: DedupeEngine;
  /** URL of a module exporting `engine`, loaded by every worker thread (and the main thread). */
  engineModule?: string;
  /** Target size of a batch of session lines in bytes (tests use small ones to get many jobs). */
  batchBytes?: number;
  /** Longest input line (or document) in bytes (tests use small ones). */
  maxLineBytes?: number;
  /** Running from TypeScript sources: the worker threads' loader module (see `WorkerInit.loader`). */
  workerLoader?: string;
}

/**
 * Runs the CLI with `argv` (without `node` and the script path) and returns the exit code.
 * User errors print one line on stderr; nothing here calls `process.exit`.
 */
export async function run(argv: readonly string[], io: CliIO, hooks: RunHooks = {}): Promise<number> {
  let code: number = EXIT.ok;
  const program = new Command('ctxdedup')
    .description('Deduplicate LLM transcripts: exact and near-duplicate messages become short reference tags.')
    .addHelpText('after', '\nAlso: ctxdedup serve [options]   ingestion server (ctxdedup serve --help)')
    .version(VERSION, '-V, --version')
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    });

  program
    .command('dedupe')
    .description('deduplicate transcripts per session and report what it saved')
    .argument('<inputs...>', 'files, directories (recursive: .json, .jsonl, .ndjson, optionally .gz) or - for stdin')
    .addOption(new Option('-f, --format <format>', 'input format (default: detected per file)').choices(FORMATS))
    .option('-o, --out <path>', 'output file, or directory mirroring the input layout (default: stdout for one input)')
    .option('-n, --dry-run', 'write nothing but the report', false)
    .option('--verbatim <file>', 'save the originals (JSONL) so `ctxdedup restore` can undo')
    .addOption(new Option('--keep <which>', 'which copy stays in full').choices(['latest', 'earliest']).default('latest'))
    .option('--near', 'also replace near duplicates (multiset line Jaccard)', false)
    .option('--fuzzy', 'deprecated alias of --near', false)
    .option('--threshold <t>', 'near-duplicate similarity threshold in [0, 1]', fraction, 0.85)
    .option('--min-chars <n>', 'leave contents shorter than this alone', bounded('--min-chars', 0, 2 ** 32 - 1), 200)
    .option('--recency-window <n>', 'never replace the last N messages of a session', bounded('--recency-window', 0, Number.MAX_SAFE_INTEGER), 0)
    .option('--preserve <roles>', 'roles never deduplicated, comma-separated (default: system)', list)
    .option('--blocks', 'also replace runs of lines already sent earlier with one-line references (lossless; needs --keep earliest)', false)
    .option('--cross-session', 'also replace tool outputs identical to one in an earlier session (exact)', false)
    .addOption(new Option('--on-error <mode>', 'on malformed input: abort (exit 1) or skip it and go on').choices(['abort', 'skip']).default('abort'))
    .addOption(new Option('--tokenizer <encoding>', 'BPE encoding for token counts').choices(['o200k_base', 'cl100k_base']).default('o200k_base'))
    .option(
      '-j, --jobs <n>',
      `worker threads that parse and deduplicate, 1 to ${MAX_JOBS} (default: one per CPU for inputs of 16 MB or more; 1: all on the main thread)`,
      bounded('--jobs', 1, MAX_JOBS),
    )
    .option(
      '--concurrency <n>',
      `batches of sessions in flight, 1 to ${MAX_JOBS} (raised to 4 per worker when lower: each worker needs a batch queued)`,
      bounded('--concurrency', 1, MAX_JOBS),
      4,
    )
    .option('--json', 'print the report as JSON on stdout', false)
    .option('--report <file>', 'write a self-contained HTML report')
    .option('-q, --quiet', 'no progress and no text report', false)
    .option('--progress', 'show progress even when stderr is not a terminal', false)
    .action(async (inputs: string[], opts: Record<string, unknown>) => {
      // The report on stdout is printed before the run commits: a full or closed stdout commits no file.
      const toStdout = opts['json'] || (!opts['quiet'] && !(opts['out'] === undefined && !opts['dryRun']));
      const report = await dedupeCommand(
        {
          inputs,
          format: opts['format'] as FormatName | undefined,
          out: opts['out'] as string | undefined,
          dryRun: opts['dryRun'] as boolean,
          verbatim: opts['verbatim'] as string | undefined,
          keep: opts['keep'] as 'latest' | 'earliest',
          fuzzy: (opts['near'] as boolean) || (opts['fuzzy'] as boolean),
          threshold: opts['threshold'] as number,
          minChars: opts['minChars'] as number,
          recencyWindow: opts['recencyWindow'] as number,
          preserve: (opts['preserve'] as string[] | undefined) ?? ['system'],
          crossSession: opts['crossSession'] as boolean,
          blocks: opts['blocks'] as boolean,
          onError: opts['onError'] as 'abort' | 'skip',
          concurrency: opts['concurrency'] as number,
          jobs: opts['jobs'] as number | undefined,
          tokenizer: opts['tokenizer'] as 'o200k_base' | 'cl100k_base',
          json: opts['json'] as boolean,
          quiet: opts['quiet'] as boolean,
          progress: (opts['progress'] as boolean) || undefined,
          report: opts['report'] as string | undefined,
          ...(toStdout ? { beforeCommit: (r: DedupeReport) => print(io.stdout, opts['json'] ? `${JSON.stringify(r, null, 2)}\n` : renderText(r)) } : {}),
          ...(hooks.engine ? { engine: hooks.engine } : {}),
          ...(hooks.engineModule ? { engineModule: hooks.engineModule } : {}),
          ...(hooks.batchBytes ? { batchBytes: hooks.batchBytes } : {}),
          ...(hooks.maxLineBytes ? { maxLineBytes: hooks.maxLineBytes } : {}),
          ...(hooks.workerLoader ? { workerLoader: hooks.workerLoader } : {}),
        },
        io,
      );
      if (!toStdout && !opts['quiet']) io.stderr.write(renderText(report));
    });

  program
    .command('restore')
    .description('undo a dedupe: put the originals saved with --verbatim back')
    .argument('<inputs...>', 'deduplicated files or directories (as written by dedupe -o)')
    .requiredOption('--verbatim <file>', 'the verbatim file written by dedupe')
    .option('-o, --out <path>', 'output file or directory (default: stdout for one input)')
    .addOption(new Option('-f, --format <format>', 'input format (default: detected per file)').choices(FORMATS))
    .option('-q, --quiet', 'no summary', false)
    .action(async (inputs: string[], opts: Record<string, unknown>) => {
      const summary = await restoreCommand(
        {
          inputs,
          verbatim: opts['verbatim'] as string,
          out: opts['out'] as string | undefined,
          format: opts['format'] as FormatName | undefined,
        },
        io,
      );
      if (!opts['quiet']) {
        io.stderr.write(`ctxdedup restore: ${summary.restored} contents restored in ${summary.sessions} sessions, ${summary.files} files\n`);
      }
    });

  addMemoriesCommand(program, io);
  addConformanceCommand(program, io, (c) => (code = c));
  program
    .command('doctor')
    .description('check this install: platform, native addon, versions, and a fast conformance self-check')
    .option('--json', 'print the report as JSON', false)
    .action(async (opts: Record<string, unknown>) => {
      code = await doctor(opts['json'] ? ['--json'] : [], io);
    });

  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; every parse problem is a usage error.
      code = error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    } else if (error instanceof UsageError) {
      io.stderr.write(`ctxdedup: ${cliMessage(error)}\n`);
      code = EXIT.usage;
    } else if (error instanceof DataError || error instanceof OutputError) {
      io.stderr.write(`ctxdedup: ${cliMessage(error)}\n`);
      code = EXIT.data;
    } else if (isUserFsError(error)) {
      io.stderr.write(`ctxdedup: ${cliMessage(error)}\n`);
      code = EXIT.data;
    } else {
      throw error;
    }
  }
  return code;
}

/** File-system failures caused by the user's paths or data (unreadable, not a gzip file, disk full). */
function isUserFsError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^(E[A-Z]+|Z_[A-Z_]+|ERR_INVALID_ARG_VALUE)$/.test(code);
}
