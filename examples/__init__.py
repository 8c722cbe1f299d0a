"""The example class: `build.py` writes examples/submissions/ (`python -m autograder examples`)."""
