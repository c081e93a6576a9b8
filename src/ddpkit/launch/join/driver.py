"""Token mode on the master (``--nnodes N`` without ``--master-addr``): the whole job from here.

Starts the job store (:mod:`.join_store`), hands out the ``ddpkit join`` token, waits for every
other node to join (:class:`~ddpkit.launch.join.sides.MasterSide`), then runs node 0's own share while
watching every worker; one failure anywhere stops all. The front end builds a
:class:`JoinMasterJob`, supplies node 0's share as a callable (:data:`OwnPart`: it renders that
node's own command) and gets a :class:`~ddpkit.launch.outcomes.JobResult` back, having been told
what happens meanwhile through :class:`JoinEvents`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ddpkit import __version__
from ddpkit.errors import ConfigError, DdpkitError, EnvironmentProblem
from ddpkit.i18n import _, _n
from ddpkit.launch.envpass import PassedEnv
from ddpkit.launch.events import Progress
from ddpkit.launch.job import JobSpec
from ddpkit.launch.join.sides import JoinedNode, JoinJob, MasterSide
from ddpkit.launch.join.tokens import JoinToken
from ddpkit.launch.outcomes import OK, JobResult, NodeOutcome, outcome_from_error
from ddpkit.net.ports import DEFAULT_JOIN_PORT


class JoinEvents(Progress, Protocol):
    """Token mode on the master (``join_driver.run``). Node 0's own share reports through the
    front end's own events (the driver only calls it)."""

    def warning(self, message: str) -> None:
        """Something the user should know that does not stop the job."""

    def token_ready(self, token: JoinToken, others: int, token_file: Path | None = None) -> None:
        """The job store runs: the ``others`` other machines each run ``ddpkit join TOKEN``;
        with ``token_file`` (--token-file, written already) the token, secret included, is
        there, and what is shown must not hold the secret (it lands in logs)."""

    def joined(self, node: JoinedNode, count: int, expected: int) -> None:
        """A node joined; ``count`` of the ``expected`` workers have now."""


STOP_WAIT_S = 20.0  # for the workers to report after a stop order (their own cleanup takes <= 10 s)
SUCCESS_WAIT_S = 60.0  # for the workers to report after node 0 finished well
INTERRUPTED = _("interrupted on the master")

OwnPart = Callable[[Callable[[], "str | None"]], "tuple[int, NodeOutcome]"]
"""Node 0's own share of the job, given the job's ``should_stop`` hook (a reason once any worker
failed or was lost): returns (exit code, outcome) like a command's share, or raises the
DdpkitError the share raises (the job is then stopped, and the error is the result's
``own_error``)."""

InterruptGuard = Callable[[Callable[[], None]], AbstractContextManager[None]]
"""Wraps the wait and node 0's share: an interrupt should first call the function given (it
tells every node to stop), then interrupt this one. The CLI's installs signal handlers."""


@dataclass(frozen=True)
class StoreAddress:
    """Where the other machines reach this one: the job store's and the master's address."""

    address: str
    ifname: str
    reason: str  # why this interface

    def to_dict(self) -> dict[str, str]:
        return {"address": self.address, "interface": self.ifname, "reason": self.reason}


@dataclass(frozen=True)
class JoinMasterJob:
    """One job in token mode, as the master's flags give it."""

    job: JobSpec  # the whole job (its --ifname stays here: each node picks its own interface)
    passed: PassedEnv  # the environment every node gets (and the --env values)
    cwd: str  # every node runs in this working directory
    where: StoreAddress  # advertised_address()
    join_port: int = DEFAULT_JOIN_PORT
    join_timeout: float = 600.0  # for every node to join
    token_file: Path | None = None  # the token is also written there (mode 0600)
    progress_key: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    # ^ seals the hang watch's progress counters on every node (travels inside the sealed job)


def advertised_address(ifname: str | None) -> StoreAddress:
    """The address the other machines reach this one at: ``ifname``'s, or the recommended
    interface's."""
    from ddpkit.net.facts import tun_device_exists
    from ddpkit.net.interfaces import discover
    from ddpkit.net.isolation import check_reachable
    from ddpkit.net.select import best_address, find_interface, recommend

    nics = discover()
    if ifname:
        nic = find_interface(ifname, nics)
        address = best_address(nic)
        if address is None:
            raise ConfigError("interface-has-no-address", _("interface {name} has no IP address",
                                                            name=ifname),
                              _("give it one, or pick another with --ifname (see `ddpkit nics`)"))
        return StoreAddress(address.address, nic.name, _("--ifname {name}", name=nic.name))
    check_reachable(nics, tun_device_exists())  # no-private-network before a token nobody can use
    choice = recommend(nics)
    return StoreAddress(choice.address, choice.nic.name, choice.reason)


