"""What travels between the grading process and a worker: a `Task` (one notebook of one
student, its bytes included) and its `Outcome`. Light on purpose: the grading process imports
it without the workers' torch, kernels and checks."""

from __future__ import annotations

from dataclasses import dataclass

from autograder.model.grades import NotebookGrade


@dataclass(frozen=True)
class Task:
    """One notebook of one student, with the file's bytes (no shared filesystem needed)."""

    student: str
    notebook: str
    file: str  # the file's path relative to the student's folder
    content: bytes
    key: str  # the state key the grading process will file the grade under
    master_key: str  # the master and grading code the grading process has
    notes: tuple[str, ...] = ()
    more: bool = True  # start the next notebook's jails ahead (a lone worker, not its last task)


@dataclass
class Outcome:
    grade: NotebookGrade
    feedback: str  # the HTML page
    executed: str | None = None  # the executed graded notebook (nbformat JSON)
