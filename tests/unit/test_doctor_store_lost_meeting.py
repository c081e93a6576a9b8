"""torchrun's agent losing the rendezvous store while the nodes still met (causes/
store_lost_meeting.py): lines built from CPython's traceback format and the frames of torch's
elastic agent (torch/distributed/elastic/agent/server/api.py, the rendezvous package), with the
exceptions c10d raises when the store's end closes or resets the connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

SITE = "/opt/conda/lib/python3.10/site-packages/torch/distributed"


def frame(path: str, line: int, function: str, code: str) -> str:
    return f'  File "{SITE}/{path}", line {line}, in {function}\n    {code}\n'


def traceback(frames: list[str], exception: str) -> str:
    return "Traceback (most recent call last):\n" + "".join(frames) + exception + "\n"


RUN = frame("run.py", 1019, "run", "elastic_launch(")
AGENT = frame("elastic/agent/server/api.py", 713, "_initialize_workers",
              "self._rendezvous(worker_group)")
STATIC = [RUN, AGENT,
          frame("elastic/agent/server/api.py", 541, "_rendezvous",
                "workers = self._assign_worker_ranks("),
          frame("elastic/agent/server/api.py", 635, "_assign_worker_ranks",
                "role_infos_bytes = store.multi_get(")]
DYNAMIC = [RUN, AGENT,
           frame("elastic/agent/server/api.py", 531, "_rendezvous",
                 "rdzv_info = spec.rdzv_handler.next_rendezvous()"),
           frame("elastic/rendezvous/dynamic_rendezvous.py", 1096, "next_rendezvous",
                 "self._op_executor.run(join_op, deadline, self._get_deadline)"),
           frame("elastic/rendezvous/c10d_rendezvous_backend.py", 111, "_call_store",
                 "return getattr(self._store, store_op)(*args, **kwargs)")]
CLOSED = ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely "
          "closed. Did the remote server shutdown or crash?")
RESET = "RuntimeError: Connection reset by peer"


def read(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    log = tmp_path / "node1.log"
    log.write_text(text)
    return [(f.id, f.severity) for f in diagnose([str(log)])]


@pytest.mark.parametrize("frames", [STATIC, DYNAMIC], ids=["assign-ranks", "c10d-rendezvous"])
@pytest.mark.parametrize("exception", [CLOSED, RESET], ids=["closed", "reset"])
def test_the_store_lost_while_the_agents_met_is_node_0s_cause(
        tmp_path: Path, frames: list[str], exception: str) -> None:
    found = read(tmp_path, traceback(frames, exception))
    assert found[0] == ("stopped-while-waiting", "error")
    assert {"connection-lost", "rank-failed"}.isdisjoint(dict(found))


def test_the_store_lost_at_the_exit_barrier_is_not_the_meeting(tmp_path: Path) -> None:
    # the agent's workers finished and it waits for the others at its exit barrier: its lost
    # store is not the nodes meeting (rules/exit_barrier.py reads it)
    frames = [RUN, frame("elastic/agent/server/api.py", 958, "_exit_barrier",
                         "store_util.barrier("),
              frame("elastic/utils/store.py", 208, "barrier", "store.get(last_member_key)")]
    log = tmp_path / "node1.log"
    log.write_text(traceback(frames, CLOSED))
    found = diagnose([str(log)])
    assert found
    assert not any("meeting the other nodes' agents" in f.explanation for f in found)


def test_a_worker_that_lost_its_peer_mid_job_is_still_a_lost_connection(tmp_path: Path) -> None:
    frames = ['  File "train.py", line 40, in <module>\n    loss.backward()\n',
              frame("distributed_c10d.py", 2050, "all_reduce", "work = group.allreduce([tensor])")]
    found = read(tmp_path, traceback(frames, CLOSED))
    assert found[0][0] == "connection-lost"


def test_a_meeting_frame_long_before_the_exception_is_another_traceback(tmp_path: Path) -> None:
    # a cut traceback of the meeting, then a worker's own failure far below it
    text = ("Traceback (most recent call last):\n" + "".join(STATIC) + "".join(
        f"step {n}: loss 0.5\n" for n in range(200)) + traceback(
        ['  File "train.py", line 40, in <module>\n    loss.backward()\n'], CLOSED))
    assert "stopped-while-waiting" not in dict(read(tmp_path, text))
