"""`python -m autograder COMMAND ...`: see autograder/cli.py."""

from __future__ import annotations

import sys

from autograder.cli import main

if __name__ == "__main__":
    sys.exit(main())
