"""A class's run: the `grade` command, the proof that the grader grades (`proof`), the executor that
hands tasks to local workers or Dask (`executor`, `cluster`).

May import: model, checks, course, jail, intake, worker, publish.
"""
