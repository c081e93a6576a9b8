"""Tables, headline, CSV and plot data from a ``ddpkit.bench/1`` payload; matplotlib stays optional."""

from __future__ import annotations

import builtins
import csv
import io
from pathlib import Path
from typing import Any

import pytest
from test_bench_run_merge import GOOD_DOCS, _payload

from ddpkit.bench import report
from ddpkit.bench.plot import plot_data, require_matplotlib, write_plot
from ddpkit.errors import EnvironmentProblem


@pytest.fixture
def payload() -> dict[str, Any]:
    return _payload(GOOD_DOCS)


def test_tcp_table_names_pairs_interfaces_rate_and_kernel_link_speed(payload: dict[str, Any]) -> None:
    table = report.tcp_table(payload)
    assert table is not None
    assert table.rows[0][0] == "node0 eth1 10.0.0.2 -> node1 eth1 10.0.0.3"
    assert table.rows[0][2] == "0.960"  # 120 MB/s in Gbit/s
    assert table.rows[0][5] == "10 Gbit/s / unknown"
    assert "960 Mbit/s" in table.footer[0] and "node 0 -> node 1" in table.footer[0]


def test_collective_table_has_nccl_tests_columns_and_the_ratio_to_tcp(payload: dict[str, Any]) -> None:
    tables = report.collective_tables(payload)
    assert [t.title.split()[0] for t in tables] == ["all_reduce", "reduce_scatter"]
    ar = tables[0]
    assert ar.headers == ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                          "busbw/TCP", "#wrong")
    assert ar.rows[-1][0] == str(64 << 20) and ar.rows[-1][5] == "0.114"
    assert [row[6] for row in ar.rows] == ["50%", "95%"]
    assert ar.footer[0].startswith("Avg bus bandwidth: 0.0870 GB/s = 72% of raw TCP")
    assert tables[1].rows == (("skipped: RuntimeError: nope",),)


def test_scaling_table_shows_failed_settings_as_failed(payload: dict[str, Any]) -> None:
    payload["scaling"][2] = {"setting": "powersgd:4", "nodes": 2, "ok": False,
                             "one_node_step_s": 0.29, "error": "timed out after 300 s"}
    table = report.scaling_table(payload)
    assert table is not None
    by = {row[0]: row for row in table.rows}
    assert by["none"][1:] == ("300 ms", "1.00 s", "128", "0.60x", "30%", "ok")
    assert by["powersgd:4"][2:6] == ("-", "-", "-", "-")
    assert by["powersgd:4"][6] == "FAILED: timed out after 300 s"
    assert "25.2M-param MLP (6x2048), batch 64" in table.title


def test_headline_gives_busbw_against_wire_and_the_recommendation(payload: dict[str, Any]) -> None:
    lines = report.headline(payload)
    assert lines[0] == "2 nodes x 1 rank(s), gloo on cpu, interface eth1 (10.0.0.2)"
    assert lines[1] == ("all_reduce busbw 912 Mbit/s (114 MB/s) at 64 MiB = 95% of raw TCP "
                        "960 Mbit/s (120 MB/s)")
    assert lines[2].startswith("stay on one node") or lines[2].startswith("go multi-node")
    assert payload["recommendation"]["text"] == lines[2]


def test_csv_has_fixed_columns_and_one_row_per_measurement(payload: dict[str, Any]) -> None:
    text = report.csv_text(payload)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert tuple(parsed[0].keys()) == report.CSV_COLUMNS
    sections = [row["section"] for row in parsed]
    assert sections.count("tcp") == 2 and sections.count("collective") == 2
    assert sections.count("scaling") == 4
    coll = [row for row in parsed if row["section"] == "collective"][-1]
    assert float(coll["busbw_bytes_per_s"]) == 114e6 and float(coll["busbw_over_tcp"]) == 0.95
    scaling = {row["name"]: row for row in parsed if row["section"] == "scaling"}
    assert float(scaling["none"]["efficiency"]) == pytest.approx(0.3)
    assert scaling["none"]["ok"] == "True"


