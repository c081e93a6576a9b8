"""One ssh connection per host for a whole job (OpenSSH ``ControlMaster``), closed at its end.

A job over ssh talks to every host several times: the preflight probe, node 0's route lookup, then
the node's own session for the whole run. Each plain ``ssh`` pays a TCP connection, a key exchange
and a login (about 0.3 s of CPU and round trips each; at 32 hosts that is seconds on the
controller, at hundreds it dominates the start). Inside :func:`shared_connections` every ``ssh``
ddpkit runs names a private ``ControlPath``: the first one to a host (the preflight, at most
``parallel`` at once) becomes that host's master, the later ones are multiplexed over it. At the end
every master is told to exit (``ssh -O exit``) and the directory removed; a controller that dies
instead leaves masters that exit by themselves ``ControlPersist`` seconds after their last session.
A user who wants none of it passes ``--ssh-option ControlMaster=no`` (the user's options win).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import SshSettings, ssh_argv

EXIT_TIMEOUT_S = 10.0


@contextlib.contextmanager
def shared_connections(hosts: Sequence[Host], local: Sequence[bool],
                       settings: SshSettings) -> Iterator[SshSettings]:
    """``settings`` with a private control directory while the block runs (unchanged when no host
    is remote); every master connection opened meanwhile is closed afterwards."""
    remote = [host for host, here in zip(hosts, local, strict=True) if not here]
    if not remote or settings.control_dir:
        yield settings
        return
    directory = tempfile.mkdtemp(prefix="ddpkit-ssh-")  # 0700; %C keeps the socket path short
    shared = dataclasses.replace(settings, control_dir=directory)
    try:
        yield shared
    finally:
        if os.listdir(directory):  # a master was opened (none when every connection failed)
            close_masters(remote, shared)
        shutil.rmtree(directory, ignore_errors=True)


def close_masters(hosts: Sequence[Host], settings: SshSettings) -> None:
    """``ssh -O exit`` for each host, ``settings.parallel`` at once (a host with no master answers
    at once; nothing is raised)."""

    def close(host: Host) -> None:
        argv = ssh_argv(host, "", settings)
        argv = [*argv[:-3], "-O", "exit", "--", host.name]  # ends "-- HOST COMMAND": no command
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=EXIT_TIMEOUT_S, check=False)

    with ThreadPoolExecutor(max_workers=min(settings.parallel, max(1, len(hosts)))) as pool:
        list(pool.map(close, hosts))
