/**
 * CLI error kinds and exit codes. A user error is printed as one line (`ctxdedup: …`), never
 * with a stack trace; anything else is a bug and keeps its stack.
 * @module
 */

/** Exit codes of the `ctxdedup` command. */
export const EXIT = {
  /** Everything processed (with `--on-error skip`, also when some inputs were skipped). */
  ok: 0,
  /** Bad data: malformed JSON, not a transcript, a verbatim file that does not match. */
  data: 1,
  /** Bad invocation: unknown option, invalid value, missing input. */
  usage: 2,
} as const;

/** A bad invocation: exit code 2. */
/**
 * An error's message for a `ctxdedup…: ` line: without the library's own `ctxdedup: ` prefixes
 * (a missing optional package says `ctxdedup: … needs …`), which the line already carries.
 */
export function cliMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^(?:ctxdedup: )+/, '').replaceAll(': ctxdedup: ', ': ');
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Bad input data, located as `file:line` when the line is known: exit code 1. */
export class DataError extends Error {
  override readonly name = 'DataError';
  /**
   * @param file - display path of the input (`-` for stdin)
   * @param line - 1-based line, when known
   * @param reason - what is wrong, without the location
   */
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly reason: string,
  ) {
    super(`${file}${line === undefined ? '' : `:${line}`}: ${reason}`);
  }
}

/**
 * An output that could not be written (a full disk, a closed pipe, a full stdout): exit code 1.
 * Whatever was being written is discarded (files) or incomplete (stdout).
 */
export class OutputError extends Error {
  override readonly name = 'OutputError';
  /**
   * @param target - the output: its path, or `stdout`
   * @param error - what the system said
   */
  constructor(
    readonly target: string,
    error: unknown,
  ) {
    super(`cannot write to ${target}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/**
 * Describes a `JSON.parse` failure of `text` as a 1-based line, column and reason. V8 reports a
 * character position; it is turned into a line and column here.
 */
export function jsonErrorLocation(text: string, error: unknown, firstLine = 1): { line: number; reason: string } {
  const message = error instanceof Error ? error.message : String(error);
  const match = /at position (\d+)/.exec(message);
  const reason = message.replace(/\s*\(line \d+ column \d+\)/, '').replace(/ in JSON at position \d+/, '');
  if (!match) {
    // "Unexpected end of JSON input": the problem is at the end.
    let line = firstLine;
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) line++;
    return { line, reason: `malformed JSON: ${reason}` };
  }
  const position = Number(match[1]);
  let line = firstLine;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < position; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, reason: `malformed JSON: ${reason} (column ${position - lineStart + 1})` };
}
