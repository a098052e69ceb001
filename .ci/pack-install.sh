#!/usr/bin/env bash
# Installs ctxdedup the way a user does, and proves that it needs no Rust toolchain: packs the main
# package and this platform's prebuilt package (npm/<platform>/, whose .node `npm install` built),
# installs both tarballs into an empty project on a PATH without cargo or rustc, then imports the
# API and runs the CLI there. Also checks that the install is lean (no optional peer is installed,
# the CLI says what to install for `serve`), and that without the platform package the import
# fails with the loader's one error naming the package. Prints the installed size.
#
# Run after `npm install` (which builds the addon). The registry is only asked for the small
# runtime dependencies (commander, smol-toml, gpt-tokenizer), from the npm cache when it has them.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "pack-install: FAIL: $*" >&2; exit 1; }

VERSION="$(node -p "require('./package.json').version")"
# This machine's napi platform id, as the loader (src/native.ts) computes it.
PLATFORM="$(node -e '
const { platform, arch } = process;
let musl = false;
try { musl = require("fs").readFileSync("/usr/bin/ldd", "utf8").includes("musl"); } catch { musl = !process.report.getReport().header.glibcVersionRuntime; }
console.log(platform === "linux" ? `linux-${arch}-${musl ? "musl" : "gnu"}` : platform === "win32" ? `win32-${arch}-msvc` : `${platform}-${arch}`);
')"
[ -f "npm/$PLATFORM/package.json" ] || fail "no per-platform package npm/$PLATFORM/ for this machine"
[ -f "npm/$PLATFORM/ctxdedup.$PLATFORM.node" ] || fail "no npm/$PLATFORM/ctxdedup.$PLATFORM.node: run npm install (or npm run build:native) first"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== pack ctxdedup@$VERSION and ctxdedup-$PLATFORM@$VERSION"
# The main package is packed without its lifecycle scripts: `prepare` is the from-source build
# (cargo), which packing must not need; dist/ is compiled here instead.
node node_modules/typescript/bin/tsc -p tsconfig.json
npm pack --ignore-scripts --silent --pack-destination "$WORK" >/dev/null
(cd "npm/$PLATFORM" && npm pack --ignore-scripts --silent --pack-destination "$WORK" >/dev/null)
MAIN_TGZ="$WORK/ctxdedup-$VERSION.tgz"
PLATFORM_TGZ="$WORK/ctxdedup-$PLATFORM-$VERSION.tgz"
[ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ] || fail "npm pack did not produce $MAIN_TGZ and $PLATFORM_TGZ"
tar -tzf "$MAIN_TGZ" | grep -q '\.node$' && fail "the main package must not carry a .node (it belongs in ctxdedup-$PLATFORM)"
tar -tzf "$PLATFORM_TGZ" | grep -qx "package/ctxdedup.$PLATFORM.node" || fail "ctxdedup-$PLATFORM has no ctxdedup.$PLATFORM.node"

# A PATH with no Rust toolchain: every directory holding cargo or rustc is left out.
NO_RUST_PATH=""
IFS=: read -r -a dirs <<< "$PATH"
for dir in "${dirs[@]}"; do
  [ -n "$dir" ] || continue
  if [ -e "$dir/cargo" ] || [ -e "$dir/rustc" ] || [ -e "$dir/rustup" ]; then continue; fi
  NO_RUST_PATH="${NO_RUST_PATH:+$NO_RUST_PATH:}$dir"
done
no_rust() { env -u CARGO_HOME -u RUSTUP_HOME -u RUSTUP_TOOLCHAIN -u CARGO PATH="$NO_RUST_PATH" "$@"; }
no_rust sh -c '! command -v cargo && ! command -v rustc' >/dev/null || fail "cargo or rustc is still on the PATH"
no_rust sh -c 'command -v node && command -v npm' >/dev/null || fail "node or npm is not on the PATH without Rust"

new_project() {
  mkdir -p "$1"
  printf '{ "name": "app", "version": "1.0.0", "private": true, "type": "module" }\n' > "$1/package.json"
}

echo "== install both tarballs into an empty project, without cargo or rustc"
APP="$WORK/app"
new_project "$APP"
(cd "$APP" && no_rust npm install --no-audit --no-fund --prefer-offline --loglevel=error "$MAIN_TGZ" "$PLATFORM_TGZ")

