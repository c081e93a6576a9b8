"""Pure: the ``tc`` steps that shape one private NIC's egress (``tbf`` rate, ``netem`` delay/loss).

Both ends of every private veth get the same qdisc, so each direction is shaped: the node's NIC
shapes what the node sends, the host-side end shapes what the node receives.

- rate only: ``root tbf rate R burst B latency 50ms``.
- delay/loss: ``root handle 1: netem delay D loss L``, then (with a rate) ``parent 1:1 handle 10:
  tbf ...`` under it, the layout the tc-netem manual gives for delay plus rate. Needs the kernel's
  ``sch_netem``; ``ddpkit.sim.cluster`` probes for it before building anything.
"""

from __future__ import annotations

from ddpkit.i18n import _
from ddpkit.sim.spec import SimSpec, parse_rate
from ddpkit.sim.steps import Step

TBF_LATENCY = "50ms"  # how long a packet may wait in the tbf queue before it is dropped
MIN_BURST_BYTES = 64 * 1024  # at least one full GSO super-packet, or tbf stalls
BURST_SECONDS = 0.004  # 4 ms of traffic at the rate


def tbf_burst_bytes(rate_bits: int) -> int:
    """Bucket size for a rate: 4 ms worth of bytes, never below 64 KiB."""
    return max(MIN_BURST_BYTES, round(rate_bits / 8 * BURST_SECONDS))


def tbf_args(rate: str) -> tuple[str, ...]:
    bits = parse_rate(rate)
    return ("tbf", "rate", rate, "burst", str(tbf_burst_bytes(bits)), "latency", TBF_LATENCY)


def netem_args(spec: SimSpec) -> tuple[str, ...]:
    args: tuple[str, ...] = ("netem",)
    if spec.delay is not None:
        args += ("delay", spec.delay)
    if spec.loss is not None:
        args += ("loss", spec.loss)
    return args


def egress_steps(spec: SimSpec, *, device: str, namespace: str | None) -> list[Step]:
    """The qdisc steps for ``device`` (in ``namespace``, or the host's when None); [] if unshaped."""
    tc = ("tc", "-n", namespace) if namespace else ("tc",)
    where = _("{namespace}'s {device}", namespace=namespace, device=device) if namespace else device
    steps: list[Step] = []
    if spec.needs_netem:
        netem = netem_args(spec)
        steps.append(Step(
            _("add {netem} to {where}", netem=" ".join(netem[1:]), where=where),
            (*tc, "qdisc", "add", "dev", device, "root", "handle", "1:", *netem),
        ))
        if spec.rate is not None:
            steps.append(Step(
                _("shape {where} to {rate}", where=where, rate=spec.rate),
                (*tc, "qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:",
                 *tbf_args(spec.rate)),
            ))
    elif spec.rate is not None:
        steps.append(Step(
            _("shape {where} to {rate}", where=where, rate=spec.rate),
            (*tc, "qdisc", "add", "dev", device, "root", *tbf_args(spec.rate)),
        ))
    return steps
