"""The ``ddpkit.plan/2`` JSON payload of a plan (units: bytes, bytes/s, seconds, fractions)."""

from __future__ import annotations

from typing import Any

from ddpkit.bench.planning.fit import fit_to_dict
from ddpkit.bench.planning.model import SettingResult
from ddpkit.bench.planning.plan import Plan


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The ``ddpkit.plan/2`` payload (units: bytes, bytes/s, seconds, fractions)."""
    inp = plan.inputs
    return {
        "inputs": {
            "params": inp.params, "grad_dtype": inp.grad_dtype, "grad_bytes": inp.grad_bytes,
            "nodes": inp.nodes, "gpus_per_node": inp.gpus_per_node,
            "inter_node_bytes_per_s": inp.inter_node_bytes_per_s,
            "intra_node_bytes_per_s": inp.intra_node_bytes_per_s,
            "step_compute_s": inp.step_compute_s, "overlap": inp.overlap, "hidden": inp.hidden,
            "algorithm": inp.algorithm, "efficiency_threshold": inp.efficiency_threshold,
        },
        "sources": dict(plan.sources),
        "assumptions": list(plan.assumptions),
        "one_node": {"comm_s": plan.one_node.comm_s, "exposed_s": plan.one_node.exposed_s,
                     "step_s": plan.one_node.step_s},
        "settings": [_result_dict(r) for r in plan.results],
        "memory": fit_to_dict(plan.fit),
        "verdict": {"decision": plan.verdict.decision, "setting": plan.verdict.setting,
                    "text": plan.verdict.text, "cost": plan.verdict.cost,
                    "strategy": plan.verdict.strategy, "apply": list(plan.verdict.apply)},
    }


def _result_dict(r: SettingResult) -> dict[str, Any]:
    return {
        "setting": r.setting.label, "hook": r.setting.hook_spec, "accumulate": r.setting.accumulate,
        "payload_bytes": r.payload_bytes, "comm_s": r.comm_s, "exposed_s": r.exposed_s,
        "step_s": r.step_s, "efficiency": r.efficiency,
        "throughput_vs_one_node": r.throughput_vs_one_node,
        "break_even_compute_s": r.break_even_compute_s,
        "measured_step_s": r.measured_step_s, "measured_efficiency": r.measured_efficiency,
        "failed_in_bench": r.failed_in_bench, "measured_check": r.measured_check,
        "notes": list(r.notes),
    }
