"""causes/ccl_local_rank.py: oneCCL finding no local rank and size. Lines in oneCCL's log
format ("<date>:(<pid>) |CCL_WARN| ..." and "|CCL_ERROR| <file>:<line> <function>: ..."; oneCCL
2021.x src/common/global/global.cpp, getenv_local_coord), and its documented variables
(CCL_PROCESS_LAUNCHER, CCL_LOCAL_RANK, CCL_LOCAL_SIZE)."""

from __future__ import annotations

from pathlib import Path

from cause_logs import top

WARN = ("2024:01:15-03:36:29:(1980058) |CCL_WARN| could not get local_idx/count from environment "
        "variables, trying to get them from ATL")
ERROR = ("2024:01:15-03:36:29:(1980058) |CCL_ERROR| global.cpp:150 getenv_local_coord: condition "
         "global_data::env().ze_ipc_exchange == ccl::ze::ipc_exchange_mode::sockets failed")


def test_oneccl_without_its_local_rank_fails(tmp_path: Path) -> None:
    found = top(tmp_path, [WARN, ERROR, "Traceback (most recent call last):"])
    assert (found.id, found.severity) == ("local-rank-argument", "error")
    assert "CCL_LOCAL_RANK=$LOCAL_RANK" in found.fix
    assert "--local_rank" not in found.explanation  # (not the argparse contract)


def test_its_warning_alone_is_no_failure_of_its_own(tmp_path: Path) -> None:
    found = top(tmp_path, [WARN, "epoch 1: loss 0.41"])
    assert found.id != "local-rank-argument"


def test_a_oneccl_error_line_is_a_failure(tmp_path: Path) -> None:
    found = top(tmp_path, [ERROR])
    assert found.severity == "error"
