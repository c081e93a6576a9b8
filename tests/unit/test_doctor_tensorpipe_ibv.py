"""TensorPipe's ibverbs wrapper failing (torch.distributed.rpc's transport): tensorpipe
tensorpipe/common/ibv.h checks each ibv_* call with TP_THROW_SYSTEM_IF, which torch's RPC agent
raises as ``RuntimeError: In operator() at tensorpipe/common/ibv.h:<line> "<expr>": <strerror>``
(TensorPipe's error.cc formats "In %s at %s:%d \\"%s\\": %s"). Read as ib-error, with the transport
named and how to leave it out."""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top


@pytest.mark.parametrize("error", ["Operation not supported", "Cannot allocate memory",
                                   "No such device"])
def test_tensorpipes_verbs_call_failing_is_ib_error(tmp_path: Path, error: str) -> None:
    found = top(tmp_path, [
        '  File "/x/site-packages/torch/distributed/rpc/api.py", line 114, in _init_rpc_states',
        "    _set_and_start_rpc_agent(agent)",
        f'RuntimeError: In operator() at tensorpipe/common/ibv.h:172 "": {error}'])
    assert (found.id, found.severity) == ("ib-error", "error")
    assert "TensorPipe" in found.explanation and "_transports" in found.explanation


def test_other_tensorpipe_errors_are_not_verbs(tmp_path: Path) -> None:
    found = top(tmp_path, ['RuntimeError: In operator() at tensorpipe/transport/uv/uv.h:'
                           '312 "rv < 0": connection refused'])
    assert found.id != "ib-error"
