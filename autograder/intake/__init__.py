"""Intake: what students hand in. Reading a class folder, zip or file-name pattern within bounds
(`intake`), and matching each student's files to the course's masters (`discover`).

May import: model, course (until the masters move into the model, `discover` also reads
worker.context and worker.rebuild: the exception listed in tests/unit/test_grader_structure.py).
"""
