"""The course model and the grader's settings: the notebooks and grade ids (`contract`), where the
course's files live (`paths`), reading notebooks (`notebook_io`), every limit (`settings`) and a
notebook's grade (`grades`).

May import: nothing else of `autograder` (`grades` carries the checks' `CellResult`: the one
exception, listed in tests/unit/test_grader_structure.py).
"""
