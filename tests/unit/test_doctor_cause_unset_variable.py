"""causes/unset_variable.py: an env:// rendezvous without its variables is rendezvous-config.
Sources of the lines:

- torch v2.3.0 torch/distributed/rendezvous.py, _env_rendezvous_handler: ``_env_error(var)``,
  "Error initializing torch.distributed using env:// rendezvous: environment variable {var}
  expected, but not set" (``_rendezvous_error`` makes it a ValueError), raised as
  ``raise _env_error("MASTER_ADDR")`` and from ``_get_env_or_raise``
- torch v1.9.0 same file: the same text, ``"environment variable %s expected, but not set" %
  var``
- torch v2.3.0 torch/distributed/elastic/utils/api.py, ``get_env_variable_or_raise``:
  "Environment variable {env_name} expected, but not set" (a ValueError)
- torch v0.4.0 torch/lib/THD/process_group/General.cpp (env:// init): "rank is not set but it is
  required for env:// init method" (also world_size)
- CPython's os.environ[key] for a missing key: ``raise KeyError(key) from None``, printed
  "KeyError: 'RANK'", in a script that reads the launcher's variables itself
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

ERROR = ("ValueError: Error initializing torch.distributed using env:// rendezvous: "
         "environment variable {var} expected, but not set")
FRAME = ('  File "{path}/torch/distributed/rendezvous.py", line {line}, in '
         "_env_rendezvous_handler")


@pytest.mark.parametrize("var", ["MASTER_ADDR", "RANK", "WORLD_SIZE", "MASTER_PORT"])
def test_an_unset_rendezvous_variable_is_rendezvous_config(tmp_path: Path, var: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           FRAME.format(path="/opt/conda/lib/python3.10/site-packages", line=232),
                           f'    raise _env_error("{var}")', ERROR.format(var=var)])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "launch" in found.fix


@pytest.mark.parametrize("var", ["MASTER_ADDR", "RANK"])
def test_the_raise_line_alone_names_the_variable(tmp_path: Path, var: str) -> None:
    # a posted traceback that stops at its raise line, without the exception's own line
    found = top(tmp_path, ["Traceback (most recent call last):",
                           FRAME.format(path="/home/u/env/lib/python3.8/site-packages", line=166),
                           f'    raise _env_error("{var}")'])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert var in found.explanation


def test_torchelastics_wording_is_read(tmp_path: Path) -> None:
    found = top(tmp_path, ["ValueError: Environment variable WORLD_SIZE expected, but not set"])
    assert found.id == "rendezvous-config" and "WORLD_SIZE" in found.explanation
    # (the local rank alone, which a launcher hands each process: the local rank's finding)
    found = top(tmp_path, ["ValueError: Environment variable LOCAL_RANK expected, but not set"])
    assert found.id == "local-rank-argument" and "LOCAL_RANK" in found.explanation


@pytest.mark.parametrize("name", ["rank", "world_size"])
def test_torch_04s_wording_is_read(tmp_path: Path, name: str) -> None:
    found = top(tmp_path, [f"RuntimeError: {name} is not set but it is required for env:// init "
                           "method at /opt/conda/torch/lib/THD/process_group/General.cpp:17"])
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert name.upper() in found.explanation


@pytest.mark.parametrize(("var", "finding"), [
    ("RANK", "rendezvous-config"), ("WORLD_SIZE", "rendezvous-config"),
    ("MASTER_ADDR", "rendezvous-config"),
    # the local rank a launcher hands each process: the local rank's finding
    ("LOCAL_RANK", "local-rank-argument")])
def test_a_launchers_variable_read_by_the_script_is_read(tmp_path: Path, var: str,
                                                          finding: str) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "train.py", line 12, in <module>',
                           f"    local_rank = int(os.environ['{var}'])",
                           '  File "/usr/lib/python3.10/os.py", line 680, in __getitem__',
                           "    raise KeyError(key) from None", f"KeyError: '{var}'"])
    assert (found.id, found.severity) == (finding, "error")
    assert var in found.explanation


def test_another_key_is_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):", "KeyError: 'model_state'"])
    assert found.id != "rendezvous-config"
