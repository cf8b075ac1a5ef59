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
# shellcheck source=deploy/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
apt_install chromium chromium fonts-dejavu-core
"$CHROMIUM" --version >&2
