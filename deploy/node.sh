#!/usr/bin/env bash
# Install Node.js and npm (Debian's packages) for rebuilding the explorer bundle, once.
#
#   deploy/node.sh          install node and npm if either is missing, else do nothing
#
# Only `make web` and tests/web/test_bundle.py (which checks the committed bundle in
# processors/gateway/static/ is what web/ builds) need them: installing or running kgflow does not.
# esbuild and TypeScript are pinned by web/package-lock.json, so any Node >= 18 builds the same bytes.
# Needs root (or sudo) for apt-get, as CI's machine has.
set -euo pipefail

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
else
    echo "node: node/npm are missing and apt-get needs root; install Debian's nodejs and npm packages" >&2
    exit 2
fi
echo "node: installing Debian's nodejs and npm packages (explorer bundle check)" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
node --version >&2
