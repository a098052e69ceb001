/**
 * Which files a command reads and writes, checked before any work: every path is resolved the way
 * the file system sees it (symlinks followed, hard links recognised), so that no output can be an
 * input or another output of the same run.
 * @module
 */
import { fstatSync, type BigIntStats } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { UsageError } from './errors.js';

/** A path the command reads or writes, with the role it plays (for messages). */
export interface PathUse {
  /** The path as the user gave it (or as discovered in an input directory). */
  path: string;
  /** What it is: `input`, `-o`, `--verbatim`, `--report`, … */
  role: string;
}

/** A path resolved with realpath semantics. */
export interface ResolvedPath extends PathUse {
  /**
   * Absolute path with every symlink resolved. For a path that does not exist yet: its nearest
   * existing ancestor resolved, the rest of the path appended.
   */
  real: string;
  /** Identity: device and inode of an existing file (hard links share it), else the real path. */
  id: string;
  /** What is there now, if anything. */
  kind: 'file' | 'directory' | 'other' | 'none';
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

function identity(info: BigIntStats): string {
  return `${info.dev}:${info.ino}`;
}

function kindOf(info: BigIntStats): ResolvedPath['kind'] {
  return info.isFile() ? 'file' : info.isDirectory() ? 'directory' : 'other';
}

/**
 * Resolves `use.path` with realpath semantics.
 * @throws UsageError when a parent folder of the path is a file
 */
export async function resolveUse(use: PathUse): Promise<ResolvedPath> {
  const absolute = resolve(use.path);
  let info: BigIntStats | undefined;
  try {
    info = await stat(absolute, { bigint: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') throw new UsageError(`${use.role} ${use.path}: a parent of it is not a directory`);
    if (!isMissing(error)) throw error;
  }
  if (info !== undefined) {
    // `<(cmd)` is /dev/fd/N, whose link names a pipe that realpath cannot follow: the path stands.
    const real = await realpath(absolute).catch((error: unknown) => {
      if (isMissing(error) && !info.isFile() && !info.isDirectory()) return absolute;
      throw error;
    });
    return { ...use, real, id: identity(info), kind: kindOf(info) };
  }
  // Not there yet (or a dangling symlink, which a rename replaces): resolve the nearest existing
  // ancestor and append the rest.
  const rest = [basename(absolute)];
  for (let dir = dirname(absolute); ; dir = dirname(dir)) {
    try {
      const real = join(await realpath(dir), ...rest);
      return { ...use, real, id: real, kind: 'none' };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') throw new UsageError(`${use.role} ${use.path}: a parent of it is not a directory`);
      if (!isMissing(error) || dirname(dir) === dir) throw error;
      rest.unshift(basename(dir));
    }
  }
}

/** The identity of a stream's file descriptor when it is a regular file (stdout redirected to a file), else `undefined`. */
export function streamFile(stream: unknown): string | undefined {
  const fd = (stream as { fd?: unknown } | null)?.fd;
  if (typeof fd !== 'number') return undefined;
  try {
    const info = fstatSync(fd, { bigint: true });
    return info.isFile() ? identity(info) : undefined;
  } catch {
    return undefined;
  }
}

/** Names a path in a message: `input in.json`, or what stdin is redirected from. */
function describe(use: PathUse): string {
  return use.role === 'stdin' ? 'the file stdin is redirected from' : `${use.role} ${use.path}`;
}

/** The standard streams of a command, when it uses them: a regular file behind one counts. */
export interface StdStreams {
  /** Read as an input (`-`). */
  stdin?: unknown;
  /** Written (output or report). */
  stdout?: unknown;
}

/**
 * Checks, before any work, that no output is an input or another output, and that every output
 * can be a regular file. Inputs are compared by identity (device and inode, so symlinks and hard
 * links count), outputs that do not exist yet by their real path.
 * @param inputs - files the command reads (stdin excluded)
 * @param outputs - files the command writes
 * @param streams - stdin and stdout, when redirected from or to a file
 * @returns the real path of every output (write there, not through a symlink)
 * @throws UsageError naming both paths
 */
export async function checkPaths(inputs: readonly PathUse[], outputs: readonly PathUse[], streams: StdStreams = {}): Promise<string[]> {
  const read = new Map<string, PathUse>();
  const stdinId = streamFile(streams.stdin);
  if (stdinId !== undefined) read.set(stdinId, { path: '(redirected stdin)', role: 'stdin' });
  for (const input of inputs) {
    const r = await resolveUse(input);
    if (!read.has(r.id)) read.set(r.id, r);
  }
  const stdout = streams.stdout;
  const written = new Map<string, PathUse>();
  const stdoutId = streamFile(stdout);
  if (stdoutId !== undefined) {
    const input = read.get(stdoutId);
    if (input !== undefined) throw new UsageError(`stdout is redirected to ${describe(input)}: it would overwrite what it reads`);
    written.set(stdoutId, { path: '(redirected stdout)', role: 'stdout' });
  }
  const paths: string[] = [];
  for (const output of outputs) {
    const r = await resolveUse(output);
    if (r.kind === 'directory') throw new UsageError(`${r.role} ${r.path} is a directory, not a file`);
    if (r.kind === 'other') throw new UsageError(`${r.role} ${r.path} is not a regular file (outputs are written to a temporary file and renamed into place)`);
    const input = read.get(r.id);
    if (input !== undefined) {
      const same = input.path === r.path ? '' : ` (${describe(input)})`;
      throw new UsageError(`${r.role} ${r.path} would overwrite an input${same}`);
    }
    const other = written.get(r.id);
    if (other !== undefined) {
      throw new UsageError(
        other.role === 'stdout'
          ? `stdout is redirected to ${r.role} ${r.path}: one file cannot take both`
          : `${other.role} ${other.path} and ${r.role} ${r.path} are the same file`,
      );
    }
    written.set(r.id, r);
    paths.push(r.real);
  }
  return paths;
}
