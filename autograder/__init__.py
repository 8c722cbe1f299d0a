"""Grading package of the self-attention course: contract, checks, sandbox, CLI."""
