"""Recording helpers shared by every probe: run a call, keep its value or its error as data."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from . import ERROR_SUFFIX

MAX_DEPTH = 6  # mirrors model/settings.py's ProbeLimits.plain_depth
ANSWER_LABEL = "<answer "  # the file name an answer cell's code is compiled with (child.py)


def attempt(observed: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """Run fn(); store its plain value under key, or its error text under key + '!'.

    Returns the raw value (None when the call raised), so that a probe can keep using it.
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = fn()
    except (Exception, SystemExit) as err:  # a student's answer may raise anything
        observed[key + ERROR_SUFFIX] = error_text(err)
        return None
    observed[key] = to_plain(value)
    return value


def error_text(err: BaseException) -> str:
    """One line naming the exception, at most 300 characters."""
    try:
        message = str(err)
    except Exception:  # a student's exception may fail to print
        message = ""
    if isinstance(err, NotImplementedError) and not message.strip():
        text = f"NotImplementedError {stub_origin(err)}"
    else:
        text = f"{type(err).__name__}: {message}" if message else type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def stub_origin(err: BaseException) -> str:
    """Where a bare NotImplementedError came from: a stub, an answer not written yet."""
    code = None
    tb = err.__traceback__
    while tb is not None:  # the innermost frame of an answer cell's code
        if tb.tb_frame.f_code.co_filename.startswith(ANSWER_LABEL):
            code = tb.tb_frame.f_code
        tb = tb.tb_next
    if code is None:
        return "from code not answered yet (a stub)"
    cell = code.co_filename.removeprefix(ANSWER_LABEL).removesuffix(">")
    if code.co_name == "<module>":
        return f"in answer cell {cell}: not answered yet (the stub)"
    return f"from `{code.co_name}` of answer cell {cell}: not answered yet (the stub)"


def to_plain(value: Any, depth: int = 0) -> Any:
    """Tensors to numpy arrays, containers recursively; anything else to a short repr."""
    if depth > MAX_DEPTH:
        return {"__repr__": "<nested too deep>"}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, (torch.device, torch.dtype)):
        return str(value)
    if isinstance(value, torch.Size):
        return [int(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v, depth + 1) for k, v in value.items()}
    try:
        text = repr(value)
    except Exception:  # a student's object may fail to print
        text = f"<{type(value).__name__}>"
    return {"__repr__": text[:200]}


def _tensor(value: torch.Tensor) -> Any:
    t = value.detach()
    if t.device.type == "meta":
        return {"__meta__": list(t.shape), "dtype": str(t.dtype)}
    if t.device.type != "cpu":
        t = t.to("cpu")
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.resolve_conj().resolve_neg().numpy().copy()


def call_each(
    observed: dict[str, Any], fn: Callable[..., Any], args_by_key: dict[str, Any]
) -> dict[str, Any]:
    """observed[key] = fn(*args) for each case, on fresh copies of the arguments."""
    for key, args in args_by_key.items():
        attempt(observed, key, lambda args=args: fn(*clone(args)))
    return observed


def clone(value: Any) -> Any:
    """A deep copy of plain case data (tensors cloned), so that a call cannot edit the cases."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value
