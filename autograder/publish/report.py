"""The class report, OUT/report.html (templates/report.html.j2), and its three figures.

Only the notebooks of the run count (all of them, or those of `--notebooks`/`--assignment`).
Scores count the autograded points and what the instructor gave by hand in formgrader so far
(each grade `Settled` with the gradebook's hand grading); written answers still waiting are
counted as such. Students whose folder held several files for one notebook are listed with the
file graded and those left out.
Figures (matplotlib, Agg, PNG in OUT/report/ and inline in the page): the distribution of
each student's total in percent of the autograded points; each graded cell's share of full
marks among the students who handed in a readable notebook; how often each catalog mistake
was named.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: the report is drawn headless, in any process
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from autograder.intake.discover import Choice
from autograder.model.course import Master  # noqa: E402
from autograder.model.enums import Status  # noqa: E402
from autograder.publish.feedback import CSP, templates  # noqa: E402
from autograder.publish.handgrading import Settled  # noqa: E402
from autograder.publish.outdir import feedback_path  # noqa: E402
from autograder.publish.state import atomic_write  # noqa: E402


@dataclass
class ClassNumbers:
    totals: dict[str, list[float]] = field(default_factory=dict)  # student -> score, auto max, max
    passed: Counter = field(default_factory=Counter)  # (notebook, grade_id) -> full marks
    tried: Counter = field(default_factory=Counter)  # (notebook, grade_id) -> handed in
    mistakes: Counter = field(default_factory=Counter)
    auto: dict[str, float] = field(default_factory=dict)  # student -> autograded points alone

    def percent(self, student: str) -> float:
        score, auto_max, _ = self.totals[student]
        score = self.auto.get(student, score)
        return 100 * score / auto_max if auto_max else 0.0


def class_numbers(settled: list[Settled]) -> ClassNumbers:
    """Per-student totals, per-cell full marks and mistake counts."""
    numbers = ClassNumbers()
    for s in settled:
        g = s.grade
        t = numbers.totals.setdefault(g.student, [0.0, 0.0, 0.0])
        t[0] += s.score
        numbers.auto[g.student] = numbers.auto.get(g.student, 0.0) + g.score
        t[1] += g.max_score - g.manual_max
        t[2] += g.max_score
        for c in g.cells:
            if c.manual:
                continue
            if g.submitted:
                numbers.tried[g.notebook, c.grade_id] += 1
                numbers.passed[g.notebook, c.grade_id] += c.passed
            numbers.mistakes.update(c.mistakes)
    return numbers


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _inline(folder: Path, made: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each figure also as a data: URL: the page's CSP loads nothing else, and it travels alone."""
    for figure in made:
        png = base64.b64encode((folder / figure["file"]).read_bytes()).decode()
        figure["data"] = f"data:image/png;base64,{png}"
    return made


