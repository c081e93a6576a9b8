"""causes/gloo_no_address.py: Gloo given neither an interface nor a hostname is rendezvous-config.
Source of the line: torch's GlooDeviceFactory.cpp (torch/lib/c10d in 1.x, torch/csrc/distributed/
c10d in 2.x), makeTCPDevice and makeUVDevice: TORCH_CHECK(!interface.empty() ||
!hostname.empty(), "GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty"),
raised through init_process_group's ProcessGroupGloo as RuntimeError."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):",
         '  File "/x/site-packages/torch/distributed/distributed_c10d.py", line 994, in '
         "_new_process_group_helper",
         "    backend_class = ProcessGroupGloo(backend_prefix_store, group_rank, group_size)"]


@pytest.mark.parametrize("transport", ["TCP", "UV"])
def test_no_interface_and_no_hostname_is_the_address_settings(tmp_path: Path,
                                                              transport: str) -> None:
    found = top(tmp_path, [*TRACE, f"RuntimeError: GlooDeviceFactory::make{transport}Device(): "
                                   "interface or hostname can't be empty"])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert f"{transport} transport" in found.explanation
    assert "GLOO_SOCKET_IFNAME" in found.fix and "hostname" in found.fix


def test_the_factorys_other_words_are_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, [*TRACE, "RuntimeError: GlooDeviceFactory::makeDeviceForInterface(): "
                                   "unsupported gloo device"])
    assert "hostname is empty" not in found.explanation
