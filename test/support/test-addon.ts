/**
 * The test build of the addon: a debug build of crates/ctxdedup-node with the cargo feature
 * `test-panic`, which adds `panicForTest` (absent from the product addon). Built on first use with
 * cargo (a no-op when up to date; about a minute on a fresh checkout, whose `npm test` has already
 * compiled the dependencies for `cargo test`), then loaded beside the product addon.
 */
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NativeBinding } from '../../src/native.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The product binding plus the test seam. */
export type TestBinding = NativeBinding & { panicForTest(): void };

let loaded: TestBinding | undefined;

/** Builds (if needed) and loads the test addon. */
export function testAddon(): TestBinding {
  if (loaded) return loaded;
  const out = execFileSync('cargo', ['build', '--quiet', '-p', 'ctxdedup-node', '--features', 'test-panic', '--message-format=json'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let library: string | undefined;
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line) as { reason?: string; target?: { name?: string; kind?: string[] }; filenames?: string[] };
    if (message.reason === 'compiler-artifact' && message.target?.name === 'ctxdedup_node' && message.target.kind?.includes('cdylib')) {
      library = message.filenames?.find((f) => /\.(so|dylib|dll)$/.test(f));
    }
  }
  if (library === undefined) throw new Error('test-addon: cargo reported no ctxdedup_node library');
  const module = { exports: {} as TestBinding };
  // A cdylib under its own name: process.dlopen loads it whatever the file extension.
  process.dlopen(module, library);
  loaded = module.exports;
  return loaded;
}
