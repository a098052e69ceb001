/**
 * The compiled package under dist/, for the suites that run the built CLI or import the built
 * package.
 * @module
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Modification time of the newest `.ts` file below `dir`. */
function newestSource(dir: string): number {
  return Math.max(
    ...readdirSync(dir, { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => statSync(join(e.parentPath, e.name)).mtimeMs),
  );
}

/** Compiles the TypeScript (tsc -p tsconfig.json) when `output` (a file under dist/) is missing or older than src/. */
export function ensureBuilt(output: string): void {
  if (!existsSync(output) || statSync(output).mtimeMs < newestSource(join(ROOT, 'src'))) {
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
  }
}
