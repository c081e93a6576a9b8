"""``docs/findings.md``, generated from the catalogue (a test keeps the file identical)."""

from __future__ import annotations

from ddpkit.doctor.catalogue.base import Entry
from ddpkit.doctor.catalogue.real_examples import REAL_EXAMPLES, thread_url

# The rows of `ddpkit doctor` without --log (see ddpkit.doctor.checks), for the docs.
PREFLIGHT: tuple[tuple[str, str], ...] = (
    ("interface", "the interface for inter-node traffic (`ddpkit nics`' choice, or the one the "
     "route to --master-addr leaves through) and its traps"),
    ("route", "with --master-addr: the route to the master (interface, source address, gateway)"),
    ("nccl-settings", "NCCL_SOCKET_IFNAME in effect and where it comes from (environment, "
     "NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), plus `nccl-conf show` warnings"),
    ("hostname", "what the hostname resolves to: loopback (127.0.1.1) or a docker-bridge address "
     "is the Gloo trap, unless GLOO_SOCKET_IFNAME is set"),
    ("master-port", "whether --master-port (default 29500) can be bound here"),
    ("shm", "/dev/shm size and writability (fail below 256 MiB, warn below 1 GiB)"),
    ("open-files", "the open-file limit (warn below 4096)"),
    ("ephemeral-ports", "net.ipv4.ip_local_port_range: the ports NCCL connects on (firewalls must "
     "allow them), and whether the master port lies inside it"),
    ("infiniband", "devices in /sys/class/infiniband, their port states, NCCL_IB_DISABLE and the "
     "locked-memory limit"),
    ("gpus", "`nvidia-smi -L` (CUDA is never initialised)"),
    ("torch", "torch's version and CUDA build, read from its package metadata (torch is not "
     "imported)"),
)


def render_markdown(entries: tuple[Entry, ...]) -> str:
    """``docs/findings.md``: every finding id with its meaning, how it is recognised and the fix."""
    parts = [
        "# `ddpkit doctor` findings",
        "",
        "<!-- Generated from src/ddpkit/doctor/catalogue.py (render_markdown); "
        "tests/unit/test_doctor_catalogue.py fails when this file is out of date. -->",
        "",
        "`ddpkit doctor --log FILE...` reads what a failed or hung run printed (NCCL INFO/WARN "
        "lines, torch/torchrun tracebacks, Gloo and c10d errors, from one or many nodes) and "
        "reports findings, most likely root cause first. Each has a stable id, a severity, an "
        "explanation, the evidence (`file:line`) and a concrete fix. The exit status is 1 when "
        "any finding is an error, 0 otherwise. `--json` prints one `ddpkit.doctor/1` document:",
        "",
        "Lines may carry NCCL's `host:pid:tid [dev]` prefix, launcher prefixes (`[node1:0]`, "
        "`[default0]:`, `[rank3]:`, mpirun's `[1,3]<stderr>:`), timestamps and glog headers, "
        "or none; several nodes may be mixed in one file, and a traceback may be flattened into "
        "one line. Give every node's log at once (`ddpkit doctor --log node0.log node1.log`): "
        "facts are correlated across files, e.g. the address rank 0 bootstrapped on against "
        "the address another node was refused by. `-` reads standard input. Input is streamed in "
        "constant memory; binary, truncated or non-UTF-8 files are read, not rejected. A path "
        "that cannot be read is the error `log-unreadable` (exit status 3).",
        "",
        "```json",
        '{"schema": "ddpkit.doctor/1", "ddpkit_version": "...", "findings": [{"id": "...", '
        '"severity": "error", "title": "...", "explanation": "...", "fix": "...", '
        '"evidence": [{"file": "...", "line": 1, "text": "..."}]}]}',
        "```",
        "",
        "The document also has `diagnosis`: the top finding's id, severity and title, and, when "
        "run directories were given, the failed rank that started it (`rank`, `local_rank`, "
        "`host`, `cause`, `how`, `exception`). `ddpkit launch` puts the same object in its "
        "job-failed document (`details.diagnosis`), judged by the same engine from every node's "
        "run directory. A ddpkit run directory's logs are read by their first 2 MiB and last 4 "
        "MiB each (at most 512 events a node), as a failed launch's node reads its own.",
        "",
        "| id | severity | meaning |",
        "| --- | --- | --- |",
    ]
    for item in entries:
        parts.append(f"| [`{item.id}`](#{item.id}) | {item.severity} | {item.title} |")
    parts += [
        "",
        "Without `--log`, `ddpkit doctor` checks this node instead and prints one pass/warn/fail "
        "row per check, with a fix for each row that did not pass (`--json`: `ddpkit.doctor/1` "
        "with a `checks` list of `{id, title, status, detail, fix}`; exit status 1 when a "
        "check failed). The checks:",
        "",
    ]
    parts += [f"- `{check_id}`: {what}" for check_id, what in PREFLIGHT]
    for item in entries:
        parts += [
            "",
            f"## {item.id}",
            "",
            f"**{item.title}** (severity: {item.severity})",
            "",
            item.explanation,
            "",
            f"*Recognised by:* {item.recognised}",
            "",
        ]
        example = REAL_EXAMPLES.get(item.id)
        if example is not None:
            line, source = example
            parts += [f"*Seen in a real log* ([{source}]({thread_url(source)})): `{line}`", ""]
        parts += [
            "*Fix:*",
            "",
            "```",
            item.fix,
            "```",
        ]
    return "\n".join(parts) + "\n"

