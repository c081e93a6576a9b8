"""Read the facts `ddpkit plan --from-bench` needs out of a ``ddpkit.bench/1`` document.

The minimal schema (docs/plan.md, "The bench file") - every block is optional except ``schema``::

    {"schema": "ddpkit.bench/1",
     "model":       {"params": 21000000, "grad_dtype": "fp32"},
     "cluster":     {"nodes": 2, "gpus_per_node": 1, "backend": "gloo", "device": "cpu"},
     "inter_node":  {"busbw_bytes_per_s": 1.2e8},
     "single_node": {"step_s": 0.291, "hook_step_s": {"bf16": 0.30, "powersgd:1": 0.52}},
     "scaling":     [{"setting": "none", "nodes": 2, "step_s": 0.99, "ok": true}]}
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from ddpkit.bench.planning.model import GRAD_DTYPE_BYTES, parse_setting
from ddpkit.errors import ConfigError, DdpkitError
from ddpkit.i18n import _

SCHEMA = "ddpkit.bench/1"


@dataclass(frozen=True)
class BenchFacts:
    source: str
    params: int | None = None
    grad_dtype: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    backend: str | None = None
    device: str | None = None
    inter_node_busbw: float | None = None  # bytes/s, all_reduce busbw across nodes
    one_node_step_s: float | None = None  # plain DDP on one node
    hook_step_s: tuple[tuple[str, float], ...] = ()  # 1-node step with each comm hook
    scaling: tuple[tuple[str, int, float | None], ...] = ()  # (setting, nodes, step_s or None=failed)


def read_bench(path: str | os.PathLike[str]) -> BenchFacts:
    """Load and check a bench results file."""
    hint = _("pass the JSON file `ddpkit bench --json` wrote (schema ddpkit.bench/1)")
    try:
        with open(path, encoding="utf-8") as handle:  # not pathlib: plan starts without it
            text = handle.read()
    except OSError as exc:
        raise ConfigError("bench-unreadable", _("cannot read {path}: {reason}", path=str(path),
                                                 reason=exc.strerror or ""), hint) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("bench-not-json", _("{path} is not JSON: {reason} at line {line}",
                                             path=str(path), reason=exc.msg, line=exc.lineno),
                          hint) from exc
    return parse_bench(doc, str(path))


def _bad(source: str, where: str, want: str) -> DdpkitError:
    return ConfigError("bench-field", _("{source}: {where} must be {want}", source=source,
                                        where=where, want=want),
                       _("fix the file or rerun `ddpkit bench`; docs/plan.md lists the fields"))


def _block(doc: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise _bad(source, name, _("an object"))
    return value


def _positive(block: dict[str, Any], key: str, where: str, source: str) -> float | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise _bad(source, where, _("a number > 0"))
    return float(value)


def _whole(block: dict[str, Any], key: str, where: str, source: str) -> int | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(source, where, _("an integer >= 1"))
    return value


def _text(block: dict[str, Any], key: str, where: str, source: str) -> str | None:
    value = block.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(source, where, _("a string"))
    return value


def parse_bench(doc: Any, source: str = "bench file") -> BenchFacts:
    """Check ``doc`` against the minimal ``ddpkit.bench/1`` schema and pull out the facts."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError("bench-schema", _("{source} has schema {found!r}, expected {schema!r}",
                                           source=source, found=found, schema=SCHEMA),
                          _("pass a file written by `ddpkit bench --json`"))
    model = _block(doc, "model", source)
    cluster = _block(doc, "cluster", source)
    inter = _block(doc, "inter_node", source)
    single = _block(doc, "single_node", source)
    grad_dtype = _text(model, "grad_dtype", "model.grad_dtype", source)
    if grad_dtype is not None and grad_dtype not in GRAD_DTYPE_BYTES:
        raise _bad(source, "model.grad_dtype",
                   _("one of {choices}", choices=", ".join(GRAD_DTYPE_BYTES)))
    hooks = single.get("hook_step_s", {})
    if not isinstance(hooks, dict):
        raise _bad(source, "single_node.hook_step_s", _("an object of setting -> seconds"))
    hook_steps = []
    for label in sorted(hooks):
        seconds = _positive(hooks, label, f"single_node.hook_step_s.{label}", source)
        if seconds is not None:
            hook_steps.append((_label(label, source), seconds))
    return BenchFacts(
        source=source,
        params=_whole(model, "params", "model.params", source),
        grad_dtype=grad_dtype,
        nodes=_whole(cluster, "nodes", "cluster.nodes", source),
        gpus_per_node=_whole(cluster, "gpus_per_node", "cluster.gpus_per_node", source),
        backend=_text(cluster, "backend", "cluster.backend", source),
        device=_text(cluster, "device", "cluster.device", source),
        inter_node_busbw=_positive(inter, "busbw_bytes_per_s", "inter_node.busbw_bytes_per_s",
                                   source),
        one_node_step_s=_positive(single, "step_s", "single_node.step_s", source),
        hook_step_s=tuple(hook_steps),
        scaling=_scaling(doc.get("scaling", []), source),
    )


def _label(text: str, source: str) -> str:
    try:
        return parse_setting(text).label
    except DdpkitError as exc:
        raise _bad(source, _("setting {text!r}", text=text),
                   _("a plan setting like bf16 or powersgd:4")) from exc


def _scaling(rows: Any, source: str) -> tuple[tuple[str, int, float | None], ...]:
    if not isinstance(rows, list):
        raise _bad(source, "scaling", _("a list"))
    out = []
    for index, row in enumerate(rows):
        where = f"scaling[{index}]"
        if not isinstance(row, dict) or not isinstance(row.get("setting"), str):
            raise _bad(source, where, _("an object with a setting"))
        nodes = _whole(row, "nodes", f"{where}.nodes", source)
        if nodes is None:
            raise _bad(source, f"{where}.nodes", _("an integer >= 1"))
        ok = row.get("ok", True)
        step = _positive(row, "step_s", f"{where}.step_s", source) if ok else None
        if ok and step is None:
            raise _bad(source, f"{where}.step_s", _("a number > 0 when ok is true"))
        out.append((_label(row["setting"], source), nodes, step))
    return tuple(sorted(out, key=lambda item: (item[1], item[0])))