def test_plot_data_marks_failed_settings_and_the_wire_line(payload: dict[str, Any]) -> None:
    payload["scaling"][1] = {"setting": "bf16", "nodes": 2, "ok": False, "error": "x"}
    data = plot_data(payload, 0.7)
    assert data.busbw[0][0] == "all_reduce" and data.busbw[0][1] == (1 << 20, 64 << 20)
    assert data.busbw[0][2][-1] == pytest.approx(0.912)
    assert data.wire_gbit == pytest.approx(0.96)
    assert data.settings == ("none", "bf16", "powersgd:4", "accumulate:4")
    assert data.failed == (False, True, False, False) and data.efficiency[1] == 0.0
    assert len(data.busbw) == 1  # the skipped reduce_scatter has no line


def test_missing_matplotlib_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    real_import = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    monkeypatch.delitem(__import__("sys").modules, "matplotlib", raising=False)
    with pytest.raises(EnvironmentProblem) as caught:
        require_matplotlib()
    assert caught.value.error_id == "matplotlib-missing"
    # this test runs from a source checkout (pip install -e): there is no 'ddpkit[plot]' wheel
    root = Path(__file__).resolve().parents[2]
    assert f"pip install -e '{root}[plot]'" in caught.value.hint
    monkeypatch.setattr("ddpkit.bench.plot.source_checkout", lambda: None)  # an installed wheel
    with pytest.raises(EnvironmentProblem) as caught:
        require_matplotlib()
    assert "pip install 'ddpkit[plot]'" in caught.value.hint
    with pytest.raises(EnvironmentProblem):
        write_plot({}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_plot_is_written_when_matplotlib_is_there(payload: dict[str, Any], tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    target = tmp_path / "bench.png"
    write_plot(payload, target, 0.7)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["bench.png"]  # no temporary left


def test_a_bench_where_every_job_failed_still_renders_plainly() -> None:
    from test_bench_run_merge import CLUSTER, outcomes_for

    from ddpkit.bench.merge import build_payload
    from ddpkit.bench.run import BenchOptions

    options = BenchOptions(collectives=False, tcp=False, settings=("bf16",))
    outcomes = outcomes_for(options, failed={"scaling:none": ("job-timeout", "x"),
                                             "scaling:bf16": ("job-timeout", "x")})
    payload = build_payload(options, CLUSTER, outcomes, {})
    table = report.scaling_table(payload)
    assert table is not None and "None" not in table.title
    assert [row[6] for row in table.rows] == ["FAILED: timed out after 300 s"] * 2
    lines = report.headline(payload)
    assert lines[0] == "2 nodes x 1 rank(s), backend unknown on unknown device, interface eth1 " \
                       "(10.0.0.2)"
    assert lines[1].startswith("undecided: no setting ran OK on 2 nodes")
    assert payload["ok"] is False


def test_failed_stages_show_the_cause_and_a_fix_line() -> None:
    from ddpkit.bench.report import failed_stages

    payload = {"jobs": [
        {"name": "net", "ok": False, "error_id": "job-failed", "stage": None,
         "message": "node 0 (node0): rank 1 failed first: exit code 1",
         "cause": "RuntimeError: Numpy is not available (at scaling.py:232 in _gather_node_results)",
         "hint": "install numpy for the Python that runs the ranks on every node (`pip install numpy`)"},
        {"name": "scaling-none", "ok": True},
        {"name": "scaling-bf16", "ok": False, "error_id": "job-timeout", "stage": "all_nodes",
         "message": "node 0: the job did not finish within 120 s and was stopped", "hint": None},
    ]}
    lines = failed_stages(payload)
    assert lines[0] == ("FAILED net [job-failed]: RuntimeError: Numpy is not available (at "
                        "scaling.py:232 in _gather_node_results)")
    assert lines[1].startswith("  fix: install numpy")
    assert lines[2].startswith("FAILED scaling-bf16 [job-timeout] (stuck in all_nodes): node 0:")
    assert lines[3].startswith("  fix: ")
    assert failed_stages({"jobs": [{"name": "net", "ok": True}]}) == []
