"""Statuses, cell states and zero-score reasons are enums whose values are the strings the
files always held: a state file written before they existed still loads, with the same grade,
the same words and the same feedback summary, and every file keeps its bytes.

tests/unit/model/states/before_enums.json holds grades as the grader saved them before the enums
(`NotebookGrade.to_json()` at d070be9: five from grading examples/submissions, and one notebook
whose cells got each zero the judge gave), with what that version's `words()` and
`summary_html(grade, False)` said of each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autograder.checks.base import CellResult
from autograder.model.enums import CellState, Reason, Status
from autograder.model.grades import STATUSES, CellGrade, NotebookGrade
from autograder.publish.feedback import summary_html
from autograder.publish.outdir import state_path
from autograder.publish.state import StateStore, atomic_write
from autograder.publish.wording import status_words

BEFORE = json.loads((Path(__file__).parent / "states" / "before_enums.json").read_text())["grades"]


def _without_reasons(data: dict[str, Any]) -> dict[str, Any]:
    """A grade's JSON as it was written before results had a `reason`."""
    data = json.loads(json.dumps(data))
    for cell in data["cells"]:
        if cell["result"]:
            del cell["result"]["reason"]
    return data


def _write_old_state(out: Path, grade: dict[str, Any]) -> None:
    """A state file as the grader wrote it then: the old grade JSON under this OUT's MAC."""
    store = StateStore(out)
    blob = json.dumps({"grade": grade, "mac": store.mac(grade)}, indent=1, allow_nan=False)
    atomic_write(state_path(out, grade["student"], grade["notebook"]), blob, 0o600)


@pytest.mark.parametrize("before", BEFORE, ids=[b["grade"]["student"] for b in BEFORE])
def test_an_old_state_file_loads_with_the_same_grade_words_and_summary(
    before: dict[str, Any], tmp_path: Path
) -> None:
    old = before["grade"]
    _write_old_state(tmp_path, old)
    grade = StateStore(tmp_path).load(old["student"], old["notebook"], old["key"])
    assert grade is not None, "an old state file must still be trusted"
    assert isinstance(grade.status, Status) and grade.status == old["status"]
    assert all(isinstance(c.state, CellState) for c in grade.cells)
    assert (grade.score, grade.max_score) == (old["score"], old["max_score"])
    assert _without_reasons(grade.to_json()) == old
    assert status_words(grade) == before["words"]
    assert summary_html(grade, False) == before["summary"]


def test_old_results_get_the_reasons_their_problems_were_written_for() -> None:
    """The two reasons the pages tell apart (raised, not answered yet) come back from an old
    file; every other zero of an old file has no reason, as it had no words of its own."""
    reasons = {
        (b["grade"]["student"], c["grade_id"]): CellResult.from_dict(c["result"]).reason
        for b in BEFORE
        for c in b["grade"]["cells"]
        if c["result"]
    }
    made = {gid: r for (student, gid), r in reasons.items() if student == "raised_and_stubs"}
    assert made["shape-table"] == Reason.RAISED
    assert made["predict-transpose"] == Reason.UNANSWERED
    assert made["param-count"] is None and made["affinities"] is None  # not defined, imported
    untouched = {r for (student, _), r in reasons.items() if student == "untouched"}
    assert untouched == {Reason.UNANSWERED}


def test_a_new_state_round_trips_and_writes_the_same_strings(tmp_path: Path) -> None:
    old = BEFORE[-1]["grade"]
    grade = NotebookGrade.from_json(old)
    data = grade.to_json()
    text = json.dumps(data, sort_keys=True)
    assert '"status": "ok"' in text and '"state": "unanswered"' in text
    assert '"reason": "raised"' in text and '"reason": "unanswered"' in text
    store = StateStore(tmp_path)
    store.save(grade)
    again = store.load(grade.student, grade.notebook, grade.key)
    assert again is not None and again.to_json() == data
    assert [c.result.reason for c in again.cells if c.result] == [
        c.result.reason for c in grade.cells if c.result
    ]


@pytest.mark.parametrize(
    ("where", "value"),
    [("status", "finished"), ("state", "skipped"), ("reason", "bored")],
)
def test_a_state_with_a_word_no_grader_writes_is_not_trusted(
    where: str, value: str, tmp_path: Path
) -> None:
    data = NotebookGrade.from_json(BEFORE[-1]["grade"]).to_json()
    if where == "status":
        data["status"] = value
    elif where == "state":
        data["cells"][-1]["state"] = value
    else:
        data["cells"][0]["result"]["reason"] = value
    _write_old_state(tmp_path, data)
    grade, why = StateStore(tmp_path).check(data["student"], data["notebook"])
    assert grade is None and why == "not a state file"


def test_the_words_are_the_strings_the_outputs_always_held() -> None:
    assert STATUSES == tuple(Status) == (
        "ok", "missing", "unanswered", "invalid", "timeout", "error"
    )  # fmt: skip
    assert [str(s) for s in CellState] == ["graded", "waiting", "unanswered"]
    assert f"{Status.TIMEOUT}" == "timeout" and json.dumps(Reason.OUT_OF_TIME) == '"out-of-time"'
    cell = CellGrade("why", 1.0, manual=True, state="waiting")
    assert cell.state is CellState.WAITING
    with pytest.raises(ValueError):
        NotebookGrade("s", "01_uniform_averaging.ipynb", "finished")