cp examples/sample-transcript.json "$APP/sample.json"
cat > "$APP/check.mjs" <<'EOF'
import { existsSync, readFileSync } from 'node:fs';
import { dedupeMessages, restoreMessages, sha256 } from 'ctxdedup';
import { dedupe } from 'ctxdedup/cce';
import { IngestIndex } from 'ctxdedup/ingest';
import { InMemoryStore, MemoryDeduplicator } from 'ctxdedup/memory';

const assert = (ok, what) => { if (!ok) { console.error(`check: ${what}`); process.exit(1); } };
const sample = JSON.parse(readFileSync('sample.json', 'utf8'));
const messages = (Array.isArray(sample) ? sample : sample.messages).map((m, i) => ({ id: `m${i}`, ...m }));
const result = dedupeMessages(messages);
assert(result.stats.exactDuplicates + result.stats.nearDuplicates > 0, 'the sample has duplicates');
assert(JSON.stringify(restoreMessages(result.messages, result.verbatim)) === JSON.stringify(messages), 'restore gives the input back');
assert(sha256('hello') === '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824', 'sha256');
assert(Array.isArray(dedupe([{ id: 1, index: 0, role: 'user', content: 'x' }]).messages), 'ctxdedup/cce');
const index = await IngestIndex.open({ store: 'memory' });
const ingested = await index.ingest('ns', [{ content: 'a' }, { content: 'a' }]);
await index.close();
assert(ingested.map((r) => r.status).join() === 'new,duplicate', 'ctxdedup/ingest with the memory store');
assert(new MemoryDeduplicator({ store: new InMemoryStore() }) !== undefined, 'ctxdedup/memory');
for (const peer of ['better-sqlite3', 'fastify', 'chromadb', 'ioredis', 'onnxruntime-node']) {
  assert(!existsSync(`node_modules/${peer}`), `${peer} must not be installed with ctxdedup (it is an optional peer)`);
}
const installed = JSON.parse(readFileSync('node_modules/ctxdedup/package.json', 'utf8'));
for (const script of ['preinstall', 'install', 'postinstall']) assert(!installed.scripts?.[script], `no ${script} script`);
console.log(`check: ${messages.length} messages, ${result.stats.exactDuplicates} exact and ${result.stats.nearDuplicates} near duplicates, restored exactly`);
EOF
(cd "$APP" && no_rust node check.mjs) || fail "the API does not work in the installed project"

echo "== the CLI from the installed project"
(cd "$APP" && no_rust npx --no-install ctxdedup --help >/dev/null) || fail "npx ctxdedup --help"
out="$(cd "$APP" && no_rust npx --no-install ctxdedup dedupe sample.json --dry-run)" || fail "npx ctxdedup dedupe --dry-run"
echo "$out" | grep -q 'tokens saved' || fail "ctxdedup dedupe --dry-run printed no report: $out"
echo "$out" | head -3
set +e
serve="$(cd "$APP" && no_rust npx --no-install ctxdedup serve --store memory --port 0 2>&1)"
code=$?
set -e
[ "$code" = 1 ] && echo "$serve" | grep -q 'needs the optional package fastify, which is not installed' ||
  fail "ctxdedup serve without fastify must exit 1 saying to install it (exit $code): $serve"

echo "== installed size of a project that uses the root entry"
(cd "$APP" && du -sh node_modules && du -sh node_modules/* | sort -rh)

echo "== without the platform package (--omit=optional): one clear error"
BARE="$WORK/bare"
new_project "$BARE"
(cd "$BARE" && no_rust npm install --no-audit --no-fund --prefer-offline --loglevel=error --omit=optional "$MAIN_TGZ")
set +e
err="$(cd "$BARE" && no_rust node -e "import('ctxdedup')" 2>&1)"
code=$?
set -e
[ "$code" != 0 ] || fail "importing ctxdedup without its platform package must fail"
echo "$err" | grep -q "no native addon for $PLATFORM .*install the package ctxdedup-$PLATFORM@$VERSION" ||
  fail "the loader's error must name $PLATFORM and ctxdedup-$PLATFORM@$VERSION: $err"
echo "$err" | grep -m1 '^Error: ctxdedup: no native addon'

echo "== pack-install: ok"
