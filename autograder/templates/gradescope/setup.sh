#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from the zip
# (unpacked into /autograder/source). Made for Gradescope's Ubuntu 22.04 base image: Python
# 3.11 and bubblewrap from Ubuntu's own packages, then a virtual environment holding exactly
# the packages of requirements.lock (torch from PyTorch's CPU index: no GPU there).
#
#   setup.sh [--skip-system] [--skip-install]
#     --skip-system    no apt-get (Python 3.11 and bwrap are already there)
#     --skip-install   neither apt-get nor pip: use the environment GRADER_VENV as it is
#   AUTOGRADER_ROOT    the autograder's folder (default /autograder; tests lay one out elsewhere)
#   GRADER_VENV        the virtual environment to make or use (default $AUTOGRADER_ROOT/venv)
#   GRADER_PIP_ARGS    more options for pip install (tests: --dry-run)
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="${GRADER_VENV:-$ROOT/venv}"
BASE_PYTHON="${GRADER_BASE_PYTHON:-python3.11}"
TORCH_INDEX="https://download.pytorch.org/whl/cpu"

system=1
install=1
for arg in "$@"; do
  case "$arg" in
    --skip-system) system=0 ;;
    --skip-install) system=0; install=0 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

if [ "$system" = 1 ]; then
  [ -r /etc/os-release ] && . /etc/os-release && echo "setup.sh: on ${PRETTY_NAME:-an unknown system}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if ! apt-get install -y -qq --no-install-recommends \
      python3.11 python3.11-venv bubblewrap util-linux libseccomp2 ca-certificates >/dev/null; then
    echo "setup.sh: could not install python3.11 and bubblewrap with apt-get: choose" \
         "Gradescope's Ubuntu 22.04 base image, or install Python 3.11 and set" \
         "GRADER_BASE_PYTHON" >&2
    exit 1
  fi
fi

if [ "$install" = 1 ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    "$BASE_PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
  fi
  # The lock is the whole environment: exactly its packages, nothing resolved anew.
  torch_pin="$(grep -m1 '^torch==' "$SOURCE/requirements.lock")"
  # shellcheck disable=SC2086  # GRADER_PIP_ARGS: more pip options, split on spaces
  "$VENV/bin/python" -m pip install --no-deps ${GRADER_PIP_ARGS:-} \
    --index-url "$TORCH_INDEX" "$torch_pin"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install --no-deps ${GRADER_PIP_ARGS:-} -r "$SOURCE/requirements.lock"
  "$VENV/bin/python" -m pip check
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup.sh: no virtual environment at $VENV" >&2
  exit 1
fi
# run_autograder reads which Python to run from here.
printf 'GRADER_PYTHON=%q\n' "$VENV/bin/python" >"$SOURCE/grader-env.sh"
cd "$SOURCE"
# The same variables as run_autograder: the proof made here is the one each submission finds.
PYTHONPATH="$SOURCE" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
  "$VENV/bin/python" -m autograder.gradescope.run --root "$ROOT" --check
echo "setup.sh: done"
