#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests, once: nothing happens when it is already there.
# The tests drive /usr/bin/chromium through Playwright; Playwright never downloads a browser here.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "chromium: already installed ($("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM"))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null

if [ ! -x "$CHROMIUM" ]; then
    echo "chromium: installation finished but $CHROMIUM is missing" >&2
    exit 1
fi
echo "chromium: installed ($("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM"))"
