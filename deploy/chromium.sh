#!/usr/bin/env bash
# Install Debian's Chromium for the explorer's browser tests (tests/web), once.
#
#   deploy/chromium.sh          install /usr/bin/chromium if it is missing, else do nothing
#
# The tests drive it with Playwright's Python package (a test extra) through `executable_path`;
# `playwright install` is never run: it downloads a browser build of its own, which this project
# does not fetch. Needs root (or sudo) for apt-get, as CI's machine has.
set -euo pipefail

CHROMIUM=${KGFLOW_CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ] && "$CHROMIUM" --version >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
else
    echo "chromium: $CHROMIUM is missing and apt-get needs root; install Debian's chromium package" >&2
    exit 2
fi
echo "chromium: installing Debian's chromium package (browser tests)" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null
"$CHROMIUM" --version >&2
