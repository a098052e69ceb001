#!/usr/bin/env node
// Builds the Rust addon from source with the napi CLI and places it in npm/<platform>/, where
// the TypeScript loader (src/native.ts) finds it, and checks the typings the napi CLI generates
// against the committed src/native-binding.ts (the contract src/native.ts types the addon with):
// a stale file fails the build. Usage: node npm/build-native.mjs [--release] [--update-types]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const staging = join(root, 'target', 'napi-out');
rmSync(staging, { recursive: true, force: true });
mkdirSync(staging, { recursive: true });

const args = [
  'napi',
  'build',
  '--platform',
  '--no-js',
  '--manifest-path',
  'crates/ctxdedup-node/Cargo.toml',
  '--package-json-path',
  'package.json',
  '--output-dir',
  staging,
  '--dts',
  'native.d.ts',
  // String enums become unions of their values ('earliest' | 'latest'), numeric enums runtime enums.
  '--no-const-enum',
];
if (process.argv.includes('--release')) args.push('--release');
const result = spawnSync('npx', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
if (result.status !== 0) {
  console.error('ctxdedup: building the native addon failed (is a Rust toolchain installed? https://rustup.rs)');
  process.exit(result.status ?? 1);
}

const built = readdirSync(staging).filter((f) => /^ctxdedup\..+\.node$/.test(f));
if (built.length !== 1) {
  console.error(`ctxdedup: expected one .node file in ${staging}, found: ${built.join(', ') || 'none'}`);
  process.exit(1);
}
const platform = built[0].slice('ctxdedup.'.length, -'.node'.length);
const dest = join(root, 'npm', platform);
mkdirSync(dest, { recursive: true });
renameSync(join(staging, built[0]), join(dest, built[0]));
console.log(`ctxdedup: native addon -> npm/${platform}/${built[0]}`);

// The generated contract: committed, so TypeScript checks every call against the Rust signatures.
const generated = readFileSync(join(staging, 'native.d.ts'), 'utf8');
const contract = join(root, 'src', 'native-binding.ts');
if (!existsSync(contract) || readFileSync(contract, 'utf8') !== generated) {
  if (process.argv.includes('--update-types')) {
    writeFileSync(contract, generated);
    console.log('ctxdedup: src/native-binding.ts updated from the binding');
  } else {
    console.error('ctxdedup: src/native-binding.ts is stale (the Rust binding changed): run `npm run build:types` and commit it');
    process.exit(1);
  }
}
