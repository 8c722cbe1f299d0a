"""Show the code of a course helper in the notebook: the notebook runs what it shows."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


def source(*objects: Any) -> Any:
    """The source of functions, methods or classes: highlighted in Jupyter, else plain text."""
    text = "\n\n".join(textwrap.dedent(inspect.getsource(obj)).rstrip() for obj in objects)
    try:
        from IPython.display import Code
    except ImportError:  # plain Python: the text itself
        return text
    return Code(text, language="python")
