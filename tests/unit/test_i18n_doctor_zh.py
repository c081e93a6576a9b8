"""Issue 23: the doctor in Chinese at 80 columns.

Every catalogue finding, shown by the renderer ``ddpkit doctor --log`` uses (the command's own
``_run_logs``, with the diagnosis replaced by the finding), and a set of the doctor's errors, raised
where they are raised (or built from a raise site's own template) and shown by ``render.error``:
in zh each has Chinese text in it and no line wider than 80 display columns.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ddpkit.cli.commands import doctor as doctor_command
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width
from ddpkit.doctor.catalogue import ENTRIES, Entry
from ddpkit.doctor.cluster import session
from ddpkit.doctor.cluster.meeting import MeetingStore
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log import diagnose as diagnose_module
from ddpkit.doctor.log import flight_recorder
from ddpkit.doctor.log.refusal import unreadable
from ddpkit.doctor.log.verdict import Verdict
from ddpkit.errors import ConfigError, DdpkitError, NetworkProblem
from ddpkit.i18n import _

WIDTH = 80
_CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def in_chinese(chinese: None) -> None:
    """Every test here renders in Chinese (the shared ``chinese`` fixture of tests/conftest.py)."""


def _console() -> tuple[Console, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Console(out=out, err=err, color=False, width=WIDTH), out, err


def _too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if display_width(line) > WIDTH]


def _finding(item: Entry) -> Finding:
    return Finding(item.id, item.severity, item.title, item.explanation, item.fix,
                   (Evidence("node0.log", 12, "NCCL WARN a quoted log line, kept as it was"),))


def _shown(item: Entry, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lines ``ddpkit doctor --log`` prints for ``item`` (its summary line left out)."""
    monkeypatch.setattr(diagnose_module, "read_verdict",
                        lambda paths, stdin=None: Verdict((_finding(item),), None))
    console, out, _err = _console()
    doctor_command._run_logs(["node0.log"], console, as_json=False)
    return out.getvalue().split("\n\n")[0].splitlines()


