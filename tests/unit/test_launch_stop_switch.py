"""The stop switch interrupts a node that does not pick its reason up, unless the node has
settled (its work ends on its own): a master lost while a worker writes its last report must not
end that worker with a bare ``interrupted`` (issue 32)."""

from __future__ import annotations

import threading

from ddpkit.launch.watch import StopSwitch


def test_an_unacknowledged_reason_interrupts() -> None:
    fired = threading.Event()
    switch = StopSwitch(interrupt=fired.set, grace=0.05)
    switch.trigger("lost the job store")
    assert fired.wait(2.0)


def test_a_settled_node_is_never_interrupted() -> None:
    fired = threading.Event()
    switch = StopSwitch(interrupt=fired.set, grace=0.05)
    switch.settle()
    switch.trigger("lost the job store")
    assert not fired.wait(0.5)
    assert switch.reason == "lost the job store"  # still told
