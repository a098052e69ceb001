/**
 * Where the installed ctxdedup package lives, found without loading the native addon.
 * @internal
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The directory holding ctxdedup's package.json (the nearest one above this module). @internal */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'ctxdedup') {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('ctxdedup: cannot locate the package root');
    dir = parent;
  }
}

/** The `version` field of ctxdedup's package.json. @internal */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
