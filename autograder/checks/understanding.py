"""Checks of the prediction cells: answers whose probe records named constants.

A prediction cell asks for a number, a choice or a yes/no before the cell that shows the
answer. Each spec here sets `notebook` to its notebook file and uses the probe
`values.probe_values`; `autograder.checks.notebook_specs` merges them into their notebook.
The expected answer is never stored: `truth` runs a small reference experiment (seeded) when
the judge runs, and `agrees` compares the prediction with it.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Any

import torch
from torch.nn import functional as F

from autograder.checks.base import CellResult, CellSpec, Scorer
from autograder.checks.reference import (
    AFFINITIES,
    HEAD,
    NB04,
    UNMASKED,
    ReferenceHead,
    attention,
    project,
    raw_scores,
    weights,
    with_mistake,
)

Answer = str | int | float | bool


class Prediction(CellSpec):
    """Named predictions, one point each, judged against a reference experiment."""

    probe_module, probe_function = "values", "probe_values"
    questions: dict[str, str] = {}  # name -> what the check says the name predicts
    choices: dict[str, tuple[str, ...]] = {}  # name -> the allowed answers of a choice

    def setting(self) -> dict[str, Any]:
        """Plain data describing the experiment (sizes, seeds) that `truth` runs."""
        return {}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        raise NotImplementedError

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        return value == expected

    def cases(self) -> dict[str, Any]:
        return {"names": list(self.names), **self.setting()}

    def judge(self, cases: dict[str, Any], observed: dict[str, Any]) -> CellResult:
        scorer = Scorer(self.grade_id)
        expected = self.truth(cases)
        for name in self.names:
            value = _normalised(observed.get(name), name in self.choices)
            problem = self._form_problem(name, value, observed)
            ok = not problem and self.agrees(name, value, expected[name])
            detail = problem or f"{name} = {value!r}; the experiment shows {expected[name]!r}."
            scorer.check(self.questions[name], 1.0, ok, "" if ok else detail)
        return scorer.result

    def _form_problem(self, name: str, value: Any, observed: dict[str, Any]) -> str:
        if name + "!" in observed:
            return f"{name} could not be read ({observed[name + '!']})."
        if value is None:
            return f"{name} is not set: replace the line that raises with your prediction."
        allowed = self.choices.get(name)
        if allowed and value not in allowed:
            return f"{name} = {value!r}: answer with one of {', '.join(map(repr, allowed))}."
        return ""


def _normalised(value: Any, choice: bool) -> Any:
    """Strings lower-cased and stripped; numpy scalars and arrays of one number unwrapped."""
    if choice and isinstance(value, str):
        return value.strip().strip("()").lower()
    if hasattr(value, "shape") and getattr(value, "size", 2) == 1:
        return value.reshape(()).item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# ---- 02: the silent transpose ------------------------------------------------------------


class TransposePrediction(Prediction):
    notebook = "02_queries_and_keys.ipynb"
    grade_id = "predict-transpose"
    names = ("TRANSPOSE_0_1_RUNS", "SEQUENCES_MIX")
    points = 2.0
    questions = {
        "TRANSPOSE_0_1_RUNS": "predicted whether q @ k.transpose(0, 1) runs when B == T == hs",
        "SEQUENCES_MIX": "predicted whether it then mixes the sequences of the batch",
    }

    def setting(self) -> dict[str, Any]:
        return {"size": 8, "C": 32, "seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        n, C = cases["size"], cases["C"]
        g = torch.Generator().manual_seed(cases["seed"])
        w = {name: torch.randn(n, C, generator=g) for name in ("key", "query")}  # (hs, C)
        x = torch.randn(n, n, C, generator=g)  # (B, T, C) with B == T == hs
        form = with_mistake(AFFINITIES, "transpose-batch").scores

        def wrong(x: torch.Tensor) -> torch.Tensor:
            q, k = (project(x, w, name, bias=False) for name in ("query", "key"))  # (B,T,hs)
            return raw_scores(q, k, form)  # the reference's scores with the batch transposed

        try:
            before = wrong(x)
        except RuntimeError:
            return {"TRANSPOSE_0_1_RUNS": False, "SEQUENCES_MIX": False}
        changed = x.clone()
        changed[1] += 1.0  # another sequence only
        mixes = not torch.allclose(wrong(changed)[0], before[0])
        return {"TRANSPOSE_0_1_RUNS": True, "SEQUENCES_MIX": mixes}


# ---- 03: masking after the softmax -------------------------------------------------------


class MaskAfterPrediction(Prediction):
    notebook = "03_mask_then_softmax.ipynb"
    grade_id = "predict-mask-after"
    names = ("ROW_SUMS_AFTER", "LAST_ROW_SUM_AFTER")
    points = 2.0
    questions = {
        "ROW_SUMS_AFTER": "predicted the row sums when the mask comes after the softmax",
        "LAST_ROW_SUM_AFTER": "predicted what the last row sums to",
    }
    choices = {"ROW_SUMS_AFTER": ("a", "b", "c", "d")}
    OPTIONS = {
        "a": "every row still sums to one",
        "b": "rows sum below one, and the first rows lose the most",
        "c": "rows sum below one, and the last rows lose the most",
        "d": "rows sum above one",
    }

    def setting(self) -> dict[str, Any]:
        return {"T": 8, "draws": 500, "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        T = cases["T"]
        g = torch.Generator().manual_seed(cases["seed"])
        scores = torch.randn(cases["draws"], T, T, generator=g)
        config = with_mistake(AFFINITIES, "mask-after-softmax")
        after = weights(scores, config, head_size=T, n_embd=T)  # (draws,T,T)
        sums = after.sum(-1).mean(0)  # (T,) the mean sum of each row over the draws
        if torch.allclose(sums, torch.ones(T), atol=1e-4):
            pattern = "a"
        elif bool((sums > 1 + 1e-4).all()):
            pattern = "d"
        else:
            pattern = "b" if int(sums.argmin()) < T // 2 else "c"
        return {"ROW_SUMS_AFTER": pattern, "LAST_ROW_SUM_AFTER": float(sums[-1])}

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        if name == "LAST_ROW_SUM_AFTER":
            number = _number(value)
            return number is not None and abs(number - float(expected)) < 1e-3
        return value == expected


# ---- 04: the first output and the width --------------------------------------------------


class FirstOutputPrediction(Prediction):
    notebook = "04_value_aggregation.ipynb"
    grade_id = "predict-first-output"
    names = ("FIRST_OUTPUT", "X_PLUS_OUT")
    points = 2.0
    questions = {
        "FIRST_OUTPUT": "predicted what position 0 of the head's output is",
        "X_PLUS_OUT": "predicted whether x + out works when head_size < C",
    }
    choices = {"FIRST_OUTPUT": ("a", "b", "c", "d"), "X_PLUS_OUT": ("works", "fails")}
    OPTIONS = {
        "a": "v[:, 0], the value of token 0",
        "b": "the mean of v over all T positions",
        "c": "x[:, 0], token 0 itself",
        "d": "zeros",
    }

    def setting(self) -> dict[str, Any]:
        return {"sizes": (4, 8, 32, 16), "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        B, T, C, hs = cases["sizes"]
        g = torch.Generator().manual_seed(cases["seed"])
        x = torch.randn(B, T, C, generator=g).double()
        w = {name: torch.randn(hs, C, generator=g) * C**-0.5 for name in ("key", "query", "value")}
        v = project(x, w, "value", bias=False)  # (B,T,hs)
        out = attention(x, w, NB04)  # (B,T,hs): the lecture's version 4
        candidates = {"a": v[:, 0], "b": v.mean(1), "c": x[:, 0], "d": torch.zeros_like(v[:, 0])}
        first = next(
            (name for name, c in candidates.items() if torch.allclose(c, out[:, 0], atol=1e-5)),
            "none",
        )
        try:
            _ = x + out
            widths = "works"
        except RuntimeError:
            widths = "fails"
        return {"FIRST_OUTPUT": first, "X_PLUS_OUT": widths}


# ---- 05: the softmax sharpens ------------------------------------------------------------


class SharpenPrediction(Prediction):
    notebook = "05_the_head.ipynb"
    grade_id = "predict-sharpen"
    names = ("TOP_WEIGHT_X8", "SCORE_VARIANCE_64")
    points = 2.0
    questions = {
        "TOP_WEIGHT_X8": "predicted the largest weight once the logits are multiplied by 8",
        "SCORE_VARIANCE_64": "predicted the variance of unscaled scores at head_size 64",
    }
    choices = {"TOP_WEIGHT_X8": ("a", "b", "c", "d")}
    BANDS = {"a": (0.0, 0.35), "b": (0.35, 0.65), "c": (0.65, 0.995), "d": (0.995, 1.01)}

    def setting(self) -> dict[str, Any]:
        return {
            "logits": [0.1, -0.2, 0.3, -0.2, 0.5],
            "factor": 8.0,
            "bands": {k: list(v) for k, v in self.BANDS.items()},
            "head_size": 64,
            "seed": 0,
        }

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        top = F.softmax(torch.tensor(cases["logits"]) * cases["factor"], dim=-1).max().item()
        band = next(k for k, (lo, hi) in cases["bands"].items() if lo <= top < hi)
        g = torch.Generator().manual_seed(cases["seed"])
        hs = cases["head_size"]
        q, k = torch.randn(256, 8, hs, generator=g), torch.randn(256, 8, hs, generator=g)
        variance = raw_scores(q, k).var().item()
        return {"TOP_WEIGHT_X8": band, "SCORE_VARIANCE_64": variance}

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        if name == "SCORE_VARIANCE_64":
            number = _number(value)
            return number is not None and expected / 2 <= number <= 2 * expected
        return value == expected


# ---- 06: deleting the mask, ablating the values ------------------------------------------


@cache
def _markov_text(symbols: int, length: int, seed: int) -> str:
    """A random first-order Markov chain over `symbols` letters: text with a next-token rule."""
    g = torch.Generator().manual_seed(seed)
    table = F.softmax(2.0 * torch.randn(symbols, symbols, generator=g), dim=-1)
    uniform = torch.rand(length, generator=g).tolist()
    cumulative = table.cumsum(-1).tolist()
    state, out = 0, []
    for u in uniform:
        row = cumulative[state]
        state = next((i for i, c in enumerate(row) if u < c), symbols - 1)
        out.append(chr(ord("a") + state))
    return "".join(out)


@cache
def _masked_and_unmasked_val(steps: int, seed: int) -> tuple[float, float]:
    """Validation loss of a causal and of an unmasked one-head model after `steps` steps."""
    from attention_course.charmodel import CharData, CharModel, estimate_loss, train

    data = CharData(_markov_text(12, 8000, seed))
    losses = []
    for causal in (True, False):
        torch.manual_seed(seed)
        head = ReferenceHead(16, 16, 8, config=HEAD if causal else UNMASKED)
        model = CharModel(data.vocab_size, 16, 8, head, head_out=16)
        run = dict(batch_size=32, block_size=8, lr=3e-3, eval_every=steps, eval_iters=10)
        train(model, data, steps=steps, seed=seed, progress=False, **run)
        losses.append(estimate_loss(model, data, 32, 8, 10)["val"])
    return losses[0], losses[1]


class NoMaskPrediction(Prediction):
    notebook = "06_experiments.ipynb"
    grade_id = "predict-no-mask"
    names = ("TARGET_OFFSET", "NO_MASK_VAL_LOSS")
    points = 2.0
    questions = {
        "TARGET_OFFSET": "predicted which input position holds position t's target",
        "NO_MASK_VAL_LOSS": "predicted the validation loss of the model without the mask",
    }
    choices = {"NO_MASK_VAL_LOSS": ("a", "b", "c")}
    OPTIONS = {
        "a": "higher than the masked model's",
        "b": "about the same as the masked model's",
        "c": "far lower than the masked model's",
    }

    def setting(self) -> dict[str, Any]:
        return {"steps": 100, "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        from attention_course.charmodel import CharData

        data = CharData(_markov_text(12, 2000, cases["seed"]))
        g = torch.Generator().manual_seed(cases["seed"])
        x, y = data.get_batch("train", 16, 8, generator=g)  # (B,T) each
        offset = next(d for d in range(1, 8) if torch.equal(y[:, : 8 - d], x[:, d:]))
        masked, unmasked = _masked_and_unmasked_val(cases["steps"], cases["seed"])
        if unmasked < masked - 0.25:
            verdict = "c"
        elif unmasked > masked + 0.25:
            verdict = "a"
        else:
            verdict = "b"
        return {"TARGET_OFFSET": offset, "NO_MASK_VAL_LOSS": verdict}


def _fold_residual(residual: bool, seed: int) -> float:
    """Relative error of the best lm_head for a head without W_v, fitted by least squares."""
    g = torch.Generator().manual_seed(seed)
    N, T, C, V = 64, 8, 16, 20
    x = torch.randn(N, T, C, generator=g, dtype=torch.float64)
    scores = torch.randn(N, T, T, generator=g, dtype=torch.float64)
    wei = weights(scores, AFFINITIES, head_size=T, n_embd=C)  # (N,T,T) causal, unscaled
    w_v = torch.randn(C, C, generator=g, dtype=torch.float64)
    w_lm = torch.randn(C, V, generator=g, dtype=torch.float64)
    mixed = wei @ x  # (N,T,C): what the weights do, with or without W_v
    with_value = (x + mixed @ w_v if residual else mixed @ w_v) @ w_lm  # (N,T,V) logits
    features = (x + mixed if residual else mixed).reshape(-1, C)
    target = with_value.reshape(-1, V)
    fitted = torch.linalg.lstsq(features, target).solution  # the best lm_head without W_v
    return float((features @ fitted - target).norm() / target.norm())


class NoValuePrediction(Prediction):
    notebook = "06_experiments.ipynb"
    grade_id = "predict-no-value"
    names = ("FOLDS_LECTURE", "FOLDS_RESIDUAL")
    points = 2.0
    questions = {
        "FOLDS_LECTURE": "predicted whether lm_head can absorb W_v when the head feeds it",
        "FOLDS_RESIDUAL": "predicted whether it can when the head adds to x (x + head(x))",
    }

    def setting(self) -> dict[str, Any]:
        return {"seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        return {
            "FOLDS_LECTURE": _fold_residual(False, cases["seed"]) < 1e-6,
            "FOLDS_RESIDUAL": _fold_residual(True, cases["seed"]) < 1e-6,
        }


# ---- 07: the T^2 memory ------------------------------------------------------------------


class MemoryPrediction(Prediction):
    notebook = "07_head_on_gpu.ipynb"
    grade_id = "predict-memory"
    names = ("EXPLICIT_GROWTH", "FUSED_GROWTH")
    points = 2.0
    questions = {
        "EXPLICIT_GROWTH": "predicted how the (B, n_head, T, T) weights grow when T doubles",
        "FUSED_GROWTH": "predicted how the fused call's memory grows when T doubles",
    }

    def setting(self) -> dict[str, Any]:
        return {"B": 2, "n_head": 2, "T": 128, "head_size": 16, "seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        from attention_course.measure import peak_bytes

        B, H, T, hs = cases["B"], cases["n_head"], cases["T"], cases["head_size"]
        cpu = torch.device("cpu")
        g = torch.Generator().manual_seed(cases["seed"])
        peaks = []
        for length in (T, 2 * T):
            qkv = [torch.randn(B, H, length, hs, generator=g) for _ in range(3)]
            peaks.append(
                peak_bytes(partial(F.scaled_dot_product_attention, *qkv, is_causal=True), cpu)
            )
        weights = [B * H * n * n * 4 for n in (T, 2 * T)]  # float32 weights tensors
        return {"EXPLICIT_GROWTH": weights[1] / weights[0], "FUSED_GROWTH": peaks[1] / peaks[0]}

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        number = _number(value)
        return number is not None and abs(number - float(expected)) <= 0.25 * float(expected)


SPECS: list[CellSpec] = [
    TransposePrediction(),
    MaskAfterPrediction(),
    FirstOutputPrediction(),
    SharpenPrediction(),
    NoMaskPrediction(),
    NoValuePrediction(),
    MemoryPrediction(),
]
