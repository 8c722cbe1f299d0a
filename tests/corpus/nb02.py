"""Notebook 02: answers written from scratch: the shape table, the parameter count, the scores."""

from functools import partial

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import IMPORTS, SCORES, body, held

NB = "02_queries_and_keys.ipynb"

SHAPES_LITERAL = """SHAPES = {
    "k": (4, 8, 16),
    "q": (4, 8, 16),
    "k_T": K_T,
    "scores": (4, 8, 8),
    "masked": (4, 8, 8),
    "weights": (4, 8, 8),
    "v": (4, 8, 16),
    "out": OUT,
}
"""
SHAPES_NAMED = """B, T, C, hs = 4, 8, 32, 16
SHAPES = dict(k=(B, T, hs), q=(B, T, hs), k_T=K_T, v=(B, T, hs), out=OUT)
SHAPES.update(scores=(B, T, T), masked=(B, T, T), weights=(B, T, T))
"""
SHAPES_COMPUTED = """B, T, C, hs = 4, 8, 32, 16
x = torch.zeros(B, T, C, device="meta")
key, query, value = (nn.Linear(C, hs, bias=False, device="meta") for _ in range(3))
k, q, v = key(x), query(x), value(x)
k_T = K_T_EXPR
wei = q @ k.transpose(-2, -1)
SHAPES = {"k": k.shape, "q": q.shape, "k_T": k_T.shape, "v": v.shape, "scores": wei.shape}
SHAPES["masked"] = SHAPES["weights"] = wei.shape
SHAPES["out"] = OUT_EXPR.shape
"""
# (as numbers, as names) for the literal and the named table
K_T = {None: ("(4, 16, 8)", "(B, hs, T)"), "transpose-batch": ("(8, 4, 16)", "(hs, T, B)")}
OUT = {None: ("(4, 8, 16)", "(B, T, hs)"), "aggregate-x": ("(4, 8, 32)", "(B, T, C)")}
K_T_EXPR = {None: "k.transpose(-2, -1)", "transpose-batch": "k.transpose(0, 1)"}
OUT_EXPR = {None: "(wei @ v)", "aggregate-x": "(wei @ x)"}


def shape_table(choose: Choose, style: str, mistake: str | tuple[str, ...] | None = None) -> str:
    """The table written as numbers ('literal'), as names ('named') or computed on meta;
    `mistake`: one catalog id, or several (each in its own entry)."""
    k_id, out_id = held(mistake, K_T), held(mistake, OUT)
    if style == "computed":
        text = SHAPES_COMPUTED.replace("K_T_EXPR", K_T_EXPR[k_id])
        return IMPORTS + text.replace("OUT_EXPR", OUT_EXPR[out_id])
    form = 1 if style == "named" else 0
    k_t, out = K_T[k_id][form], OUT[out_id][form]
    text = SHAPES_NAMED if style == "named" else SHAPES_LITERAL
    return IMPORTS + text.replace("K_T", k_t, 1).replace("OUT", out, 1)


PARAMS = {
    None: [
        "N_PARAMS = 3 * 32 * 16",
        "C, hs = 32, 16\nN_PARAMS = 3 * C * hs",
        "layers = [nn.Linear(32, 16, bias=False) for _ in range(3)]\n"
        "N_PARAMS = sum(p.numel() for layer in layers for p in layer.parameters())",
    ],
    "bias": [
        "N_PARAMS = 3 * (32 * 16 + 16)",
        "C, hs = 32, 16\nN_PARAMS = 3 * C * hs + 3 * hs",
        "layers = [nn.Linear(32, 16) for _ in range(3)]\n"
        "N_PARAMS = sum(p.numel() for layer in layers for p in layer.parameters())",
    ],
}


def param_count(choose: Choose, mistake: str | None, way: int) -> str:
    return IMPORTS + PARAMS[mistake][way] + "\n"


PROJECT = [
    "k = key(x)\nq = query(x)",
    "q, k = query(x), key(x)",
    "k = key.forward(x)\nq = query.forward(x)",
]


def affinities(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    scores = SCORES[mistake][way] if mistake else choose("scores", SCORES[None])
    return f"""{IMPORTS}
def affinities(x, key, query):
{body(choose("project", PROJECT))}
{body(scores)}
    return wei
"""


def _writers() -> list[Writer]:
    styles = ("literal", "named", "computed")
    ws = [Writer("shape-table", None, s, partial(shape_table, style=s)) for s in styles]
    for mistake in ("transpose-batch", "aggregate-x"):
        for style in styles:
            fn = partial(shape_table, style=style, mistake=mistake)
            ws.append(Writer("shape-table", mistake, style, fn))
    for mistake, forms in PARAMS.items():
        for way in range(len(forms)):
            ws.append(
                Writer(
                    "param-count",
                    mistake,
                    f"form-{way}",
                    partial(param_count, mistake=mistake, way=way),
                )
            )
    ws += variants("affinities", "scores", affinities, "scores", len(SCORES[None]))
    for mistake in ("swapped-qk", "tied-qk", "transpose-batch"):
        for way in range(len(SCORES[mistake])):
            fn = partial(affinities, mistake=mistake, way=way)
            ws.append(Writer("affinities", mistake, f"scores-{way}", fn))
    return ws


WRITERS = _writers()


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
