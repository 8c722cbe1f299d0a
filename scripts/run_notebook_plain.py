"""Run a notebook's code cells in order with plain Python, where Jupyter is not installed.

Used to run notebook 07 on a GPU machine that has torch but no Jupyter: printed output goes to
stdout, every open matplotlib figure is saved as a PNG after each cell.

    python scripts/run_notebook_plain.py solutions/07_head_on_gpu.ipynb --figures OUTDIR
"""

from __future__ import annotations

import argparse
import builtins
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _display(*objects: object, **_: object) -> None:
    for obj in objects:
        print(repr(obj))


def code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    sources = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell["source"]
        src = "".join(src) if isinstance(src, list) else src
        # IPython-only lines (magics, shell escapes) have no meaning here.
        lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        sources.append("\n".join(lines))
    return sources


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--figures", type=Path, default=Path("figures"))
    args = parser.parse_args()
    args.figures.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    builtins.display = _display  # type: ignore[attr-defined]
    namespace: dict[str, object] = {"__name__": "__main__"}
    saved = 0
    start = time.perf_counter()
    for index, src in enumerate(code_cells(args.notebook)):
        print(f"\n--- cell {index} ---", flush=True)
        exec(compile(src, f"<cell {index}>", "exec"), namespace)  # noqa: S102
        for number in plt.get_fignums():
            saved += 1
            plt.figure(number).savefig(args.figures / f"cell{index:02d}_{saved}.png", dpi=90)
        plt.close("all")
    print(f"\nran {args.notebook} in {time.perf_counter() - start:.1f} s; {saved} figures saved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
