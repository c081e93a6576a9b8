"""The one grammar of a DDP setting: how gradients travel and how often they sync.

``none``, ``bf16``, ``fp16`` (torch's compression hooks), ``powersgd:R`` (PowerSGD at rank R),
``accumulate:K`` (sync every K micro-steps), or a hook and accumulation joined by ``+``
(``bf16+accumulate:4``). ``ddpkit plan``'s model, the bench's scaling worker and ``ddpkit.ddp``'s
hook specs all read these names from here. Standard library only (the workers use it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

HookName = Literal["none", "bf16", "fp16", "powersgd"]  # how gradients travel
COMPRESSIONS: tuple[HookName, ...] = ("none", "bf16", "fp16")  # hooks without a parameter
POWERSGD: HookName = "powersgd"
ACCUMULATE = "accumulate"
_BY_NAME: dict[str, HookName] = {name: name for name in (*COMPRESSIONS, POWERSGD)}
HINT = "settings are none, bf16, fp16, powersgd:R, accumulate:K or e.g. bf16+accumulate:4"


class UnknownSetting(ValueError):
    """A part of a setting label that is not one (``part``, in the whole label ``text``)."""

    def __init__(self, part: str, text: str) -> None:
        super().__init__(f"unknown setting {part!r} in {text!r}")
        self.part, self.text = part, text


class SettingParts(NamedTuple):
    hook: HookName
    powersgd_rank: int | None
    accumulate: int


def parse_setting(text: str) -> SettingParts:
    """The parts of a setting label; ValueError naming the part that is not one."""
    hook: HookName = "none"
    rank: int | None = None
    accumulate = 1
    for part in text.strip().lower().split("+"):
        name, _, value = part.partition(":")
        if name in COMPRESSIONS and not value:
            hook = _BY_NAME[name] if name != "none" else hook
        elif name in (POWERSGD, ACCUMULATE) and value.isdigit() and int(value) >= 1:
            if name == POWERSGD:
                hook, rank = POWERSGD, int(value)
            else:
                accumulate = int(value)
        else:
            raise UnknownSetting(part, text)
    return SettingParts(hook, rank, accumulate)


def hook_label(hook: HookName, rank: int | None) -> str:
    """The setting label of a hook alone: ``powersgd:R`` or the compression's name."""
    return f"{POWERSGD}:{rank}" if hook == POWERSGD else hook
