/**
 * Loads the native addon built from crates/ctxdedup-node.
 * Nothing here decides anything: validation lives in the stage modules, algorithms in Rust.
 * @internal
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type * as Binding from './native-binding.js';
import { packageRoot } from './package-root.js';

/**
 * The addon's exports, typed by the contract the napi CLI generates from the Rust binding
 * (`src/native-binding.ts`, committed; `npm run build` fails when it is stale).
 * @internal
 */
export type NativeBinding = typeof Binding;

export type {
  NativeAnalysis,
  NativeAnalyzeOptions,
  NativeBlockOptions,
  NativeBlocks,
  NativeClusters,
  NativeFindings,
  NativeIngestBatch,
  NativeNearest,
  NativeNearMatches,
  Keep,
  Linkage,
  TemplateKind,
  TokenEncoding as NativeTokenEncoding,
} from './native-binding.js';

/** Whether this Linux process runs on musl rather than glibc (as napi-rs's own loaders decide). */
function isMusl(): boolean {
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    // No ldd (a minimal image): glibc reports its version in the process report, musl does not.
    const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
    return header?.glibcVersionRuntime === undefined;
  }
}

/** The napi platform id of this process, e.g. `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
function platformId(): string {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** Where the loaded addon came from (what `ctxdedup doctor` prints). @internal */
export interface NativeOrigin {
  /** The file that was loaded. */
  file: string;
  /** How it was found: the `CTXDEDUP_NATIVE_PATH` override, a build inside the package, or a platform package. */
  via: 'CTXDEDUP_NATIVE_PATH' | 'package build' | 'platform package';
  /** The napi platform id it was loaded as (undefined for the override). */
  platform: string | undefined;
  /** Candidates tried before it, with why they failed to load. */
  failures: string[];
}

let origin: NativeOrigin | undefined;

/**
 * Loads the addon, from (in order) `CTXDEDUP_NATIVE_PATH`, a build from source in this checkout
 * (`npm/<platform>/`, where `npm run build:native` puts it), or the prebuilt per-platform package
 * `ctxdedup-<platform>` (an optional dependency of ctxdedup, which npm installs on that platform
 * only).
 * @throws Error naming the platform and the package to install when none of them loads.
 */
function load(): NativeBinding {
  const require = createRequire(import.meta.url);
  const id = platformId();
  const root = packageRoot();
  const pkg = `ctxdedup-${id}`;
  const override = process.env['CTXDEDUP_NATIVE_PATH'];
  const local = join(root, 'npm', id, `ctxdedup.${id}.node`);
  const candidates: { path: string; via: NativeOrigin['via']; platform: string | undefined }[] = [
    ...(override ? [{ path: override, via: 'CTXDEDUP_NATIVE_PATH' as const, platform: undefined }] : []),
    ...(existsSync(local) ? [{ path: local, via: 'package build' as const, platform: id }] : []),
    { path: pkg, via: 'platform package', platform: id },
  ];
  const failures: string[] = [];
  let packageMissing = false;
  for (const { path: candidate, via, platform } of candidates) {
    try {
      const binding = require(candidate) as NativeBinding;
      origin = { file: require.resolve(candidate), via, platform, failures: failures.slice() };
      return binding;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (candidate === pkg && code === 'MODULE_NOT_FOUND' && String(message).includes(`'${pkg}'`)) {
        packageMissing = true;
      } else {
        failures.push(`${candidate}: ${String(message).split('\n')[0]}`);
      }
    }
  }
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string; optionalDependencies?: Record<string, string> };
  const version = manifest.version ?? 'latest';
  const prebuilt = Object.keys(manifest.optionalDependencies ?? {})
    .filter((name) => name.startsWith('ctxdedup-'))
    .map((name) => name.slice('ctxdedup-'.length));
  const fromSource = 'or build it from source in a clone of the repository (`npm install`, needs Rust: https://rustup.rs)';
  let advice: string;
  if (!prebuilt.includes(id)) {
    advice = `no prebuilt package exists for ${id} (prebuilt: ${prebuilt.join(', ') || 'none'}): ${fromSource}.`;
  } else if (packageMissing) {
    advice =
      `install the package ${pkg}@${version} (\`npm install ${pkg}@${version}\`), ${fromSource}. ` +
      'npm installs it with ctxdedup as an optional dependency, unless optional dependencies were omitted ' +
      '(--omit=optional, --no-optional) or the lockfile was made on another platform.';
  } else {
    advice = `the installed ${pkg} failed to load; reinstall ${pkg}@${version}, ${fromSource}.`;
  }
  throw new Error(`ctxdedup: no native addon for ${id} (Node.js ${process.version}): ${advice}${failures.map((f) => `\n  tried ${f}`).join('')}`);
}

/** The loaded addon. @internal */
export const native: NativeBinding = load();

/** Where {@link native} was loaded from. @internal */
export const nativeOrigin: NativeOrigin = origin as NativeOrigin;
