"""The whole job from this machine, for any whole-job command: over ssh (``--hosts``/``--hostfile``)
or with a join token (``--nnodes N`` without ``--master-addr``), as the request's mode says."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ddpkit.cli.job import hosts_mode, join_mode
from ddpkit.cli.job.job_command import HOSTS, JobCommand, JobRequest, Options, ResultRenderer
from ddpkit.cli.output.console import Console
from ddpkit.launch.config import LaunchConfig


def run_whole_job(request: JobRequest, console: Console, job: JobCommand[Options], *,
                  own_config: Callable[[str], tuple[LaunchConfig, Options]], tail: Sequence[str],
                  hosts_tail: Sequence[str] | None = None,
                  render_result: ResultRenderer | None = None) -> int:
    """``tail``: what every node's command ends with; ``hosts_tail``: the same over ssh when it
    differs (a flag each node may choose for itself in token mode); ``own_config``: node 0's
    configuration, given the master address token mode chose."""
    if request.mode() == HOSTS:
        return hosts_mode.run(request, console, command=job.name,
                              tail=list(tail if hosts_tail is None else hosts_tail),
                              render_result=render_result)
    return join_mode.run_master(request, console, job, own_config=own_config, tail=list(tail),
                                render_result=render_result)
