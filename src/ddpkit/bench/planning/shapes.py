"""Known model shapes for ``ddpkit plan --model``: pure data.

Sources: the GPT-3 paper (Brown et al. 2020, Table 2.1: GPT-3 Small and XL, tied embeddings,
vocabulary 50257), Llama (Touvron et al. 2023: 7B, 13B, 65B; vocabulary 32000), Llama 2 (70B:
80 layers, 8192 wide, grouped-query attention) and Llama 3 (8B: 32 x 4096, vocabulary 128256).
Parameter counts are the published ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.errors import UsageError
from ddpkit.i18n import _


@dataclass(frozen=True)
class Shape:
    name: str
    params: int
    layers: int
    hidden: int
    vocab: int
    tied_embeddings: bool = False


SHAPES: tuple[Shape, ...] = (
    Shape("gpt3-125m", 125_000_000, 12, 768, 50257, True),
    Shape("gpt3-1.3b", 1_300_000_000, 24, 2048, 50257, True),
    Shape("llama-7b", 6_740_000_000, 32, 4096, 32000),
    Shape("llama-13b", 13_020_000_000, 40, 5120, 32000),
    Shape("llama-65b", 65_290_000_000, 80, 8192, 32000),
    Shape("llama2-70b", 68_980_000_000, 80, 8192, 32000),
    Shape("llama3-8b", 8_030_000_000, 32, 4096, 128256),
)


def find_shape(text: str) -> Shape:
    key = text.strip().lower()
    for shape in SHAPES:
        if key == shape.name:
            return shape
    raise UsageError("unknown-model", _("--model {text!r} is not in ddpkit's model shapes",
                                        text=text),
                     _("use one of {names}, or give --params, --layers, --hidden and --vocab",
                       names=", ".join(s.name for s in SHAPES)))
