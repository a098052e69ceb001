#!/usr/bin/env bash
# Installs the services the integration suites start for real (redis-server, Debian package).
# Idempotent: does nothing when redis-server is already on PATH. The tests start and stop their
# own redis-server processes on 127.0.0.1 (random free port, no persistence); nothing is left
# running by this script.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  echo "services: $(redis-server --version)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "services: redis-server is missing and this user cannot run apt-get (not root, no sudo)" >&2
    exit 1
  fi
fi

echo "services: installing redis-server from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q < /dev/null
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server < /dev/null
# The package may start a system instance on 6379; the tests never use it, so stop it if we can.
if command -v service >/dev/null 2>&1; then $SUDO service redis-server stop >/dev/null 2>&1 || true; fi
echo "services: $(redis-server --version)"
