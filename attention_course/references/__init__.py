"""Reference answers of graded notebooks, for the notebooks that build on them.

Each module holds the answers of one notebook and ships to students only once that notebook
has been graded (`autograder.course.staging` says which module gives away which notebook). Nothing
here is imported by this package's own `__init__`: a module is loaded only when asked for.
"""
