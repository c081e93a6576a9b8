"""Sim-cluster fixtures for integration tests (root only).

``sim_cluster(nodes=2, rate=None, ifnames=None)`` brings up a cluster with a name and subnet of its
own (``dks<NN>``, ``10.77.<NN>.0/24``, reserved so parallel test runs never share one) and, after the
test, always tears it down and asserts that no namespace, link, hosts dir, runtime file or process
of it remains. ``sim_reservation()`` gives a reserved (name, subnet) without bringing anything up
(for tests that drive ``ddpkit sim`` themselves); it is cleaned and checked the same way.

    @pytest.mark.root
    @pytest.mark.slow
    def test_something(sim_cluster):
        cluster = sim_cluster(nodes=2)
        subprocess.run(node_argv(cluster, 0, ["hostname"]), ...)

The leftover check is deliberately independent of ``ddpkit.sim`` (it reads ``ip`` output, /etc,
/run and /proc itself), so a bug in ``down`` cannot hide its own leftovers.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import pytest

from ddpkit.sim import SimCluster, SimSpec, down, up

RESERVATION_DIR = "/run/ddpkit-sim-test-reservations"
NAME_PREFIX = "dks"


@dataclass
class SimReservation:
    number: int
    name: str
    subnet: str
    path: str
    inodes: set[int] = field(default_factory=set)  # namespaces seen, to look for surviving processes


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_use(name: str) -> bool:
    return bool(
        glob.glob(f"/run/netns/{name}-*")
        or os.path.exists(f"/run/ddpkit-sim/{name}")
        or os.path.exists(f"/sys/class/net/{name}-br")
    )


def reserve_sim_name() -> SimReservation:
    """Atomically claim a free ``dks<NN>`` (mkdir is the lock; a dead owner's claim is reclaimed)."""
    os.makedirs(RESERVATION_DIR, exist_ok=True)
    numbers = list(range(100))
    random.shuffle(numbers)
    for number in numbers:
        name = f"{NAME_PREFIX}{number:02d}"
        path = f"{RESERVATION_DIR}/{name}"
        try:
            os.mkdir(path)
        except FileExistsError:
            with contextlib.suppress(OSError, ValueError):
                with open(f"{path}/pid") as handle:
                    owner = int(handle.read().strip())
                if not _pid_alive(owner) and not _in_use(name):
                    shutil.rmtree(path, ignore_errors=True)  # claim it on a later call
            continue
        with open(f"{path}/pid", "w") as handle:
            handle.write(f"{os.getpid()}\n")
        if _in_use(name):  # someone outside the fixture uses this name: leave it alone
            shutil.rmtree(path, ignore_errors=True)
            continue
        return SimReservation(number, name, f"10.77.{number}.0/24", path)
    raise RuntimeError("no free dks<NN> sim cluster name: too many parallel test runs?")


def _namespace_inodes(name: str) -> set[int]:
    inodes = set()
    for path in glob.glob(f"/run/netns/{name}-*") + glob.glob(f"/run/ddpkit-sim/{name}/uts-n*"):
        with contextlib.suppress(OSError):
            inodes.add(os.stat(path).st_ino)
    return inodes


def find_sim_leftovers(name: str, inodes: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """Everything of cluster ``name`` still on this machine, found without ddpkit.sim."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    found += [f"namespace {line.split()[0]}" for line in netns.stdout.splitlines()
              if line.split() and line.split()[0].startswith(f"{name}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=30)
    pattern = re.compile(rf"^\d+: ({re.escape(name)}(?:-br|h\d+[ab]))[@:]")
    found += [f"link {m.group(1)}" for line in links.stdout.splitlines()
              if (m := pattern.match(line))]
    found += sorted(glob.glob(f"/etc/netns/{name}-*"))
    if os.path.exists(f"/run/ddpkit-sim/{name}"):
        found.append(f"/run/ddpkit-sim/{name}")
    with open("/proc/self/mountinfo") as handle:
        mounts = handle.read()
    found += [f"mount {m}" for m in re.findall(rf" (/run/ddpkit-sim/{re.escape(name)}/\S+) ", mounts)]
    if inodes:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            for kind in ("net", "uts"):
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}/ns/{kind}").st_ino in inodes:
                        found.append(f"process {entry} ({kind} namespace)")
                        break
    return found


@pytest.fixture
def sim_reservation() -> Iterator[Callable[[], SimReservation]]:
    """Factory: a reserved (name, subnet); torn down and checked for leftovers after the test."""
    made: list[SimReservation] = []

    def reserve() -> SimReservation:
        reservation = reserve_sim_name()
        made.append(reservation)
        return reservation

    yield reserve
    problems: list[str] = []
    for reservation in made:
        reservation.inodes |= _namespace_inodes(reservation.name)
        try:
            down(reservation.name)
        except Exception as exc:  # noqa: BLE001 - report it with the leftovers below
            problems.append(f"down({reservation.name}) failed: {exc}")
        problems += [f"{reservation.name}: {item}"
                     for item in find_sim_leftovers(reservation.name, reservation.inodes)]
        shutil.rmtree(reservation.path, ignore_errors=True)
    assert not problems, "sim cluster left behind: " + "; ".join(problems)


@pytest.fixture
def sim_cluster(
    sim_reservation: Callable[[], SimReservation],
) -> Callable[..., SimCluster]:
    """Factory: ``sim_cluster(nodes=2, rate=None, ifnames=None)`` -> an up ``SimCluster``."""

    def bring_up(
        nodes: int = 2, rate: str | None = None, ifnames: Mapping[int, str] | None = None
    ) -> SimCluster:
        reservation = sim_reservation()
        spec = SimSpec(nodes=nodes, name=reservation.name, subnet=reservation.subnet, rate=rate,
                       ifnames=dict(ifnames or {}))
        cluster = up(spec)
        reservation.inodes |= _namespace_inodes(reservation.name)
        return cluster

    return bring_up


@pytest.fixture
def sim_leftovers() -> Callable[..., list[str]]:
    """``sim_leftovers(name, inodes=frozenset())``: what of a sim cluster is still there."""
    return find_sim_leftovers