def join_job(job: JoinMasterJob) -> JoinJob:
    """Pure: the job as the store holds it for the joining nodes."""
    spec = dataclasses.replace(job.job, ifname=None, overrides=tuple(job.passed.overrides))
    return JoinJob(job=spec, master_addr=job.where.address, env=job.passed.values,
                   join_timeout=job.join_timeout, ddpkit_version=__version__, cwd=job.cwd,
                   progress_key=job.progress_key)


def own_env(job: JoinMasterJob, env: Mapping[str, str]) -> dict[str, str]:
    """Pure: node 0's environment for its own share, with what every worker gets on top of its
    own (the allow-listed variables and ``.ddpkit_env``): the same job on every node."""
    return {**env, **job.passed.values}


def shown_job(spec: JoinJob) -> dict[str, Any]:
    """The join job as ddpkit may print it (values whose names look secret masked): the job
    itself, what travels with it, and the command node 1 will run."""
    from ddpkit.launch.envpass import shown, shown_env
    from ddpkit.launch.job import node_argv

    job = spec.job.to_dict()
    job["overrides"] = [[key, shown(key, value)] for key, value in spec.job.overrides]
    node1 = node_argv(spec.job, 1, spec.master_addr, env_in_argv=False)
    return {"job": job, "env": shown_env(spec.env), "join_timeout": spec.join_timeout,
            "ddpkit_version": spec.ddpkit_version, "node1_argv": ["ddpkit", *node1]}


def write_token_file(path: Path, token: JoinToken) -> None:
    """The token, readable by its owner only, written whole or not at all: through the atomic
    writer (an exclusively created 0600 temporary with an unpredictable name, then a rename),
    which follows no other user's symbolic link on the way and replaces a link at ``path``
    itself rather than writing where it points (root's master in a shared directory)."""
    from ddpkit.atomic_file import replace_file

    try:
        replace_file(path, f"{token}\n".encode(), mode=0o600)
    except OSError as exc:
        raise EnvironmentProblem("token-file-failed",
                                 _("cannot write the token file {path}: {error}",
                                   path=str(path), error=str(exc.strerror or exc)),
                                 _("pass a --token-file that is a new or regular file in a "
                                   "directory you can write, reached without another user's "
                                   "symbolic link (or drop it and copy the printed line)"),
                                 details={"path": str(path)}) from None


def _unguarded(announce: Callable[[], None]) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def run(job: JoinMasterJob, events: JoinEvents, own_part: OwnPart, *,
        interrupt_guard: InterruptGuard = _unguarded) -> JobResult:
    """Start the job store, wait for every node, run node 0's share, collect every outcome.

    Raises before node 0's share starts (a port taken, the store, the token file, a node that
    never joined: the nodes that did are told to stop first); an interrupt stops every node, then
    is raised again. A node that fails is not an exception: it is in the result.
    """
    from ddpkit.launch.hang.job_stacks import job_stacks_of
    from ddpkit.launch.join.store import host_store
    from ddpkit.launch.join.tokens import new_token
    from ddpkit.launch.node.preflight import check_port_free

    where, spec = job.where, join_job(job)
    token = new_token(where.address, job.join_port)
    check_port_free(job.join_port, flag="--join-port", what=_("job-store port (token mode)"),
                    fix=_("(the token tells the other nodes)"))
    check_port_free(job.job.master_port)

    def on_reject(name: str, why: str) -> None:
        events.warning(_("ignored a value under {name!r} in the job store that this job did not "
                         "write ({why}); someone else is writing to {endpoint} (counted; see "
                         "docs/multi-node.md, threat model)", name=name, why=why,
                         endpoint=token.endpoint))

    master = MasterSide(host_store(token, on_reject=on_reject), spec)
    master.publish()
    events.waiting(_("job store on {address}:{port} ({ifname}: {reason})", address=where.address,
                     port=job.join_port, ifname=where.ifname, reason=where.reason))
    others = spec.nnodes - 1
    if job.token_file is not None:  # written first: the line shown then names the file, no secret
        write_token_file(job.token_file, token)
    events.token_ready(token, others, job.token_file)
    events.waiting(_n("waiting for {count} node to join (up to {seconds:g} s)",
                      "waiting for {count} nodes to join (up to {seconds:g} s)", others,
                      seconds=job.join_timeout))
    with interrupt_guard(lambda: master.stop(INTERRUPTED)):
        _wait_for_nodes(master, events, job.join_timeout)
        master.release()
        code, own, own_error = _own_part(master, own_part)
        if own.state != OK:
            master.stop(own.ended())
        stopped = own.state != OK or master.should_stop() is not None
        outcomes = (own, *master.collect(wait=STOP_WAIT_S if stopped else SUCCESS_WAIT_S))
    _warn_about_strangers(master, events)
    lines, reports = job_stacks_of(o.stack_reports for o in outcomes)
    return JobResult(mode="join", master=where.to_dict(), outcomes=outcomes,
                     stack_lines=tuple(lines), stack_reports=tuple(reports), own_error=own_error,
                     own_code=code)


