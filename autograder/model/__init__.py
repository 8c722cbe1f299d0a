"""The course model and the grader's settings: the notebooks and grade ids, and the one rule
that names a notebook (`contract`), the masters and the grading code's version (`course`),
where the course's files live (`paths`), reading notebooks (`notebook_io`), every limit
(`settings`) and a notebook's grade (`grades`).

May import: nothing else of `autograder`, but for the exceptions listed in
tests/unit/test_grader_structure.py (`grades` carries the checks' `CellResult`; a `Master`
reads its context, release stubs and hidden helpers from worker.context, worker.rebuild and
course.staging).
"""
