"""Intake: what students hand in. Reading a class folder, zip or file-name pattern within bounds
(`intake`), and matching each student's files to the course's masters (`discover`).

May import: model, course (and worker.rebuild, to match a file by its content: the exception
listed in tests/unit/test_grader_structure.py).
"""
