#!/usr/bin/env bash
# Install bubblewrap (bwrap), the jail of student code, once: nothing happens when it is there.
# The grader also needs prlimit, unshare and setpriv (util-linux, present on Debian and Ubuntu).
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
    echo "bwrap: already installed ($(bwrap --version 2>/dev/null || command -v bwrap))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends bubblewrap util-linux >/dev/null

if ! command -v bwrap >/dev/null 2>&1; then
    echo "bwrap: installation finished but bwrap is not on PATH" >&2
    exit 1
fi
echo "bwrap: installed ($(bwrap --version))"