@pytest.mark.parametrize("item", ENTRIES, ids=[e.id for e in ENTRIES])
def test_every_finding_is_chinese_within_80_columns(item: Entry,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    heading, *body = _shown(item, monkeypatch)
    assert item.id in heading
    assert _CJK.search("\n".join(body)), body
    assert not _too_wide("\n".join(body)), "\n".join(_too_wide("\n".join(body)))


def test_every_finding_title_and_fix_are_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    for item in ENTRIES:
        heading, *body = _shown(item, monkeypatch)
        label = "  解决："  # the zh of "  fix:"
        fix = "\n".join(body[body.index(label):]) if label in body else ""
        assert _CJK.search(heading), heading
        assert not _too_wide(heading), heading
        assert _CJK.search(fix), fix


def test_the_json_finding_stays_english(monkeypatch: pytest.MonkeyPatch) -> None:
    item = ENTRIES[0]
    monkeypatch.setattr(diagnose_module, "read_verdict",
                        lambda paths, stdin=None: Verdict((_finding(item),), None))
    console, out, _err = _console()
    doctor_command._run_logs(["node0.log"], console, as_json=True)
    assert item.explanation in out.getvalue()
    assert not _CJK.search(out.getvalue())


# --- errors ----------------------------------------------------------------------------------


def _options(**changes: Any) -> session.ClusterOptions:
    fields: dict[str, Any] = {"nnodes": 2, "node_rank": 1, "master_addr": "10.0.0.2",
                              "master_port": 29500, "timeout_s": 30.0}
    fields.update(changes)
    return session.ClusterOptions(**fields)


class _Meeting:
    """The calls of MeetingStore that ``session._join``/``_read`` make, answered from a dict."""

    def __init__(self, values: dict[str, Any], claimed: bool = False) -> None:
        self.values, self.claimed = values, claimed

    def has(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str) -> Any:
        return self.values[key]

    def put(self, key: str, value: Any) -> None:
        self.values[key] = value

    def claim(self, key: str, mine: Any) -> Any:
        return {"hostname": "other"} if self.claimed else None

    def add(self, key: str, amount: int) -> int:
        return amount


class _DeadStore:
    def check(self, keys: list[str]) -> bool:
        raise RuntimeError("Connection reset by peer")


def _record() -> Any:
    return SimpleNamespace(nonce="n", hostname="node1")


def _bad_record(data: dict[str, Any]) -> Any:
    raise ValueError("wire version 9, expected 1")


def _raised(action: Callable[[], object]) -> DdpkitError:
    with pytest.raises(DdpkitError) as caught:
        action()
    return caught.value


def _errors(tmp: Path) -> list[DdpkitError]:
    device = "/dev/null"
    not_a_dump = tmp / "rank_0"
    not_a_dump.write_bytes(b"\x80\x04not a pickle")
    no_entries = tmp / "rank_1"
    no_entries.write_bytes(b"\x80\x04}\x94.")  # protocol 4's empty dict: no entries
    big = tmp / "rank_2"
    big.write_bytes(b"\x80\x04" + b"x" * 64)
    past = 0.0
    raised = [
        lambda: session.validate(_options(nnodes=1)),
        lambda: session.validate(_options(node_rank=5)),
        lambda: session.validate(_options(master_addr="")),
        lambda: session.validate(_options(master_port=70000)),
        lambda: session.validate(_options(timeout_s=1.0)),
        lambda: diagnose_module.check_readable("missing.log"),
        lambda: diagnose_module.check_readable(str(tmp)),
        lambda: diagnose_module.check_readable(device),
        lambda: diagnose_module.diagnose(["-"], stdin=None),
        lambda: flight_recorder.read_dump(str(not_a_dump)),
        lambda: flight_recorder.read_dump(str(no_entries)),
        lambda: MeetingStore(_DeadStore(), "10.0.0.2:29500").has("meeting"),
        lambda: session._join(_Meeting({}), _options(), _record(), past),  # type: ignore[arg-type]
        lambda: session._join(_Meeting({"meeting": {"nnodes": 3}}),  # type: ignore[arg-type]
                              _options(), _record(), past),
        lambda: session._join(_Meeting({"meeting": {"nnodes": 2}}, claimed=True),  # type: ignore[arg-type]
                              _options(), _record(), past),
        lambda: session._read(_Meeting({"node/1": {}}), "node/1", _bad_record),  # type: ignore[arg-type]
    ]
    found = [_raised(action) for action in raised]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flight_recorder, "MAX_DUMP_BYTES", 16)
        found.append(_raised(lambda: flight_recorder.read_dump(str(big))))
    # Raise sites that need a second machine or a store, built from their own templates.
    found += [
        ConfigError("master-not-local",
                    _("this is node 0 (the master) but --master-addr {addr} ({addresses}) is not "
                      "an address of this machine", addr="10.0.0.2", addresses="10.0.0.2"),
                    _("on node 0 give its own private address (see `ddpkit nics`); on the other "
                      "nodes run this command with --node-rank 1..N-1")),
        ConfigError("master-address-shared",
                    _("--master-addr {addr} is also an address of this machine (node {rank}, "
                      "{ifname}): a NAT/container address that every node has", addr="172.17.0.2",
                      rank=1, ifname="eth0"),
                    _("give node 0's private-network address instead (`ddpkit nics` on node 0)")),
        NetworkProblem("master-unreachable",
                       _("could not connect to the master's store at {addr}:{port}: {why}",
                         addr="10.0.0.2", port=29500, why="connection refused"),
                       _("check --master-addr and --master-port, and that `ddpkit doctor --nnodes "
                         "N --node-rank 0` runs on the master")),
        NetworkProblem("store-failed",
                       _("could not {what} at {addr}:{port}: {why}", what=_("start the store"),
                         addr="10.0.0.2", port=29500, why="Address already in use"),
                       _("check --master-addr and --master-port, and that nothing else uses the "
                         "port")),
        unreadable("train.log", "Permission denied"),
    ]
    return found


def _error_lines(error: DdpkitError) -> list[str]:
    console, _out, err = _console()
    render.error(console, error, as_json=False)
    return err.getvalue().splitlines()


def _link(line: str) -> bool:
    return "https://" in line


def test_the_doctors_errors_are_chinese_within_80_columns(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # short relative paths in the messages
    errors = _errors(Path("."))
    assert len(errors) >= 20
    assert len({e.error_id for e in errors}) >= 12
    for error in errors:
        lines = _error_lines(error)
        shown = "\n".join(lines)
        assert error.error_id in shown
        assert _CJK.search(shown), shown
        text = "\n".join(line for line in lines if not _link(line))  # see the test below
        assert not _too_wide(text), "\n".join(_too_wide(text))


def test_the_doctors_error_links_fit_80_columns(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    links = [line for error in _errors(Path(".")) for line in _error_lines(error) if _link(line)]
    assert links
    assert not _too_wide("\n".join(links)), "\n".join(_too_wide("\n".join(links)))
