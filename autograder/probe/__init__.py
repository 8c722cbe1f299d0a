"""The probe side of the checks: call a student's code on given inputs and record what it did.

This package runs where student code runs (a jail). It imports only the standard library,
numpy, torch and its own modules (relative imports), so that it can be mounted alone under
another top-level name. A probe never decides anything: it returns plain data (numbers,
strings, lists, dicts, numpy arrays) that the grader's judges read.

May import: nothing of `autograder` (relative imports of its own modules only).
"""

ERROR_SUFFIX = "!"  # observed[key + "!"] holds the error text when computing observed[key] failed

# The observed data of an answer that never ran (the probe found nothing to call), in place of
# what a probe records; the judges turn each into a zero with its reason (checks/base.py).
MISSING = "!missing"  # observed[MISSING]: the graded names the answer cell did not define
EXEC = "!exec"  # observed[EXEC]: the error text of the answer cell (or its cells) raising
IMPORTED = "!imported"  # observed[IMPORTED]: graded names imported, not defined (provenance)
