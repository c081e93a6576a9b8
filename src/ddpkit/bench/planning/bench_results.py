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
from dataclasses import dataclass, replace
from typing import Any

from ddpkit.bench.planning.model import GRAD_DTYPE_BYTES, SettingResult, parse_setting
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
    # the bench's own figure per (setting, nodes): its efficiency, and why it failed the bench's
    # sanity check (None: passed); plan shows these, it does not compute them again
    measured: tuple[tuple[str, int, float, str | None], ...] = ()
    repeat: str | None = None  # the bench's "repeat the run: ..." when a figure failed its check


def costed_backend(bench: BenchFacts | None, *, gpu_named: bool) -> str:
    """The backend a plan costs its strategies on: the bench's Gloo when the plan is for the
    cluster that bench measured (no GPU named), else NCCL (what GPUs run)."""
    measured = (bench.backend or "").lower() if bench is not None else ""
    return "gloo" if measured == "gloo" and not gpu_named else "nccl"


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
        measured=_figures(doc.get("scaling", []), source),
        repeat=_text(_block(doc, "recommendation", source), "repeat", "recommendation.repeat",
                     source),
    )


def _figures(rows: list[dict[str, Any]], source: str) -> tuple[tuple[str, int, float, str | None],
                                                                ...]:
    """The efficiency ``ddpkit bench`` wrote per row (rows `_scaling` has checked)."""
    out = []
    for index, row in enumerate(rows):
        where = f"scaling[{index}]"
        efficiency = _positive(row, "efficiency", f"{where}.efficiency", source)
        if efficiency is None or not row.get("ok", True):
            continue
        check = _text(row, "noise", f"{where}.noise", source) if row.get("noisy") else None
        out.append((_label(row["setting"], source), int(row["nodes"]), efficiency,
                    check or (_("failed the bench's sanity check") if row.get("noisy") else None)))
    return tuple(out)


def with_bench_figures(results: tuple[SettingResult, ...], bench: BenchFacts | None,
                       nodes: int) -> tuple[SettingResult, ...]:
    """``results`` with the bench's own efficiency (and its sanity check) wherever the plan used
    that bench's measured step: one computation, in ``ddpkit bench``; a hand-written file with
    only ``step_s`` keeps the model's ratio."""
    figures = {(label, count): (eff, check) for label, count, eff, check in
               (bench.measured if bench else ())}
    out = []
    for r in results:
        figure = figures.get((r.setting.label, nodes))
        if figure is not None and r.measured_step_s is not None:
            r = replace(r, measured_efficiency=figure[0], measured_check=figure[1])
        out.append(r)
    return tuple(out)


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


def failed_checks(results: tuple[SettingResult, ...],
                  bench: BenchFacts | None) -> tuple[bool, str] | None:
    """What plan says of the bench's figures that failed the bench's sanity check, as the bench
    does: (True, text) when nothing may be advised (plain DDP's own figure failed, or every one
    did: the predictions rest on the same run), (False, text) to add to the verdict, None if all
    passed. ``results[0]`` is plain DDP."""
    if bench is None or not any(r.measured_check for r in results):
        return None
    repeat = bench.repeat or _("repeat the run")
    clean = [r for r in results if r.measured_efficiency is not None and not r.measured_check]
    if results[0].measured_check is not None or not clean:
        return True, _("undecided: the bench's figures marked ? failed its own sanity check, so "
                       "none is advice and nothing is predicted from that run; {repeat}",
                       repeat=repeat)
    return False, _("the bench's figures marked ? failed its sanity check and are not used: "
                    "{repeat}", repeat=repeat)
