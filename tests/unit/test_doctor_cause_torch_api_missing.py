"""causes/torch_api_missing.py: code asking torch for a name this release lacks is
version-mismatch; a circular import of a script named torch.py, or another package's missing
name, is not. Lines made from CPython's messages (Objects/moduleobject.c, module_getattro:
"module %R has no attribute %U", 3.7 on; Python/ceval.c, import_from: "cannot import name %R from
%R (%S)", 3.7 on; Python/import.c: "No module named %R", ModuleNotFoundError from 3.6; the
circular-import form "partially initialized module %R has no attribute %U (most likely due to a
circular import)", 3.8 on) with torch names that releases renamed or removed
(torch.distributed._all_gather_base, deprecated in 2.x; torch._six, removed in 2.0;
torch.distributed.fsdp's FullyShardedDataParallel's later names; torch.distributed.elastic, new in
1.9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
         "    from apex.transformer import parallel_state"]


@pytest.mark.parametrize(("line", "name"), [
    ("AttributeError: module 'torch.distributed' has no attribute '_all_gather_base'",
     "torch.distributed._all_gather_base"),
    ("[rank3]: AttributeError: module 'torch' has no attribute 'compile'", "torch.compile"),
    ("ImportError: cannot import name 'container_abcs' from 'torch._six' "
     "(/opt/conda/lib/python3.8/site-packages/torch/_six.py)", "torch._six.container_abcs"),
    ("ImportError: cannot import name 'fully_shard' from 'torch.distributed.fsdp' "
     "(/usr/lib/python3/dist-packages/torch/distributed/fsdp/__init__.py)",
     "torch.distributed.fsdp.fully_shard"),
    ("ModuleNotFoundError: No module named 'torch.distributed.elastic'",
     "torch.distributed.elastic"),
    ("[rank1]: ModuleNotFoundError: No module named 'torch._six'", "torch._six"),
])
def test_a_torch_name_this_release_lacks_is_a_version_mismatch(tmp_path: Path, line: str,
                                                               name: str) -> None:
    found = top(tmp_path, [*TRACE, line])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert name in found.explanation and "torch.__version__" in found.fix


@pytest.mark.parametrize("line", [
    "AttributeError: partially initialized module 'torch' has no attribute 'cuda' (most likely "
    "due to a circular import)",
    "AttributeError: module 'numpy' has no attribute 'float'",
    "ImportError: cannot import name 'soft_unicode' from 'markupsafe' (/x/markupsafe/__init__.py)",
    "ModuleNotFoundError: No module named 'torch._C'",
    "ModuleNotFoundError: No module named 'torchvision'",
    "ModuleNotFoundError: No module named 'torch'",
])
def test_another_missing_name_is_not_a_torch_mismatch(tmp_path: Path, line: str) -> None:
    assert top(tmp_path, [*TRACE, line]).id != "version-mismatch"