WAIT_LINE_EVERY_S = 10.0


def _wait_for_nodes(master: MasterSide, events: JoinEvents, timeout: float) -> None:
    """Every worker joins, or those that did are told to stop and the reason is raised."""
    expected = master.spec.nnodes - 1

    def on_join(node: JoinedNode) -> None:
        events.joined(node, len(master.joined), expected)

    next_line = [WAIT_LINE_EVERY_S]

    def on_wait(waited: float, missing: list[int]) -> None:
        if waited >= next_line[0]:  # a status line every ~10 s: a wait is not a hang
            next_line[0] = waited + WAIT_LINE_EVERY_S
            events.waiting(_n("still waiting for {count} node to join (node rank {ranks}): "
                              "{waited:.0f} s of --join-timeout {timeout:g} s",
                              "still waiting for {count} nodes to join (node rank {ranks}): "
                              "{waited:.0f} s of --join-timeout {timeout:g} s", len(missing),
                              ranks=", ".join(map(str, missing)), waited=waited,
                              timeout=timeout))

    try:
        master.wait_for_nodes(on_join, timeout=timeout, on_wait=on_wait)
    except (DdpkitError, KeyboardInterrupt) as exc:
        master.stop(exc.message if isinstance(exc, DdpkitError) else INTERRUPTED)
        master.collect(wait=STOP_WAIT_S if master.joined else 0.0)
        raise


def _own_part(master: MasterSide, own_part: OwnPart
              ) -> tuple[int, NodeOutcome, DdpkitError | None]:
    """Node 0's share: (exit code, outcome, the error it raised). An interrupt stops every node."""
    own_error: DdpkitError | None = None
    try:
        code, own = own_part(master.should_stop)
    except DdpkitError as exc:
        own_error, code = exc, int(exc.exit_code)
        own = outcome_from_error(exc.to_dict(), node_rank=0, host=socket.gethostname())
    except KeyboardInterrupt:
        master.stop(INTERRUPTED)
        master.collect(wait=STOP_WAIT_S)
        raise
    return code, dataclasses.replace(own, observed_at=time.monotonic()), own_error


def _warn_about_strangers(master: MasterSide, events: JoinEvents) -> None:
    """The store held values or keys this job never wrote: someone else writes to it."""
    report = master.store_report()
    rejected = sum(report["rejected"].values())
    left = report.get("foreign_keys_left", 0)
    if rejected or report["removed_keys"] or left:
        names = ", ".join(sorted(report["rejected"])) or "-"
        if left:
            events.warning(_("the job store saw {rejected} value(s) that did not open with this "
                             "job's key ({names}) and {found} key(s) this job never wrote; all "
                             "were ignored, {removed} of the keys removed and {left} still there "
                             "when the job ended (someone else is writing to the job store)",
                             rejected=rejected, names=names, found=report["removed_keys"] + left,
                             removed=report["removed_keys"], left=left))
            return
        events.warning(_("the job store saw {rejected} value(s) that did not open with this "
                         "job's key ({names}) and {removed} key(s) this job never wrote; all "
                         "were ignored and removed (someone else is writing to the job store)",
                         rejected=rejected, names=names, removed=report["removed_keys"]))
