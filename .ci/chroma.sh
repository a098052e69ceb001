#!/usr/bin/env bash
# Installs the ChromaDB server the memory-store suite starts for real: PyPI's `chromadb` (which
# ships the `chroma` CLI and its Rust server) in a private virtualenv at <repo>/.cache/chroma-venv
# (.cache/ is gitignored). Idempotent: does nothing when the pinned version is already there.
# The tests start and stop their own `chroma run` processes on 127.0.0.1 (free port, temporary
# --path); nothing is left running by this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the store and its tests are written against this server's HTTP API and behaviour
# (add of an existing id is a silent no-op, update merges metadata, ...).
CHROMA_VERSION="1.5.9"
VENV="$PWD/.cache/chroma-venv"
PY="$VENV/bin/python"

installed_version() {
  [ -x "$PY" ] || return 1
  # importlib.metadata reads the dist-info only: importing chromadb itself is slow and would
  # initialise its telemetry.
  "$PY" -c 'import importlib.metadata as m; print(m.version("chromadb"))' 2>/dev/null
}

if [ "$(installed_version || true)" = "$CHROMA_VERSION" ] && [ -x "$VENV/bin/chroma" ]; then
  echo "chroma: chromadb $CHROMA_VERSION already in $VENV"
  exit 0
fi

if [ ! -x "$PY" ]; then
  echo "chroma: creating the virtualenv $VENV"
  # A leftover without a working interpreter (its base Python gone) cannot be repaired in place.
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  if ! python3 -m venv "$VENV" < /dev/null; then
    # Debian's python3 ships without venv/ensurepip; python3-venv adds them.
    rm -rf "$VENV"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "chroma: python3 -m venv failed and this user cannot apt-get install python3-venv" >&2
        exit 1
      fi
    fi
    $SUDO apt-get update -q < /dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv < /dev/null
    python3 -m venv "$VENV" < /dev/null
  fi
fi

echo "chroma: installing chromadb==$CHROMA_VERSION from PyPI into $VENV (takes a few minutes)"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install --quiet --no-input "chromadb==$CHROMA_VERSION" < /dev/null

version="$(installed_version || true)"
if [ "$version" != "$CHROMA_VERSION" ] || [ ! -x "$VENV/bin/chroma" ]; then
  echo "chroma: install failed (found chromadb '${version:-none}', want $CHROMA_VERSION)" >&2
  exit 1
fi
echo "chroma: chromadb $version installed in $VENV"
