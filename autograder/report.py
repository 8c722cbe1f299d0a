"""The class's tables and report: grades.csv, cells.csv, diagnoses.csv and report.html.

`rows` are the per (student, notebook) states the grader wrote (see grade.py). The report has
three PNG figures (matplotlib, Agg): the class score distribution, each graded cell's pass rate
among the students who handed in a readable notebook, and how often each catalog mistake was
named.
"""

from __future__ import annotations

import csv
import html
import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

from autograder.catalog import describe


def _fmt(x: float) -> str:
    return f"{x:g}"


def _csv(rows: list[list[Any]], header: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def write_csvs(out: Path, rows: list[dict[str, Any]]) -> None:
    from autograder.grade import atomic_write

    grades = [
        [r["student"], r["notebook"], _fmt(r["score"]), _fmt(r["max_score"]), r["status"]]
        for r in rows
    ]
    cells, diagnoses = [], []
    for r in rows:
        for c in r.get("cells", []):
            cells.append(
                [r["student"], r["notebook"], c["grade_id"], _fmt(c["score"]), _fmt(c["max_score"])]
            )
            for m in c.get("mistakes", []):
                diagnoses.append([r["student"], r["notebook"], c["grade_id"], m])
    atomic_write(
        out / "grades.csv", _csv(grades, ["student", "notebook", "score", "max_score", "status"])
    )
    atomic_write(
        out / "cells.csv", _csv(cells, ["student", "notebook", "grade_id", "score", "max_score"])
    )
    atomic_write(
        out / "diagnoses.csv", _csv(diagnoses, ["student", "notebook", "grade_id", "mistake"])
    )


def class_numbers(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-student totals, per-cell pass rates and mistake counts."""
    totals: dict[str, list[float]] = {}
    passed: Counter[tuple[str, str]] = Counter()
    tried: Counter[tuple[str, str]] = Counter()
    mistakes: Counter[str] = Counter()
    for r in rows:
        t = totals.setdefault(r["student"], [0.0, 0.0])
        t[0] += r["score"]
        t[1] += r["max_score"]
        submitted = r["status"] not in ("missing", "invalid")
        for c in r.get("cells", []):
            key = (r["notebook"], c["grade_id"])
            if submitted:
                tried[key] += 1
                passed[key] += c["score"] >= c["max_score"]
            mistakes.update(c.get("mistakes", []))
    rates = {k: passed[k] / tried[k] for k in tried}
    return {"totals": totals, "rates": rates, "tried": tried, "mistakes": mistakes}


def _figures(folder: Path, numbers: dict[str, Any]) -> list[tuple[str, str]]:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    percents = [100 * s / m if m else 0.0 for s, m in numbers["totals"].values()]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(percents, bins=[i * 10 for i in range(11)], color="#4c72b0", edgecolor="white")
    ax.set(xlabel="total score (% of points)", ylabel="students", title="Class score distribution")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    fig.savefig(folder / "scores.png", dpi=110)
    plt.close(fig)
    figures.append(("scores.png", "Class score distribution"))

    rates = numbers["rates"]
    if rates:
        labels = [f"{nb[:2]} {gid}" for nb, gid in rates]
        fig, ax = plt.subplots(figsize=(6, 0.35 * len(rates) + 1.2))
        ax.barh(labels, [100 * v for v in rates.values()], color="#55a868")
        ax.invert_yaxis()
        ax.set(
            xlabel="students with full marks (%)", title="Pass rate per graded cell", xlim=(0, 100)
        )
        fig.tight_layout()
        fig.savefig(folder / "pass_rates.png", dpi=110)
        plt.close(fig)
        figures.append(("pass_rates.png", "Pass rate per graded cell"))

    mistakes = numbers["mistakes"].most_common()
    fig, ax = plt.subplots(figsize=(6, 0.35 * max(len(mistakes), 1) + 1.2))
    if mistakes:
        ax.barh([m for m, _ in mistakes], [n for _, n in mistakes], color="#c44e52")
        ax.invert_yaxis()
    else:
        ax.text(0.5, 0.5, "no mistakes named", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="times named", title="Named mistakes across the class")
    fig.tight_layout()
    fig.savefig(folder / "mistakes.png", dpi=110)
    plt.close(fig)
    figures.append(("mistakes.png", "Named mistakes across the class"))
    return figures


def write_report(out: Path, rows: list[dict[str, Any]], masters: dict[str, Any]) -> None:
    from autograder.grade import atomic_write, feedback_path

    e = html.escape
    numbers = class_numbers(rows)
    figures = _figures(out / "report", numbers)
    students = sorted(numbers["totals"])
    notebooks = list(masters)
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        "<title>Class report</title><style>",
        "body{font-family:system-ui,sans-serif;max-width:70rem;margin:1.5rem auto;padding:0 1rem}",
        "table{border-collapse:collapse;margin:.8rem 0}th,td{border-bottom:1px solid #ddd;",
        "padding:.25rem .5rem;text-align:left}td.num{text-align:right}",
        ".bad{color:#b3261e}img{max-width:100%;display:block;margin:.5rem 0 1.2rem 0}",
        "</style></head><body>",
        "<h1>Class report</h1>",
        f"<p>{len(students)} students, {len(notebooks)} notebooks.</p>",
    ]
    for name, title in figures:
        parts.append(f'<h2>{e(title)}</h2><img src="report/{e(name)}" alt="{e(title)}">')
    parts.append(
        "<h2>Pass rate per graded cell</h2><table><tr><th>notebook</th><th>cell</th>"
        "<th>full marks</th></tr>"
    )
    for (nb, gid), rate in numbers["rates"].items():
        n = numbers["tried"][(nb, gid)]
        parts.append(
            f"<tr><td>{e(nb)}</td><td>{e(gid)}</td><td class='num'>{100 * rate:.0f}% "
            f"of {n}</td></tr>"
        )
    parts.append(
        "</table><h2>Named mistakes</h2><table><tr><th>mistake</th><th>times</th>"
        "<th>what it means</th></tr>"
    )
    for mistake, count in numbers["mistakes"].most_common():
        parts.append(
            f"<tr><td><code>{e(mistake)}</code></td><td class='num'>{count}</td>"
            f"<td>{e(describe(mistake))}</td></tr>"
        )
    parts.append("</table><h2>Students</h2><table><tr><th>student</th>")
    parts += [f"<th>{e(nb[:2])}</th>" for nb in notebooks]
    parts.append("<th>total</th></tr>")
    by_key = {(r["student"], r["notebook"]): r for r in rows}
    for student in students:
        parts.append(f"<tr><td>{e(student)}</td>")
        for nb in notebooks:
            r = by_key.get((student, nb))
            if r is None:
                parts.append("<td></td>")
                continue
            link = feedback_path(Path("."), student, nb).as_posix()
            status = "" if r["status"] == "ok" else f" <span class='bad'>{e(r['status'])}</span>"
            parts.append(
                f"<td class='num'><a href='{e(link)}'>{_fmt(r['score'])}/"
                f"{_fmt(r['max_score'])}</a>{status}</td>"
            )
        s, m = numbers["totals"][student]
        parts.append(f"<td class='num'>{_fmt(round(s, 3))}/{_fmt(round(m, 3))}</td></tr>")
    parts.append("</table></body></html>\n")
    atomic_write(out / "report.html", "\n".join(parts))
