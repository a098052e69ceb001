/** Helpers for the CLI suites: run the CLI in-process with captured streams, temp dirs. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { run, type RunHooks } from '../../src/cli/run.js';

/** Captured result of one CLI run. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

class Capture extends Writable {
  text = '';
  isTTY = false;
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** What lets the CLI's worker threads load its TypeScript sources. */
const WORKER_LOADER = new URL('./worker-loader.mjs', import.meta.url).href;

/** Runs `ctxdedup <args>` in this process; `stdin` feeds `-`. */
export async function cli(args: string[], stdin: string | Buffer = '', given: RunHooks = {}): Promise<Ran> {
  const hooks: RunHooks = { workerLoader: WORKER_LOADER, ...given };
  const stdout = new Capture();
  const stderr = new Capture();
  const input = Readable.from([typeof stdin === 'string' ? Buffer.from(stdin) : stdin]).pipe(new PassThrough());
  const code = await run(args, { stdin: input, stdout, stderr }, hooks);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** A fresh temp directory, removed by the returned cleanup. */
export function tempDir(prefix = 'ctxdedup-cli-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Walks two parsed JSON values and returns the paths where they differ; a string that changed
 * is reported with both values.
 */
export function diffJson(a: unknown, b: unknown, path = '$'): { path: string; before: unknown; after: unknown }[] {
  if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b) || (a === null) !== (b === null)) return [{ path, before: a, after: b }];
  if (typeof a === 'object' && a !== null) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b as object)]);
    if (Object.keys(a).join() !== Object.keys(b as object).join()) return [{ path, before: a, after: b }];
    return [...keys].flatMap((k) => diffJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`));
  }
  return a === b ? [] : [{ path, before: a, after: b }];
}
