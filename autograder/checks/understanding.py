"""Checks of the prediction cells: answers whose probe records named constants.

A prediction cell asks for a number, a choice or a yes/no before the cell that shows the
answer. Each spec here sets `notebook` to its notebook file and uses the probe
`values.probe_values`; `autograder.checks.notebook_specs` merges them into their notebook.
The expected answer is never stored: `truth` runs a small reference experiment (seeded) when
the judge runs, and `agrees` compares the prediction with it.
"""

from __future__ import annotations

import math
from functools import cache, partial
from typing import Any

import torch
from torch.nn import functional as F

from autograder.checks.base import CellResult, CellSpec, Scorer
from autograder.checks.reference import (
    AFFINITIES,
    HEAD,
    NB04,
    NO_VALUE,
    UNMASKED,
    ReferenceHead,
    attention,
    project,
    raw_scores,
    visible,
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
        if value is None or value == {"__repr__": "Ellipsis"}:
            return f"{name} is not answered yet: replace its `...` with your prediction."
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


class TiedPrediction(Prediction):
    notebook = "02_queries_and_keys.ipynb"
    grade_id = "predict-tied"
    names = ("TIED_NONNEGATIVE", "TIED_BEATS_BOTH")
    points = 2.0
    questions = {
        "TIED_NONNEGATIVE": "predicted which scores of a tied head (q @ q^T) are never negative",
        "TIED_BEATS_BOTH": "predicted whether s_ij can exceed both s_ii and s_jj when q and k "
        "are tied",
    }
    choices = {"TIED_NONNEGATIVE": ("a", "b", "c", "d")}
    OPTIONS = {
        "a": "none: any score can be negative",
        "b": "the diagonal, each token's score for itself",
        "c": "every score",
        "d": "the scores below the diagonal",
    }

    def setting(self) -> dict[str, Any]:
        return {"draws": 2000, "T": 6, "head_size": 4, "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        g = torch.Generator().manual_seed(cases["seed"])
        q = torch.randn(cases["draws"], cases["T"], cases["head_size"], generator=g)  # (N,T,hs)
        tied = raw_scores(q, q, "q@q")  # (N,T,T): one map for queries and keys
        T = cases["T"]
        diagonal = tied.diagonal(dim1=-2, dim2=-1)  # (N,T)
        lower = tied[:, ~visible(T, "strict-upper") & ~torch.eye(T, dtype=torch.bool)]
        if bool((tied >= 0).all()):
            never_negative = "c"
        elif bool((diagonal >= 0).all()):
            never_negative = "d" if bool((lower >= 0).all()) else "b"
        else:
            never_negative = "a"
        own = torch.maximum(diagonal.unsqueeze(-1), diagonal.unsqueeze(-2))  # (N,T,T)
        beats = bool((tied > own + 1e-9).any())
        return {"TIED_NONNEGATIVE": never_negative, "TIED_BEATS_BOTH": beats}


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


class LeakPrediction(Prediction):
    notebook = "03_mask_then_softmax.ipynb"
    grade_id = "predict-leaks"
    names = ("LEAKING_RECIPES", "FILL_ZERO_SELF")
    points = 2.0
    questions = {
        "LEAKING_RECIPES": "predicted which wrong recipes let the last token change row 0",
        "FILL_ZERO_SELF": "predicted row 0's weight on itself for zero scores filled with 0",
    }
    choices = {"LEAKING_RECIPES": ("a", "b", "c", "d")}
    OPTIONS = {
        "a": "neither: both still hide the future",
        "b": "only the softmax over dim=-2",
        "c": "only masking after the softmax",
        "d": "both",
    }
    RECIPES = {"softmax over dim=-2": "softmax-dim", "mask after": "mask-after-softmax"}

    def setting(self) -> dict[str, Any]:
        return {"T": 8, "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        T = cases["T"]
        g = torch.Generator().manual_seed(cases["seed"])
        scores = torch.randn(T, T, generator=g, dtype=torch.float64)
        changed = scores.clone()  # the last token's query (row) and key (column) change
        changed[-1, :] = torch.randn(T, generator=g, dtype=torch.float64)
        changed[:, -1] = torch.randn(T, generator=g, dtype=torch.float64)
        leaks = {}
        for name, mistake in self.RECIPES.items():
            config = with_mistake(AFFINITIES, mistake)
            before, after = (
                weights(s, config, head_size=1, n_embd=1)[0] for s in (scores, changed)
            )
            leaks[name] = not torch.allclose(before, after)
        verdict = {(False, False): "a", (True, False): "b", (False, True): "c", (True, True): "d"}
        zeros = torch.zeros(T, T, dtype=torch.float64)
        filled = weights(zeros, with_mistake(AFFINITIES, "fill-zero"), head_size=1, n_embd=1)
        return {
            "LEAKING_RECIPES": verdict[tuple(leaks.values())],
            "FILL_ZERO_SELF": float(filled[0, 0]),
        }

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        if name == "FILL_ZERO_SELF":
            number = _number(value)
            return number is not None and abs(number - float(expected)) < 1e-3
        return value == expected


# ---- 04: what an output is made of; the value projection folds -------------------------


class OutputsPrediction(Prediction):
    notebook = "04_value_aggregation.ipynb"
    grade_id = "predict-outputs"
    names = ("EQUAL_SCORES_OUT", "OUT_1_WEIGHT")
    points = 2.0
    questions = {
        "EQUAL_SCORES_OUT": "predicted out[:, t] when every score of a row is equal",
        "OUT_1_WEIGHT": "predicted which entry of wei weighs v[:, 0] in out[:, 1]",
    }
    choices = {"EQUAL_SCORES_OUT": ("a", "b", "c", "d"), "OUT_1_WEIGHT": ("a", "b", "c", "d")}
    OPTIONS = {
        "EQUAL_SCORES_OUT": {
            "a": "v[:, t], the value of token t",
            "b": "the mean of v[:, 0], ..., v[:, t]",
            "c": "the mean of v over all T positions",
            "d": "zeros",
        },
        "OUT_1_WEIGHT": {
            "a": "wei[:, 0, 1]",
            "b": "wei[:, 1, 0]",
            "c": "wei[:, 1, 1]",
            "d": "wei[:, 0, 0]",
        },
    }

    def setting(self) -> dict[str, Any]:
        return {"sizes": (4, 8, 32, 16), "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        B, T, C, hs = cases["sizes"]
        g = torch.Generator().manual_seed(cases["seed"])
        x = torch.randn(B, T, C, generator=g).double()
        w = {name: torch.randn(hs, C, generator=g) * C**-0.5 for name in ("key", "query", "value")}
        v = project(x, w, "value", bias=False)  # (B,T,hs)
        equal = attention(x, {**w, "query": torch.zeros(hs, C)}, NB04)  # every score 0
        t = T - 2
        candidates = {
            "a": v[:, t],
            "b": v[:, : t + 1].mean(1),
            "c": v.mean(1),
            "d": torch.zeros_like(v[:, t]),
        }
        same = [n for n, c in candidates.items() if torch.allclose(c, equal[:, t], atol=1e-6)]
        scores = raw_scores(project(x, w, "query", False), project(x, w, "key", False))
        wei = weights(scores, NB04, hs, C)  # (B,T,T)
        out = attention(x, w, NB04)  # (B,T,hs)
        entries = {"a": wei[:, 0, 1], "b": wei[:, 1, 0], "c": wei[:, 1, 1], "d": wei[:, 0, 0]}
        mix = [
            n
            for n, p in entries.items()
            if torch.allclose(p[:, None] * v[:, 0] + (1 - p[:, None]) * v[:, 1], out[:, 1])
        ]
        return {"EQUAL_SCORES_OUT": "".join(same) or "none", "OUT_1_WEIGHT": "".join(mix) or "none"}


def folded_block(seed: int) -> tuple[float, int]:
    """Heads with values and an output projection against heads without values whose values
    are folded into the projection: the largest difference of x + block(x), and the rank of
    one head's folded (C,C) value-output matrix."""
    g = torch.Generator().manual_seed(seed)
    B, T, C, n_head = 2, 8, 32, 4
    hs = C // n_head
    x = torch.randn(B, T, C, generator=g, dtype=torch.float64)
    heads = [
        {
            n: torch.randn(hs, C, generator=g, dtype=torch.float64) * C**-0.5
            for n in ("key", "query", "value")
        }
        for _ in range(n_head)
    ]
    proj = torch.randn(C, n_head * hs, generator=g, dtype=torch.float64) * C**-0.5  # W_O
    outs = [attention(x, h, HEAD) for h in heads]  # n_head x (B,T,hs)
    block = x + torch.cat(outs, dim=-1) @ proj.T  # x + proj(concat(heads))
    mixed = [attention(x, h, NO_VALUE) for h in heads]  # n_head x (B,T,C): weights @ x
    folded = [proj[:, h * hs : (h + 1) * hs] @ heads[h]["value"] for h in range(n_head)]  # (C,C)
    again = x + sum(m @ f.T for m, f in zip(mixed, folded, strict=True))
    return float((block - again).abs().max()), int(torch.linalg.matrix_rank(folded[0]))


class FoldPrediction(Prediction):
    notebook = "04_value_aggregation.ipynb"
    grade_id = "predict-fold"
    names = ("FOLDS_WITH_PROJECTION", "OV_RANK")
    points = 2.0
    questions = {
        "FOLDS_WITH_PROJECTION": "predicted whether each head's W_v folds into the output "
        "projection of x + proj(concat(heads))",
        "OV_RANK": "predicted the rank of one head's folded (C, C) matrix",
    }

    def setting(self) -> dict[str, Any]:
        return {"seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        difference, rank = folded_block(cases["seed"])
        return {"FOLDS_WITH_PROJECTION": difference < 1e-9, "OV_RANK": rank}


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
        if name == "SCORE_VARIANCE_64":  # 0.7-1.4x: "grows like sqrt(hs)" (about 32) fails
            number = _number(value)
            return number is not None and 0.7 * expected <= number <= 1.4 * expected
        return value == expected


class InitVariancePrediction(Prediction):
    """The unscaled score variance at head_size 64 under nn.Linear's default initialisation
    (weights uniform in +-1/sqrt(C), variance 1/(3C)) on unit-variance x: about hs/9."""

    notebook = "05_the_head.ipynb"
    grade_id = "predict-init-variance"
    names = ("INIT_VARIANCE_64",)
    points = 1.0
    questions = {
        "INIT_VARIANCE_64": "predicted the variance of unscaled scores at head_size 64 under "
        "nn.Linear's default initialisation",
    }

    def setting(self) -> dict[str, Any]:
        return {"n_embd": 32, "head_size": 64, "draws": 64, "tokens": 256, "seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        C, hs = cases["n_embd"], cases["head_size"]
        g = torch.Generator().manual_seed(cases["seed"])
        bound = C**-0.5  # nn.Linear's default: uniform in (-1/sqrt(fan_in), 1/sqrt(fan_in))
        variances = []
        for _ in range(cases["draws"]):  # several initialisations: the mean, not one draw
            w_q, w_k = ((torch.rand(hs, C, generator=g) * 2 - 1) * bound for _ in range(2))
            x = torch.randn(cases["tokens"], C, generator=g)  # unit-variance tokens
            variances.append((x @ w_q.T @ (x @ w_k.T).T).var().item())
        return {"INIT_VARIANCE_64": sum(variances) / len(variances)}

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        number = _number(value)  # 0.7-1.4x: hs (64) and hs/3 (21) fail, hs/9 (7.1) passes
        return number is not None and 0.7 * float(expected) <= number <= 1.4 * float(expected)


# ---- 06: deleting the mask: the teacher-forced and the honest loss ------------------------


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
def _masked_and_unmasked_losses(
    steps: int, seed: int
) -> tuple[tuple[float, float], tuple[float, float], float]:
    """(teacher-forced val, honest val) of a causal and of an unmasked one-head model after
    `steps` steps on a Markov chain, and ln V, the loss of a uniform guess."""
    from attention_course.charmodel import CharData, CharModel, causal_loss, estimate_loss, train

    data = CharData(_markov_text(12, 8000, seed))
    losses = []
    for causal in (True, False):
        torch.manual_seed(seed)
        head = ReferenceHead(16, 16, 8, config=HEAD if causal else UNMASKED)
        model = CharModel(data.vocab_size, 16, 8, head, head_out=16)
        run = dict(batch_size=32, block_size=8, lr=3e-3, eval_every=steps, eval_iters=10)
        train(model, data, steps=steps, seed=seed, progress=False, **run)
        forced = estimate_loss(model, data, 32, 8, 10)["val"]
        losses.append((forced, causal_loss(model, data, 32, 8, 10)))
    return losses[0], losses[1], math.log(data.vocab_size)


class NoMaskPrediction(Prediction):
    """The unmasked model's teacher-forced and honest (generation-time) losses, from one-head
    models trained on a Markov chain of 12 symbols (the notebook trains on Shakespeare)."""

    notebook = "06_experiments.ipynb"
    grade_id = "predict-no-mask"
    names = ("NO_MASK_VAL_LOSS", "NO_MASK_HONEST_LOSS")
    points = 2.0
    questions = {
        "NO_MASK_VAL_LOSS": "predicted the validation loss of the model without the mask",
        "NO_MASK_HONEST_LOSS": "predicted its honest loss, each position seeing only its past",
    }
    choices = {"NO_MASK_VAL_LOSS": ("a", "b", "c"), "NO_MASK_HONEST_LOSS": ("a", "b", "c")}
    OPTIONS = {
        "NO_MASK_VAL_LOSS": {
            "a": "higher than the masked model's",
            "b": "about the same as the masked model's",
            "c": "far lower than the masked model's",
        },
        "NO_MASK_HONEST_LOSS": {
            "a": "lower than the masked model's",
            "b": "between the masked model's and ln V, a uniform guess",
            "c": "above ln V",
        },
    }

    def setting(self) -> dict[str, Any]:
        return {"steps": 200, "seed": 0, "options": dict(self.OPTIONS)}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        (masked, _), (unmasked, honest), uniform = _masked_and_unmasked_losses(
            cases["steps"], cases["seed"]
        )
        if unmasked < masked - 0.25:
            verdict = "c"
        elif unmasked > masked + 0.25:
            verdict = "a"
        else:
            verdict = "b"
        place = "a" if honest < masked else ("b" if honest <= uniform else "c")
        return {"NO_MASK_VAL_LOSS": verdict, "NO_MASK_HONEST_LOSS": place}


# ---- 07: the T^2 memory ------------------------------------------------------------------


def _explicit_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Notebook 07's explicit path on (B,H,T,hs): scores, scale, mask, softmax, weights @ v."""
    T = q.shape[-2]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    wei = (q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5).masked_fill(future, float("-inf"))
    return F.softmax(wei, dim=-1) @ v


class MemoryPrediction(Prediction):
    """How the weights grow with T, and the explicit head's measured peak at T = 2048 (B = 2,
    4 heads, hs = 64, float32), in MiB: about two weights tensors live at once, not one."""

    notebook = "07_head_on_gpu.ipynb"
    grade_id = "predict-memory"
    names = ("EXPLICIT_GROWTH", "EXPLICIT_PEAK_MIB")
    points = 2.0
    questions = {
        "EXPLICIT_GROWTH": "predicted how the (B, n_head, T, T) weights grow when T doubles",
        "EXPLICIT_PEAK_MIB": "predicted the explicit head's peak memory at T = 2048 in MiB",
    }

    def setting(self) -> dict[str, Any]:
        return {"B": 2, "n_head": 4, "T": 2048, "head_size": 64, "seed": 0}

    def truth(self, cases: dict[str, Any]) -> dict[str, Answer]:
        from attention_course.measure import peak_bytes

        B, H, T, hs = cases["B"], cases["n_head"], cases["T"], cases["head_size"]
        g = torch.Generator().manual_seed(cases["seed"])
        qkv = [torch.randn(B, H, T, hs, generator=g) for _ in range(3)]  # (B,H,T,hs) each
        peak = peak_bytes(partial(_explicit_head, *qkv), torch.device("cpu"))  # about 0.4 s
        weights = [B * H * n * n * 4 for n in (T, 2 * T)]  # float32 weights tensors
        return {"EXPLICIT_GROWTH": weights[1] / weights[0], "EXPLICIT_PEAK_MIB": peak / 2**20}

    def agrees(self, name: str, value: Any, expected: Answer) -> bool:
        number = _number(value)  # within 25 %: one weights tensor (128 MiB) is not the peak
        return number is not None and abs(number - float(expected)) <= 0.25 * float(expected)


SPECS: list[CellSpec] = [
    TransposePrediction(),
    TiedPrediction(),
    MaskAfterPrediction(),
    LeakPrediction(),
    OutputsPrediction(),
    FoldPrediction(),
    SharpenPrediction(),
    InitVariancePrediction(),
    NoMaskPrediction(),
    MemoryPrediction(),
]
