"""Notebook 06: wrong answers outside the catalog lose points, probes stay plain and fast,
and the notebook's measured numbers say what its text says."""

from __future__ import annotations

import math
import pickle
import time

import numpy as np
import pytest
import torch

from autograder.checks import run_in_process, spec_for
from autograder.model.contract import CONTRACT
from autograder.model.notebook_io import exec_cell, read, setup_sources, source
from autograder.model.paths import SOLUTIONS
from autograder.model.settings import LIMITS, Limits
from autograder.worker.rebuild import release_stubs
from tests import corpus

# pytest-timeout: notebook 06 trained in grading mode (setup counts)
pytestmark = pytest.mark.timeout(600)

NB = "06_experiments.ipynb"


def grade(grade_id: str, answer: str):
    ns = corpus.namespace(NB, corpus.answers_with(NB, grade_id, answer))
    return run_in_process(spec_for(grade_id), ns)


WRONG_CAPTURES = {
    "hook left behind": (
        """
def capture_attention(head, x):
    seen = []
    head.dropout.register_forward_hook(lambda m, i, o: seen.append(i[0]))
    head(x)
    return seen[-1]
""",
        "leaves the head as it was",
    ),
    "hooks the head, returns its output": (
        """
def capture_attention(head, x):
    seen = []
    handle = head.register_forward_hook(lambda m, i, o: seen.append(o))
    head(x)
    handle.remove()
    return seen[-1]
""",
        "returns the head's own (B",
    ),
    "recomputes instead of capturing": (
        """
def capture_attention(head, x):
    T = x.shape[1]
    q, k = head.query(x), head.key(x)
    wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
    wei = wei.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
    return wei.softmax(-1)
""",
        "captures what the head really computed (tried on a head without the mask)",
    ),
    "uniform weights, hard-coded": (
        """
def capture_attention(head, x):
    B, T, _ = x.shape
    wei = torch.ones(T, T).tril()
    return (wei / wei.sum(-1, keepdim=True)).expand(B, T, T)
""",
        "returns the head's own (B",
    ),
    "edits the class": (
        """
def capture_attention(head, x):
    store = {}
    original = type(head).forward

    def forward(self, x):
        out = original(self, x)
        T = x.shape[1]
        q, k = self.query(x), self.key(x)
        wei = (q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        store["wei"] = wei.softmax(-1)
        return out

    type(head).forward = forward
    head(x)
    return store["wei"]
""",
        "leaves the head as it was",
    ),
}


@pytest.mark.parametrize("label", list(WRONG_CAPTURES))
def test_wrong_capture_loses_the_right_check(label: str, monkeypatch) -> None:
    from autograder.probe.modules import CourseHead

    # "edits the class" patches the course head the probe hands over: restore it afterwards
    monkeypatch.setattr(CourseHead, "forward", CourseHead.forward)
    answer, check = WRONG_CAPTURES[label]
    result = grade("capture-attention", answer)
    assert result.score < result.max_score, result.render()
    assert any(c.name.startswith(check) and not c.passed for c in result.checks), result.render()


def test_recomputing_capture_is_right_on_a_plain_head() -> None:
    """The recomputation fails only where the head's forward differs: the check is specific."""
    answer, _ = WRONG_CAPTURES["recomputes instead of capturing"]
    result = grade("capture-attention", answer)
    assert result.score == result.max_score - 1, result.render()


def test_unmasked_head_that_keeps_the_mask_scores_nothing() -> None:
    result = grade("unmasked-head", "class UnmaskedHead(Head):\n    pass\n")
    assert result.score == 0, result.render()
    trained = next(c for c in result.checks if c.name.startswith("trained"))
    assert "teacher-forced loss" in trained.detail


def test_unmasked_head_that_skips_dropout_loses_only_the_weights_check() -> None:
    answer = """
class UnmaskedHead(Head):
    def forward(self, x):
        q, k = self.query(x), self.key(x)
        wei = (q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5).softmax(-1)
        return wei @ self.value(x)
"""
    result = grade("unmasked-head", answer)
    assert result.score == result.max_score - 1, result.render()
    assert "keep dropout on the weights" in result.render()


def test_unmasked_head_future_shortcut_is_not_enough() -> None:
    """Reading the next token directly (not attention) passes the training check only."""
    answer = """
class UnmaskedHead(Head):
    def forward(self, x):
        nxt = torch.cat([x[:, 1:], x[:, -1:]], dim=1)
        return self.value(nxt)
"""
    result = grade("unmasked-head", answer)
    assert result.score <= 2, result.render()


def test_no_value_head_that_keeps_value_loses_the_parameter_check() -> None:
    answer = """
class NoValueHead(Head):
    def forward(self, x):
        T = x.shape[1]
        q, k = self.query(x), self.key(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return self.dropout(wei.softmax(-1)) @ x
"""
    result = grade("value-ablation", answer)
    assert result.score == result.max_score - 1, result.render()
    assert "value.weight" in result.render()


def test_no_value_head_that_still_aggregates_v_fails_output_and_width() -> None:
    source_ = corpus.solution_answers_of(NB)["unmasked-head"]
    answer = source_.replace("UnmaskedHead", "NoValueHead").replace(
        "# no masked_fill: the future stays visible",
        'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))',
    )
    result = grade("value-ablation", answer)
    assert result.score == 0, result.render()


