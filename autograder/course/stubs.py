"""What an answer cell looks like once released: the rule nbgrader's release and the grader share.

nbgrader replaces each `### BEGIN SOLUTION` ... `### END SOLUTION` region with the code stub
(`# YOUR CODE HERE` / `raise NotImplementedError()`), or a whole solution cell without such a
region with the stub. One exception, for prediction cells: when everything outside the region
is comments and named stubs (`ROW_SUMS_AFTER = ...  # "a", "b", "c" or "d"`), the region is
removed without a stub, so that the released cell names every variable it asks for and runs
without error; each `...` is the unanswered prediction. Imports nothing from nbgrader.
"""

from __future__ import annotations

import re

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
NAMED_STUB = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = \.\.\.(\s+#.*)?$")


def is_named_stub_cell(lines: list[str]) -> bool:
    """Lines outside a solution region that are only comments, blanks and `NAME = ...`."""
    kept = [line.strip() for line in lines if line.strip()]
    named = [line for line in kept if NAMED_STUB.match(line)]
    return bool(named) and all(NAMED_STUB.match(line) or line.startswith("#") for line in kept)


def released(source: str, code: bool, code_stub: str, text_stub: str) -> tuple[str, bool]:
    """(the released source of a solution cell, whether it had a solution region)."""
    stub = (code_stub if code else text_stub).split("\n")
    lines, outside, inside, replaced = [], [], False, False
    for line in source.split("\n"):
        if BEGIN in line:
            indent = re.match(r"\s*", line).group(0)
            lines += [indent + s for s in stub]
            inside = replaced = True
        elif END in line:
            inside = False
        elif not inside:
            lines.append(line)
            outside.append(line)
    if not replaced:
        return "\n".join(stub), False
    if code and is_named_stub_cell(outside):
        return "\n".join(outside).rstrip("\n"), True
    return "\n".join(lines), True
