"""Notebook 06: answers written from scratch: capture-attention, unmasked-head, value-ablation."""

from tests.corpus import Choose, Writer, exported, variants
from tests.corpus.fragments import (
    AGGREGATES,
    IMPORTS,
    MASK_THEN_SOFTMAX,
    MASKS,
    SCALES,
    SCORES,
    SOFTMAXES,
    aggregate_line,
    body,
    held,
    scaled_scores,
    weights_lines,
)
from tests.corpus.nb04 import each_way
from tests.corpus.nb05 import FORWARD_BUILT, IN_PLACE, REGISTER, TRIL_EXPR

NB = "06_experiments.ipynb"


HOOKS = [
    (
        "handle = head.dropout.register_forward_hook(lambda m, inputs, output: "
        "store.append(inputs[0].detach()))"
    ),
    (
        "handle = head.dropout.register_forward_pre_hook(lambda m, inputs: "
        "store.append(inputs[0].detach().clone()))"
    ),
    (
        "handle = head.dropout.register_forward_hook(lambda m, inputs, output: "
        "store.append(output.detach()))"
    ),
]


def capture(choose: Choose) -> str:
    return f"""{IMPORTS}
def capture_attention(head, x):
    store = []
    {choose("hook", HOOKS)}
    try:
        with torch.no_grad():
            head(x)
    finally:
        handle.remove()
    return store[-1]
"""


def recompute(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    """Recomputes the weights instead of capturing them, with a mistake on the way."""
    lines = weights_lines(choose, mistake, way, tril="head.tril[:T, :T]", query_axis="1")
    return f"""{IMPORTS}
def capture_attention(head, x):
    B, T, C = x.shape
    k, q = head.key(x), head.query(x)
    hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES))}
{body(lines)}
    return wei.detach()
"""


def unmasked(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    wrong = held(mistake, set(SOFTMAXES) - {None})
    softmax = SOFTMAXES[wrong][way % len(SOFTMAXES[wrong])] if wrong else None
    softmax = (softmax or choose("softmax", SOFTMAXES[None])).replace("{query_axis}", "1")
    return f"""{IMPORTS}
class UnmaskedHead(Head):
    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES), 8)}
{body(softmax, 8)}
        wei = self.dropout(wei)
{body(aggregate_line(choose, mistake, way), 8)}
        return out
"""


NO_VALUE_TRILS = {
    None: ["self.tril[:T, :T]"],
    "tril-not-cropped": ["self.tril", "self.tril[:T]", "self.tril[:, :T]"],
}
X_AT_WEI = {
    "v-at-wei": [
        "out = x @ wei",
        "out = (x.transpose(-2, -1) @ wei).transpose(-2, -1)",
        "out = torch.einsum('bts,btc->bsc', wei, x)",
        "out = wei.mT @ x",
    ]
}
USES_TRIL = [m for m in MASKS[None] if "{tril}" in m]


DEVICE_TRILS = {**NO_VALUE_TRILS, "hardcoded-device": TRIL_EXPR["hardcoded-device"]}
STRUCTURAL = {"tril-not-cropped", "hardcoded-device", "tril-not-buffer", "mask-in-place"}


def no_value(choose: Choose, mistake: str | None = None, way: int = 0) -> str:
    """NoValueHead; `mistake` (with `way`) picks the part written wrong, the module's
    mask (notebook 05's pieces) included."""
    unregistered = held(mistake, {"tril-not-buffer"})
    register = REGISTER[unregistered][way] if unregistered else choose("reg", REGISTER[None])
    mask_id = held(mistake, DEVICE_TRILS)
    tril = (
        DEVICE_TRILS[mask_id][way % len(DEVICE_TRILS[mask_id])]
        if mask_id
        else (DEVICE_TRILS[None][0])
    )
    if register == "self.block_size = block_size":
        tril = FORWARD_BUILT
    structural = held(mistake, STRUCTURAL) is not None
    in_place = held(mistake, IN_PLACE)

    def pick_mask(name: str, options: list) -> str:
        return choose(name, USES_TRIL if name == "mask" and structural else options)

    if in_place:
        weights = IN_PLACE[in_place][way]
    else:
        weights = weights_lines(pick_mask, mistake, way, tril=tril, query_axis="1")
    if held(mistake, X_AT_WEI):
        out = X_AT_WEI["v-at-wei"][way]
    else:
        out = aggregate_line(choose, None, None, v="x")
    return f"""{IMPORTS}
class NoValueHead(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
{body(register, 8)}
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)
        hs = k.shape[-1]
{body(scaled_scores(choose, mistake, way, SCALES), 8)}
{body(weights, 8)}
        wei = self.dropout(wei)
{body(out, 8)}
        return out
"""


def _writers() -> list[Writer]:
    ws = variants("capture-attention", "hook", capture, "hook", len(HOOKS))
    scales = {k: v for k, v in SCALES.items() if k}
    ws += each_way("capture-attention", recompute, [scales, SOFTMAXES], "recomputed")
    swapped = {"swapped-qk": SCORES["swapped-qk"]}
    ws += each_way("capture-attention", recompute, [swapped], "recomputed")
    ws += variants("unmasked-head", "scores", unmasked, "scores", 3)
    aggregate_x = {"aggregate-x": AGGREGATES["aggregate-x"]}
    ws += each_way("unmasked-head", unmasked, [scales, SOFTMAXES, aggregate_x], "piece")
    ws += variants("value-ablation", "scores", no_value, "scores", 4)
    ws += variants("value-ablation", "register", no_value, "reg", len(REGISTER[None]))
    after = {"mask-after-softmax": MASK_THEN_SOFTMAX["mask-after-softmax"]}
    tables = [MASKS, SOFTMAXES, after, scales, X_AT_WEI, DEVICE_TRILS, IN_PLACE]
    tables.append({"tril-not-buffer": REGISTER["tril-not-buffer"]})
    ws += each_way("value-ablation", no_value, tables, "piece")
    return ws


WRITERS = _writers()


MUTATIONS, ALTERNATIVES = exported(NB, WRITERS)
