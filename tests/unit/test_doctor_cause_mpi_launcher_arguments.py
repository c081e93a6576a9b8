"""causes/mpi_launcher_arguments.py: MPICH's mpiexec refusing an option is invalid-usage.

Lines from MPICH's Hydra (src/pm/hydra, utils/args/args.c, match_arg: HYDU_ERR_SETANDJUMP(status,
HYD_INTERNAL_ERROR, "unrecognized argument %s\\n", arg); its callers' HYDU_ERR_POP messages
"argument matching returned error", "error parsing input array", "unable to parse user
arguments", "error parsing parameters"), each after HYDU_error_printf's "[%s@%s] %s (%s:%d): "
prefix: the program, the host, the function and its source line."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

HYDRA = [
    "[mpiexec@{host}] match_arg (./utils/args/args.c:{line}): unrecognized argument {option}",
    "[mpiexec@{host}] HYDU_parse_array (./utils/args/args.c:{line2}): argument matching "
    "returned error",
    "[mpiexec@{host}] parse_args (./ui/mpich/utils.c:1609): error parsing input array",
    "[mpiexec@{host}] HYD_uii_mpx_get_parameters (./ui/mpich/utils.c:1660): unable to parse "
    "user arguments",
    "[mpiexec@{host}] main (./ui/mpich/mpiexec.c:153): error parsing parameters",
]


@pytest.mark.parametrize(("host", "option"), [("97706765f01f", "noprefix"),
                                              ("node-1.cluster", "allow-run-as-root"),
                                              ("gpu07", "x")])
@pytest.mark.parametrize("lines", [slice(0, 5), slice(0, 1)])
def test_mpiexec_refusing_an_option(tmp_path: Path, host: str, option: str,
                                    lines: slice) -> None:
    made = [line.format(host=host, line=160, line2=175, option=option) for line in HYDRA]
    found = top(tmp_path, ["Running distributed tests for the MPI backend", *made[lines]])
    assert (found.id, found.severity) == ("invalid-usage", "error")
    assert f"({option})" in found.explanation and "which mpiexec" in found.fix


def test_a_scripts_own_unrecognized_argument_is_no_mpiexec_refusal(tmp_path: Path) -> None:
    found = top(tmp_path, ["train.py: error: unrecognized arguments: --local-rank=0"])
    assert "mpiexec" not in found.explanation
