"""torchrun's rendezvous flags read as ddpkit's fixed-size job (ddpkit.launch.torchrun.rendezvous):
the c10d line of pytorch/examples' multinode tutorial runs, with a note saying how it was read;
elastic ranges and other backends are refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.errors import UsageError
from ddpkit.launch.torchrun.rendezvous import (
    C10D_DEFAULT_PORT,
    fixed_node_count,
    parse_endpoint,
    read_rendezvous,
)


def test_c10d_with_a_fixed_count_is_the_static_job_at_the_endpoint() -> None:
    got = read_rendezvous("c10d", "10.0.0.2:29603", master_addr=None, master_port=29500,
                          nnodes=2)
    assert (got.master_addr, got.master_port, got.standalone) == ("10.0.0.2", 29603, False)
    assert any("c10d" in n and "static" in n and "--node-rank" in n for n in got.notes)


def test_a_c10d_endpoint_without_a_port_gets_torchruns_c10d_default() -> None:
    got = read_rendezvous("c10d", "10.0.0.2", master_addr=None, master_port=29500, nnodes=2)
    assert got.master_port == C10D_DEFAULT_PORT == 29400
    static = read_rendezvous("static", "10.0.0.2", master_addr=None, master_port=29511, nnodes=2)
    assert static.master_port == 29511  # static: the endpoint's host only; the port as given


def test_port_zero_is_standalone_on_one_node_and_refused_on_several() -> None:
    one = read_rendezvous("c10d", "localhost:0", master_addr=None, master_port=29500, nnodes=1)
    assert one.standalone and any("--standalone" in n for n in one.notes)
    with pytest.raises(UsageError) as info:
        read_rendezvous("c10d", "10.0.0.2:0", master_addr=None, master_port=29500, nnodes=2)
    assert info.value.error_id == "bad-rdzv-endpoint"


@pytest.mark.parametrize(("backend", "endpoint", "addr", "port", "error_id"), [
    ("etcd", None, None, 29500, "rdzv-backend-conflict"),
    ("etcd-v2", "10.0.0.2:2379", None, 29500, "rdzv-backend-conflict"),
    ("c10d", "10.0.0.2:29603", "10.0.0.3", 29500, "rdzv-endpoint-conflict"),
    ("c10d", "10.0.0.2:29603", None, 29511, "rdzv-endpoint-conflict"),
    ("c10d", "10.0.0.2:http", None, 29500, "bad-rdzv-endpoint"),
    ("c10d", "10.0.0.2:70000", None, 29500, "bad-rdzv-endpoint"),
])
def test_what_cannot_be_one_fixed_job_is_refused(backend: str, endpoint: str | None,
                                                 addr: str | None, port: int,
                                                 error_id: str) -> None:
    with pytest.raises(UsageError) as info:
        read_rendezvous(backend, endpoint, master_addr=addr, master_port=port, nnodes=2)
    assert info.value.error_id == error_id


def test_endpoints_parse_like_torchruns() -> None:
    assert parse_endpoint("[fd00::2]:29400") == ("fd00::2", 29400)
    assert parse_endpoint("node-a") == ("node-a", None)


def test_elastic_ranges_say_why_they_are_refused() -> None:
    assert fixed_node_count("2:2") == 2 and fixed_node_count("3") == 3
    with pytest.raises(ValueError, match="elastic ranges .1:4. are not supported: ddpkit runs a "
                                         "fixed-size job"):
        fixed_node_count("1:4")


def test_the_tutorial_line_runs_with_only_the_launcher_renamed(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                               monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train_ddp.py").write_text("import sys\nprint(sys.argv)\n")
    # this node is the worker (node 1): the master is another machine
    result = run_cli("launch", "--dry-run", "--json", "--nproc_per_node=1", "--nnodes=2",
                     "--node_rank=1", "--rdzv_id=456", "--rdzv_backend=c10d",
                     "--rdzv_endpoint=127.0.0.1:29603", "train_ddp.py", "50", "10")
    assert result.code == 0, result.err
    doc = result.json()
    argv = doc["argv"]
    assert "--rdzv-backend=static" in argv and "--rdzv-id=456" in argv
    assert "--master-addr=127.0.0.1" in argv and "--master-port=29603" in argv
    assert argv[-3:] == ["train_ddp.py", "50", "10"]
    assert any("c10d" in note for note in doc["notes"])
    human = run_cli("launch", "--dry-run", "--nnodes=2", "--node_rank=1",
                    "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:29603", "train_ddp.py")
    assert human.code == 0 and "c10d" in human.out + human.err


def test_an_elastic_range_is_a_usage_error_with_the_reason(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('hi')\n")
    result = run_cli("launch", "--dry-run", "--nnodes=1:4", "--rdzv_backend=c10d",
                     "--rdzv_endpoint=127.0.0.1:29603", "x.py")
    assert result.code == 2
    assert "fixed-size job" in result.err


def test_a_c10d_line_without_node_rank_on_two_nodes_takes_its_rank_from_the_endpoint() -> None:
    """pytorch/tutorials' elastic DDP line gives --rdzv_backend=c10d --rdzv_endpoint=HOST:29400
    and no --node_rank: the machine holding HOST is node 0, the other of 2 nodes node 1."""
    from ddpkit.launch.torchrun.rendezvous import implied_node_rank

    rank, note = implied_node_rank(2, "10.0.0.2", lambda host: host == "10.0.0.2")
    assert rank == 0 and "node 0" in note
    rank, note = implied_node_rank(2, "10.0.0.2", lambda host: False)
    assert rank == 1 and "node 1" in note


@pytest.mark.parametrize(("nnodes", "host", "why"), [
    (3, "10.0.0.2", "only the master's rank follows"),
    (2, "127.0.0.1", "loopback"),
    (2, "localhost", "loopback"),
])
def test_a_c10d_line_without_node_rank_that_cannot_say_which_node_is_refused(
        nnodes: int, host: str, why: str) -> None:
    from ddpkit.errors import UsageError
    from ddpkit.launch.torchrun.rendezvous import implied_node_rank

    with pytest.raises(UsageError) as info:
        implied_node_rank(nnodes, host, lambda _host: True)
    assert info.value.error_id == "c10d-node-rank" and why in info.value.message
    assert "--node-rank" in info.value.hint


def test_launch_reads_the_implied_rank_from_this_machines_interfaces() -> None:
    """The CLI's edge: with no --node-rank, an endpoint on an address no interface here holds
    makes this machine node 1 (TEST-NET-3, never assigned), and the note says why."""
    from ddpkit.cli.command_table import build_parser
    from ddpkit.cli.node.torch_options import resolve

    parser, _ = build_parser("launch")
    args = parser.parse_args(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                              "203.0.113.7:29400", "train.py"])
    assert args.node_rank is None
    resolved, options = resolve(args)
    assert resolved.node_rank == 1 and resolved.master_addr == "203.0.113.7"
    assert any("node 1" in note for note in options.notes)
    given = parser.parse_args(["--nnodes", "2", "--node-rank", "0", "--rdzv-backend", "c10d",
                               "--rdzv-endpoint", "203.0.113.7:29400", "train.py"])
    assert resolve(given)[0].node_rank == 0  # a rank given is kept