def _scores_alt(percents: list[float]) -> str:
    """The score histogram in words: how many students in each tenth of the points."""
    counts = [0] * 10
    for p in percents:
        counts[min(int(p // 10), 9)] += 1
    bands = [f"{10 * i}-{10 * i + 10}%: {n}" for i, n in enumerate(counts) if n]
    return (
        f"Histogram of the {len(percents)} students' totals in percent of the autograded "
        f"points, by tenths: {', '.join(bands) or 'none'}. Each total is in the table of "
        "students below."
    )


def _mistakes_alt(mistakes: list[tuple[str, int]], shown: int = 8) -> str:
    """The mistakes chart in words: the most frequent ones and their counts."""
    if not mistakes:
        return "No mistake was named."
    words = ", ".join(f"{m} {n} time{'s' if n != 1 else ''}" for m, n in mistakes[:shown])
    more = f" and {len(mistakes) - shown} more" if len(mistakes) > shown else ""
    return (
        f"Bar chart of how often each named mistake was found: {words}{more}. All of them, "
        "with what they mean, are in the table of named mistakes below."
    )


def figures(folder: Path, numbers: ClassNumbers) -> list[dict[str, str]]:
    """The report's PNGs; their titles are the page's headings (not repeated in the image)."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    fig, ax = plt.subplots(figsize=(6, 3.2))
    percents = [numbers.percent(s) for s in numbers.totals]
    ax.hist(percents, bins=[i * 10 for i in range(11)], color="#4c72b0", edgecolor="white")
    ax.set(xlabel="total score (% of the autograded points)", ylabel="students", xlim=(0, 100))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _save(fig, folder / "scores.png")
    made.append({"file": "scores.png", "title": "Class score distribution",
                 "alt": _scores_alt(percents), "numbers": "students"})  # fmt: skip
    if numbers.tried:
        keys = list(numbers.tried)
        fig, ax = plt.subplots(figsize=(6, 0.35 * len(keys) + 1.2))
        rates = [100 * numbers.passed[k] / numbers.tried[k] for k in keys]
        ax.barh([f"{nb[:2]} {gid}" for nb, gid in keys], rates, color="#2e7d4f")
        ax.invert_yaxis()
        ax.set(xlabel="students with full marks (% of those who handed it in)", xlim=(0, 100))
        _save(fig, folder / "pass_rates.png")
        alt = (
            f"Bar chart: for each of the {len(keys)} graded cells, the share of the students "
            f"who handed it in that got full marks, from {min(rates):.0f}% to "
            f"{max(rates):.0f}%; each cell's number is in the table of full marks below."
        )
        made.append({"file": "pass_rates.png", "title": "Full marks per graded cell",
                     "alt": alt, "numbers": "full-marks"})  # fmt: skip
    mistakes = numbers.mistakes.most_common()
    fig, ax = plt.subplots(figsize=(6, 0.35 * max(len(mistakes), 1) + 1.2))
    if mistakes:
        ax.barh([m for m, _ in mistakes], [n for _, n in mistakes], color="#c44e52")
        ax.invert_yaxis()
    else:
        ax.text(0.5, 0.5, "no mistakes named", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="times named")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _save(fig, folder / "mistakes.png")
    made.append({"file": "mistakes.png", "title": "Named mistakes across the class",
                 "alt": _mistakes_alt(mistakes), "numbers": "mistakes"})  # fmt: skip
    return _inline(folder, made)


def _students(settled: list[Settled], notebooks: list[str], numbers: ClassNumbers) -> list:
    by_key = {(s.grade.student, s.grade.notebook): s for s in settled}
    rows = []
    for student in sorted(numbers.totals):
        cells = []
        for nb in notebooks:
            g = by_key.get((student, nb))
            link = feedback_path(Path("."), student, nb).as_posix()
            cells.append({"grade": g.grade, "settled": g, "link": link} if g else None)
        score, _, max_score = numbers.totals[student]
        rows.append(
            {
                "name": student,
                "cells": cells,
                "score": round(score, 3),
                "max_score": round(max_score, 3),
            }
        )
    return rows


def write_report(
    out: Path,
    settled: list[Settled],
    masters: dict[str, Master],
    unjailed: bool = False,
    choices: dict[tuple[str, str], Choice] | None = None,
    notices: list[str] | None = None,
) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    grades = [s.grade for s in settled]
    numbers = class_numbers(settled)
    notebooks = list(masters)
    rates = [
        {
            "notebook": nb,
            "grade_id": gid,
            "passed": numbers.passed[nb, gid],
            "tried": n,
            "percent": 100 * numbers.passed[nb, gid] / n,
        }
        for (nb, gid), n in numbers.tried.items()
    ]
    counts = [(s, n) for s in Status if (n := sum(g.status == s for g in grades))]
    html = (
        templates()
        .get_template("report.html.j2")
        .render(
            csp=CSP,
            unjailed=unjailed or any(g.unjailed for g in grades),
            unbounded_memory=notices or [],
            students=_students(settled, notebooks, numbers),
            notebooks=notebooks,
            counts=counts,
            waiting=sum(len(s.waiting) for s in settled),
            by_hand=sum(s.by_hand for s in settled),
            choices=[
                {"student": student, "notebook": nb, "graded": c.graded, "left_out": c.left_out}
                for (student, nb), c in sorted((choices or {}).items())
                if nb in masters
            ],
            figures=figures(out / "report", numbers),
            rates=rates,
            mistakes=numbers.mistakes.most_common(),
        )
    )
    atomic_write(out / "report.html", html)
