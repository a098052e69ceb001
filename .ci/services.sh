#!/usr/bin/env bash
# Installs the system packages the integration suites use for real, from Debian's packages:
# redis-server, and chromium (renders the CLI's HTML report in a screenshot test).
# Idempotent: installs only what is missing. The tests start and stop their
# own redis-server processes on 127.0.0.1 (random free port, no persistence); nothing is left
# running by this script.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
if [ ${#missing[@]} -eq 0 ]; then
  echo "services: $(redis-server --version)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "services: ${missing[*]} missing and this user cannot run apt-get (not root, no sudo)" >&2
    exit 1
  fi
fi

echo "services: installing ${missing[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q < /dev/null
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" < /dev/null
# The package may start a system instance on 6379; the tests never use it, so stop it if we can.
if command -v service >/dev/null 2>&1; then $SUDO service redis-server stop >/dev/null 2>&1 || true; fi
echo "services: $(redis-server --version)"
