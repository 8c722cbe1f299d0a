"""`python -m autograder gradescope --notebooks 02 --out autograder.zip`: a Gradescope autograder.

build.py writes the zip (setup.sh, run_autograder, the grader, the chosen notebooks' masters,
a locked environment); run.py is what run_autograder runs for each submission: the same
`grade` as the command line, then results.py turns the grades into Gradescope's
results.json, whose shape schema.py states. The command prints what to set in Gradescope.

May import: every package of the grader, and `autograder.cli` (it runs `grade`).
"""
