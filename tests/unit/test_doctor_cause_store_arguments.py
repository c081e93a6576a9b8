"""causes/store_arguments.py: torch's TCPStore refusing the values it is made with (a port above
65535, or a port that is no number) is rendezvous-config, with the port named. Sources of the
lines:

- pybind11 2.x, pybind11.h, ``cpp_function::dispatcher``: "<name>(): incompatible constructor
  arguments. The following argument types are supported:\\n", then "    <n>. <signature>\\n" for
  each overload, then "\\nInvoked with: " and the arguments' reprs joined by ", ", then, where
  keywords were given, "; kwargs: " (or "kwargs: " alone) and "key=repr" joined by ", "
- torch/csrc/distributed/c10d/init.cpp, TCPStore's ``py::init`` (host: str, port: uint16_t,
  worldSize: optional int, isServer, timeout, waitWorkers, multiTenant, and from torch 2.3
  masterListenFd and useLibUV), whose signature pybind11 prints as below (torch 2.4's names)
- the callers: torch/distributed/rendezvous.py's env:// handler (positional, multi_tenant by
  keyword) and torchelastic's ``_create_c10d_store`` (every argument by keyword)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.causes.store_arguments import given_port

HEAD = ("TypeError: __init__(): incompatible constructor arguments. The following argument types "
        "are supported:")
SIGNATURE = ("    1. torch._C._distributed_c10d.TCPStore(host_name: str, port: int, world_size: "
             "Optional[int] = None, is_master: bool = False, timeout: datetime.timedelta = "
             "datetime.timedelta(seconds=300), wait_for_workers: bool = True, multi_tenant: bool = "
             "False, master_listen_fd: Optional[int] = None, use_libuv: bool = True)")


def refusal(invoked: str, signature: str = SIGNATURE, prefix: str = "") -> list[str]:
    return [prefix + line for line in (HEAD, signature, "", "Invoked with: " + invoked)]


@pytest.mark.parametrize(("invoked", "port"), [
    ("'10.0.0.2', 80000, 2, True, datetime.timedelta(seconds=1800); kwargs: multi_tenant=True",
     "80000"),
    ("'node-0', 295000, 16, False, datetime.timedelta(seconds=300); kwargs: multi_tenant=True",
     "295000"),
    ("kwargs: host_name='10.0.0.2', port=65536, world_size=2, is_master=True, "
     "timeout=datetime.timedelta(seconds=900), use_libuv=True", "65536"),
    ("'[fd00::2]', -1, 2, True, datetime.timedelta(seconds=1800)", "-1"),
])
def test_a_port_outside_0_to_65535_is_named(tmp_path: Path, invoked: str, port: str) -> None:
    found = top(tmp_path, ["[rank0]: " + line for line in refusal(invoked)])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert f"port {port}" in found.explanation and "0 to 65535" in found.explanation
    assert "--master-port 29500" in found.fix


def test_a_port_that_is_no_number_is_named(tmp_path: Path) -> None:
    found = top(tmp_path, refusal("'10.0.0.2', '29500', 2, True, datetime.timedelta(seconds=30)"))
    assert found.id == "rendezvous-config"
    assert "'29500' as its port, not a number" in found.explanation


def test_another_refused_value_is_quoted(tmp_path: Path) -> None:
    found = top(tmp_path, refusal("None, 29500, 2, True, datetime.timedelta(seconds=30)"))
    assert found.id == "rendezvous-config"
    assert "None, 29500" in found.explanation


def test_values_given_by_keyword_alone_are_quoted(tmp_path: Path) -> None:
    found = top(tmp_path, refusal("kwargs: host_name=None, port=29500, world_size=2"))
    assert found.id == "rendezvous-config"
    assert "(host_name=None, port=29500" in found.explanation


def test_another_classes_refusal_is_not_the_stores(tmp_path: Path) -> None:
    other = "    1. torch._C._distributed_c10d.ProcessGroupGloo(store: Store, rank: int, size: int)"
    found = top(tmp_path, refusal("None, 0, 80000", signature=other))
    assert found.id != "rendezvous-config"
    assert found.severity == "error"  # the exception still failed the run


def test_the_port_argument_is_read_from_the_printed_values() -> None:
    assert given_port("'a,b', 70000, 1", "") == "70000"  # a comma inside the host's repr
    assert given_port("'host'", "") is None
    assert given_port("", "host_name='h', port=1, world_size=2") == "1"
    assert given_port("host_name, post, 8, False", "multi_tenant=True") == "post"