@pytest.mark.parametrize("grade_id", list(CONTRACT[NB]))
def test_probe_returns_plain_data_quickly(grade_id: str) -> None:
    spec = spec_for(grade_id)
    ns = corpus.namespace(NB, corpus.solution_answers_of(NB))
    cases = spec.cases()
    pickle.dumps(cases)  # cases travel to the sandbox
    start = time.perf_counter()
    observed = spec.probe(ns, cases)
    elapsed = time.perf_counter() - start
    # quick: a small share of one cell's timeout, with room for a loaded machine
    assert elapsed < Limits().cell_timeout / 4, f"{grade_id} probe took {elapsed:.1f} s"

    def plain(value) -> bool:
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return value is None or isinstance(value, (bool, int, float, str, np.ndarray))

    assert plain(observed), observed.keys()


def test_unmasked_probe_numbers_are_far_from_the_thresholds() -> None:
    ns = corpus.namespace(NB, corpus.solution_answers_of(NB))
    spec = spec_for("unmasked-head")
    observed = spec.probe(ns, spec.cases())
    log_v = math.log(spec.cases()["peek"]["vocab"])
    assert observed["peek"]["teacher"] < 0.25 * log_v
    assert observed["peek"]["causal"] > log_v + 1.0


# ---- the notebook's own numbers ---------------------------------------------------------------


def _code_cells(tag: str | None = None) -> list[str]:
    nb = read(SOLUTIONS / NB)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    if tag is not None:
        cells = [c for c in cells if tag in c.metadata.get("tags", [])]
    return [source(c) for c in cells]


@pytest.mark.slow
def test_lecture_cells_reach_the_lecture_loss(monkeypatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ns: dict = {}
    for i, src in enumerate(setup_sources(read(SOLUTIONS / NB))):
        exec_cell(src, ns, f"<setup {i}>")
    for i, src in enumerate(_code_cells("lecture")):
        exec_cell(src, ns, f"<lecture {i}>")
    data, history = ns["data"], ns["history"]
    assert len(data.text) == 1_115_394 and data.vocab_size == 65
    assert abs(ns["untrained"]["val"] - math.log(65)) < 0.15
    assert history["steps"][-1] == 5000
    assert 2.35 < history["val"][-1] < 2.45  # the lecture's "about 2.4"


@pytest.mark.slow
def test_whole_notebook_in_grading_mode_still_shows_every_effect(monkeypatch) -> None:
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns: dict = {}
    start = time.perf_counter()
    for i, src in enumerate(_code_cells()):
        exec_cell(src, ns, f"<cell {i}>")
    seconds = time.perf_counter() - start
    assert ns["SHORT_RUNS"] and ns["max_steps"] < 5000
    assert ns["history"]["val"][-1] < 2.6
    masked_then = ns["truncated"](ns["history"], ns["unmasked_steps"])["val"][-1]
    assert ns["history_unmasked"]["val"][-1] < masked_then - 1.0  # the collapse
    forced, honest = ns["results"]["no mask"]
    assert honest > math.log(65) > 1.0 > forced  # worse than a uniform guess when honest
    assert ns["results"]["masked"][0] == pytest.approx(ns["results"]["masked"][1], abs=1e-4)
    # the thesis: the learned head beats no communication, which beats the uniform average
    final = {name: h["val"][-1] for name, h in ns["baselines"].items()}
    assert final["learned head"] < final["itself only"] < final["uniform average"]
    # the two silent bugs of notebook 03 leak: a better teacher-forced loss, a worse honest one
    assert not ns["sees_future"](ns["Head"])
    correct_forced, correct_honest = ns["leaks"]["Head"]
    assert correct_forced == pytest.approx(correct_honest, abs=1e-4)
    for bug in ("SoftmaxOverQueries", "MaskAfterSoftmax"):
        assert ns["sees_future"](ns[bug]), bug
        forced_bug, honest_bug = ns["leaks"][bug]
        assert forced_bug < correct_forced < honest_bug, (bug, ns["leaks"][bug])
    # without the position table the same model ends worse
    assert ns["history_no_pos"]["val"][-1] > ns["history"]["val"][-1]
    for steps, gap in ns["lecture_gaps"].values():
        assert gap[steps.index(500)] > gap[-1] > 0  # shrinks with training
    # grading mode's runs fit the grader's default budget for a notebook (--timeout), below the
    # share at which the proof of the masters warns that the budget is tight
    assert seconds < LIMITS.proof.slow_share * Limits().timeout, (
        f"graded run of notebook 06 took {seconds:.0f} s"
    )


def test_paired_models_share_every_starting_weight_but_the_value(monkeypatch) -> None:
    """`build` gives the two heads of one seed the same embeddings, lm_head, key and query."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    ns: dict = {}
    for i, src in enumerate(setup_sources(read(SOLUTIONS / NB))):
        exec_cell(src, ns, f"<setup {i}>")
    lecture = _code_cells("lecture")
    exec_cell(lecture[0], ns, "<data>")
    exec_cell(lecture[1], ns, "<settings>")
    answers = corpus.solution_answers_of(NB)
    exec_cell(answers["value-ablation"], ns, "<NoValueHead>")
    with_value = ns["build"](ns["Head"], 3).state_dict()
    without = ns["build"](ns["NoValueHead"], 3).state_dict()
    assert set(with_value) - set(without) == {"head.value.weight"}
    for name, tensor in without.items():
        assert torch.equal(tensor, with_value[name]), name
    other_seed = ns["build"](ns["Head"], 4).state_dict()
    assert not torch.equal(other_seed["head.key.weight"], with_value["head.key.weight"])


RELEASED = ("capture-attention", "unmasked-head", "value-ablation")


@pytest.mark.parametrize("grade_id", RELEASED)
def test_untouched_release_answer_scores_zero(grade_id: str) -> None:
    stubs = release_stubs(read(SOLUTIONS / NB))
    ns = corpus.namespace(NB, {gid: stubs[gid] for gid in RELEASED})
    result = run_in_process(spec_for(grade_id), ns)
    assert result.score == 0, result.render()
