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
# shellcheck source=deploy/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
apt_install node nodejs npm
node --version >&2
