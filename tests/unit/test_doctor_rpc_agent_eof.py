"""torch.distributed.rpc's TensorPipe agent on a pipe whose peer went away.

The lines are the agent's own templates (torch/csrc/distributed/rpc/tensorpipe_agent.cpp, torch
1.6 on: "RPC agent for %s encountered error when accepting incoming pipe: %s", "... when reading
incoming request from %s: %s", "... when sending outgoing request #%d to %s: %s", "... when
reading incoming response from %s: %s", "... when sending response to request #%d to %s: %s"),
with TensorPipe's EOFError text ("eof", tensorpipe/common/error.cc) and the place it says the
error came from ("(this error originated at tensorpipe/transport/<uv|shm|ibv>/...:N)"). Worker
names are the users' own: values of every shape a name takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

AGENT = "RPC agent for {me} encountered error when {doing} {peer}: eof (this error originated at " \
        "tensorpipe/transport/{transport}/connection_impl.cc:{line})"


@pytest.mark.parametrize(("doing", "peer"), [
    ("sending response to request #4 to", "trainer_1"),
    ("reading incoming request from", "worker-3"),
    ("sending outgoing request #17 to", "ps0"),
    ("reading incoming response from", "trainer_12"),
])
@pytest.mark.parametrize("transport", ["uv", "shm", "ibv"])
def test_the_peers_end_closed_under_a_pipe_is_a_lost_connection(
        tmp_path: Path, doing: str, peer: str, transport: str) -> None:
    line = AGENT.format(me="parameter_server", doing=doing, peer=peer, transport=transport,
                        line=259)
    found = top(tmp_path, [line])
    assert (found.id, found.severity) == ("connection-lost", "error")
    assert f"{peer}: eof" in found.explanation and "peer process died" in found.explanation
    assert found.evidence[0].text.startswith("RPC agent for parameter_server")


def test_other_agent_errors_and_eof_in_prose_are_no_lost_connection(tmp_path: Path) -> None:
    # an error the pipe did not end with, and "eof" in a user's own words
    lines = ["RPC agent for worker0 encountered error when reading incoming request from worker1:"
             " async error on socket: Operation canceled",
             "data loader reached eof: encountered error when parsing record #3 from shard_7"]
    assert top(tmp_path, lines).id != "connection-lost"


def test_a_strangers_worker_name_is_bounded_and_printed_clean(tmp_path: Path) -> None:
    line = AGENT.format(me="ps", doing="reading incoming request from",
                        peer="t\x1b]0;x\x07\u202e" + "w" * 5000, transport="uv", line=1)
    found = top(tmp_path, [line, AGENT.format(me="ps", doing="reading incoming request from",
                                              peer="t\x1b[2Jw", transport="uv", line=1)])
    assert "\x1b" not in found.explanation and "\u202e" not in found.explanation
