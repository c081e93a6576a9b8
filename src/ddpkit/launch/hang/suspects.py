"""Pure: the causes of a hang that a rank's process state or an unreadable stack already tell.

A rank stopped by SIGSTOP (or held by a debugger: state ``T``/``t``) uses no CPU and prints
nothing, exactly like a rank waiting in a collective, and its peers wait for it: it is the likely
cause whatever the stacks look like. A rank py-spy could not read while the ranks that could be
read all wait is the next likeliest (nothing says it is waiting too). These lines come before the
stack summary's own (:func:`ddpkit.launch.hang.stacks.summary_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddpkit.i18n import _
from ddpkit.launch.hang.stacks import RankStack

STOPPED_STATES = ("stopped", "tracing-stop")  # psutil's names for T and t


def cause_lines(stacks: Sequence[RankStack], states: Mapping[int, str]) -> list[str]:
    """``states``: pid -> psutil status, as read when the hang was seen."""
    stopped = [s for s in stacks if states.get(s.pid) in STOPPED_STATES]
    if stopped:
        return [_("likely cause: {who} (pid {pid}) is stopped (state {state}: SIGSTOP or a "
                  "debugger): its peers wait for it; `kill -CONT {pid}` resumes it", who=s.who(),
                  pid=s.pid, state="T" if states[s.pid] == "stopped" else "t") for s in stopped]
    unread = [s for s in stacks if not s.ok and s.error_id != "rank-exited"]
    if unread and len(unread) < len(stacks):
        return [_("likely cause: {who} (pid {pid}): py-spy could not read it [{id}], while "
                  "every rank that could be read is idle", who=s.who(), pid=s.pid, id=s.error_id)
                for s in unread]
    return []
