"""A real Slurm (Debian's slurm-wlm, 22.05 here) on a 2-node sim cluster, running ddpkit through srun.

slurmctld and munged run on the host; one slurmd runs in each node's namespace (``ip netns exec``,
so every task it starts is inside that node's network stack and sees its /etc/hosts). Then::

    srun -N2 --ntasks-per-node=1 <this python> -m ddpkit test --quick
    srun -N2 --ntasks-per-node=1 <this python> -m ddpkit launch train.py   (Gloo, one all_reduce)

run on both nodes with no cluster flag: ddpkit reads the node count, node rank, master and
processes per node from the real Slurm environment (ddpkit.launch.schedulers). With ``--record
FILE`` a first step also dumps the SLURM_* variables node 1's task saw, as a JSON fixture.

Nothing does DNS: SlurmctldHost and every NodeAddr are IP literals, munged's origin is 127.0.0.1,
and the Slurm node names (``<name>0``, ``<name>1``) are written into the sim's own per-node hosts
files (/etc/netns/<ns>/hosts, which ``ddpkit.sim.down`` removes), never into the machine's
/etc/hosts. Config, key, spool, state and logs live in one temporary directory. Everything is torn
down in ``finally`` (also on Ctrl-C or SIGTERM): slurmd, slurmctld, munged, the sim, the directory.

    sudo python benchmarks/slurm_sim.py [--name slm] [--subnet 10.213.77.0/24] [--record FILE]
                                        [--keep DIR] [--timeout SECONDS]

Exits 2 with the missing tool named when Slurm or munge is not installed (apt-get install
slurm-wlm munge), 2 when not root, 1 when the job fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ddpkit.cli.node.launch_options import sigterm_as_interrupt
from ddpkit.errors import DdpkitError
from ddpkit.sim import SimCluster, SimSpec, down, node_argv, up
from ddpkit.sim.topology import hosts_dir

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS = {"slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client",
         "scontrol": "slurm-client", "sinfo": "slurm-client", "munged": "munge"}
# The variables a task's environment is recorded with: Slurm's, and those a launcher may export.
RECORD_PREFIXES = ("SLURM_", "SLURMD_")
RECORD_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
DUMP_ENV = (
    "import json, os, sys\n"
    f"keep = {{k: v for k, v in os.environ.items() if k.startswith({RECORD_PREFIXES!r}) "
    f"or k in {RECORD_NAMES!r}}}\n"
    "path = sys.argv[1] + '/env-node' + os.environ['SLURM_NODEID'] + '.json'\n"
    "open(path, 'w').write(json.dumps(keep, indent=1, sort_keys=True))\n"
)


def missing_tools() -> list[str]:
    """``tool (package)`` for each Slurm/munge program not on the system path."""
    return [f"{tool} (Debian package {package})" for tool, package in TOOLS.items()
            if shutil.which(tool, path=SYSTEM_PATH) is None]


def tool(name: str) -> str:
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise RuntimeError(f"{name} is not installed")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def slurm_conf(work: Path, cluster: SimCluster, name: str, ctld_port: int, munge_socket: Path) -> str:
    host = cluster.host_address
    lines = [
        f"ClusterName={name}",
        # slurmctld checks that it runs on SlurmctldHost's name: this machine's own hostname,
        # with its address given as a literal so nothing resolves it.
        f"SlurmctldHost={socket.gethostname()}({host})",
        f"SlurmctldPort={ctld_port}",
        "SlurmdPort=6818",  # one slurmd per node namespace: no clash
        "SlurmUser=root",
        "SlurmdUser=root",
        f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={munge_socket}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",  # trust the node lines below, not this box's CPUs
        "ReturnToService=2",
        "SlurmctldTimeout=30\nSlurmdTimeout=60\nInactiveLimit=0\nKillWait=5\nMinJobAge=5",
        f"StateSaveLocation={work}/state",
        f"SlurmdSpoolDir={work}/spool/%n",
        f"SlurmctldPidFile={work}/slurmctld.pid",
        f"SlurmdPidFile={work}/slurmd-%n.pid",
        f"SlurmctldLogFile={work}/log/slurmctld.log",
        f"SlurmdLogFile={work}/log/slurmd-%n.log",
        "SlurmctldDebug=info\nSlurmdDebug=info",
    ]
    for node in cluster.nodes:
        lines.append(f"NodeName={name}{node.index} NodeAddr={node.private_address} "
                     f"NodeHostname={node.private_address} CPUs=2 RealMemory=256 State=UNKNOWN")
    names = ",".join(f"{name}{node.index}" for node in cluster.nodes)
    lines.append(f"PartitionName=sim Nodes={names} Default=YES MaxTime=10 State=UP")
    return "\n".join(lines) + "\n"


class SlurmOnSim:
    """``with SlurmOnSim(name, subnet) as slurm: slurm.srun([...])``; everything goes on exit."""

    def __init__(self, name: str, subnet: str, *, nodes: int = 2, keep: Path | None = None,
                 log: object = None) -> None:
        self.name, self.subnet, self.nodes, self.keep = name, subnet, nodes, keep
        self.work = Path(tempfile.mkdtemp(prefix=f"ddpkit-slurm-{name}-"))
        self.conf = self.work / "slurm.conf"
        self.munge_socket = self.work / "munge" / "munge.socket"
        self.cluster: SimCluster | None = None
        self.daemons: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.seen: set[tuple[int, int]] = set()  # pids seen inside the node namespaces (slurmstepd, tasks)
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))

    # -- bring up -------------------------------------------------------------------------------

    def __enter__(self) -> SlurmOnSim:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("SLURM_", "NCCL_", "GLOO_", "TORCH_", "PET_"))
               and key not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")}
        env.update(SLURM_CONF=str(self.conf), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        return env

    def _spawn(self, label: str, argv: Sequence[str]) -> None:
        out = open(self.work / "log" / f"{label}.out", "wb")  # noqa: SIM115 - closed with the dir
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        out.close()
        self.daemons.append((label, proc))

    def start(self) -> None:
        for sub in ("state", "spool", "log", "munge"):
            (self.work / sub).mkdir(mode=0o700)
        self.log(f"slurm-sim: sim cluster {self.name} on {self.subnet}")
        self.cluster = up(SimSpec(nodes=self.nodes, name=self.name, subnet=self.subnet))
        # The Slurm node names resolve inside every node, as a cluster's /etc/hosts would have
        # them; only the sim's own per-node hosts files get them.
        entries = "".join(f"{node.private_address} {self.name}{node.index}\n"
                          for node in self.cluster.nodes)
        for node in self.cluster.nodes:
            with open(Path(hosts_dir(node.namespace)) / "hosts", "a") as handle:
                handle.write(entries)
        key = self.work / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", [tool("munged"), "-F", "-f", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={self.work}/munge/munged.pid",
                               f"--seed-file={self.work}/munge/munged.seed",
                               f"--log-file={self.work}/log/munged.log", "--origin=127.0.0.1",
                               "--num-threads=2"])
        self._wait_for(lambda: self.munge_socket.exists(), "munged's socket", 20)
        self.conf.write_text(slurm_conf(self.work, self.cluster, self.name, free_port(),
                                        self.munge_socket))
        # No cgroups: proctrack/linuxproc and task/none need none, but slurmd 22.05 still loads a
        # cgroup plugin, and inside `ip netns exec` /sys is a fresh sysfs with no cgroup mount, so
        # autodetection fails; name the plugin (read next to slurm.conf).
        (self.work / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        for node in self.cluster.nodes:
            (self.work / "spool" / f"{self.name}{node.index}").mkdir(mode=0o700)
        self._spawn("slurmctld", [tool("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        for node in self.cluster.nodes:
            self._spawn(f"slurmd-{node.index}", node_argv(
                self.cluster, node.index,
                [tool("slurmd"), "-D", "-N", f"{self.name}{node.index}", "-f", str(self.conf)]))
        self._wait_for(self._nodes_idle, f"{self.nodes} slurmd nodes idle in sinfo", 60)
        self.log(f"slurm-sim: slurmctld on {self.cluster.host_address}, "
                 f"{self.nodes} slurmd up ({self._sinfo().strip()})")

    def version(self) -> str:
        # Only ever with SLURM_CONF set: without a config file Slurm's clients look the
        # controller up in DNS (SRV records).
        return subprocess.run([tool("srun"), "--version"], capture_output=True, text=True,
                              env=self.env(), timeout=20, check=False).stdout.strip()

    def _sinfo(self) -> str:
        done = subprocess.run([tool("sinfo"), "-h", "-N", "-o", "%N %T"], capture_output=True,
                              text=True, env=self.env(), timeout=20, check=False)
        return done.stdout.replace("\n", "; ")

    def _nodes_idle(self) -> bool:
        states = [line.split() for line in self._sinfo().split("; ") if line.strip()]
        return len(states) == self.nodes and all(s[1].startswith("idle") for s in states)

    def _wait_for(self, ready: object, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for label, proc in self.daemons:
                if proc.poll() is not None:
                    raise RuntimeError(f"{label} exited with {proc.returncode} while waiting for "
                                       f"{what}:\n{self.logs(label)}")
            if ready():  # type: ignore[operator]
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n{self.logs()}")

    def logs(self, only: str | None = None, tail: int = 25) -> str:
        parts = []
        for path in sorted((self.work / "log").glob("*")):
            if only and not path.name.startswith(only.split("-")[0]):
                continue
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    # -- run ------------------------------------------------------------------------------------

    def srun(self, argv: Sequence[str], *, timeout: float = 240, tasks_per_node: int = 1
             ) -> subprocess.CompletedProcess[str]:
        command = [tool("srun"), f"-N{self.nodes}", f"--ntasks-per-node={tasks_per_node}", "-l",
                   "--kill-on-bad-exit=1", *argv]
        self.log("slurm-sim: $ SLURM_CONF=" + str(self.conf) + " " + " ".join(command))
        # Run it while watching the nodes: a step's slurmstepd has exited (a zombie, whose
        # namespace can no longer be read) by the time stop() looks, and stop() waits for it.
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    text=True, env=self.env(), cwd=self.work)
            deadline = time.monotonic() + timeout
            try:
                while proc.poll() is None:
                    self.seen |= self.namespace_pids()
                    if time.monotonic() > deadline:
                        raise subprocess.TimeoutExpired(command, timeout)
                    time.sleep(0.2)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(command, proc.returncode, out.read(), err.read())

    def record_env(self) -> dict[str, dict[str, str]]:
        """The recorded variables of each node's task in one real srun step."""
        out = self.work / "env"
        out.mkdir()
        done = self.srun([sys.executable, "-c", DUMP_ENV, str(out)], timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"srun env dump failed ({done.returncode}): {done.stderr}")
        return {path.stem: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}

    # -- tear down ------------------------------------------------------------------------------

    def namespace_pids(self) -> set[tuple[int, int]]:
        """(pid, start time) of each process inside the node namespaces now (slurmd, slurmstepd,
        tasks); the start time tells a recycled pid from ours."""
        inodes = set()
        for path in Path("/run/netns").glob(f"{self.name}-n*"):
            with contextlib.suppress(OSError):
                inodes.add(path.stat().st_ino)
        found = set()
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, ValueError):
                if entry.isdigit() and os.stat(f"/proc/{entry}/ns/net").st_ino in inodes:
                    found.add((int(entry), _start_time(int(entry))))
        return found

    def stop(self) -> None:
        problems = []
        ours = self.seen | self.namespace_pids()
        for _label, proc in reversed(self.daemons):  # slurmd first, munged last
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            # Whatever it forked (slurmstepd, a task) in its own session goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            down(self.name)  # also kills anything left inside the node namespaces
        except Exception as exc:  # noqa: BLE001 - reported below, the rest still goes
            problems.append(f"sim down: {exc}")
        if self.keep is not None:
            with contextlib.suppress(OSError):
                shutil.copytree(self.work / "log", self.keep, dirs_exist_ok=True)
        shutil.rmtree(self.work, ignore_errors=True)
        # slurmstepd daemonizes, so when it is killed its zombie is reaped by this machine's init,
        # not by us: wait for that, so a check right after stop() finds nothing of ours.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_start_time(p) == t for p, t in ours):
            time.sleep(0.2)
        left = [f"{label} (pid {proc.pid})" for label, proc in self.daemons if proc.poll() is None]
        left += [f"pid {p} ({_comm(p)})" for p, t in sorted(ours) if _start_time(p) == t
                 and p not in {proc.pid for _, proc in self.daemons}]
        if left or problems:
            raise RuntimeError("slurm-sim teardown incomplete: " + "; ".join(left + problems))


def _start_time(pid: int) -> int:
    """Field 22 of /proc/PID/stat (a zombie keeps it), or -1 when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            name, state = handle.read().split(" (", 1)[1].rsplit(") ", 1)
    except (OSError, IndexError, ValueError):
        return "?"
    return name + (", a zombie" if state.startswith("Z") else "")


def ddpkit_test_argv(work_dir: str) -> list[str]:
    """The job: ddpkit test --quick on each node, its run dir per node, no cluster flag at all."""
    python = sys.executable
    return ["/bin/sh", "-c", f'exec "{python}" -m ddpkit test --quick --backend gloo '
            f'--run-dir "{work_dir}/run-node$SLURM_NODEID"']


# The tiny job `ddpkit launch` starts (os._exit: torch 2.13's Gloo can abort a process at
# interpreter exit, see benchmarks/launch_overhead.py).
TRAIN = (
    "import os, torch, torch.distributed as dist\n"
    "dist.init_process_group('gloo')\n"
    "t = torch.ones(4)\n"
    "dist.all_reduce(t)\n"
    "rank, world = dist.get_rank(), dist.get_world_size()\n"
    "print(f'rank {rank}/{world} all_reduce sum {t[0].item():.0f}', flush=True)\n"
    "dist.destroy_process_group()\n"
    "os._exit(0 if t[0].item() == world else 1)\n"
)


def ddpkit_launch_argv(work_dir: str) -> list[str]:
    """The other job: ``ddpkit launch train.py`` on each node, again with no cluster flag."""
    script = Path(work_dir) / "train.py"
    script.write_text(TRAIN)
    return ["/bin/sh", "-c", f'exec "{sys.executable}" -m ddpkit launch '
            f'--run-dir "{work_dir}/launch-node$SLURM_NODEID" "{script}"']


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="slm", help="sim cluster name (default slm)")
    parser.add_argument("--subnet", default="10.213.77.0/24")
    parser.add_argument("--record", type=Path, help="write node 1's SLURM_* variables here (JSON)")
    parser.add_argument("--keep", type=Path, help="copy the daemons' logs here before cleanup")
    parser.add_argument("--timeout", type=float, default=240, help="srun's limit (seconds)")
    args = parser.parse_args(argv)
    missing = missing_tools()
    if missing:
        print("slurm-sim: Slurm/munge not installed, missing: " + ", ".join(missing)
              + " (apt-get install slurm-wlm munge)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("slurm-sim: needs root (network namespaces, slurmd as root)", file=sys.stderr)
        return 2
    try:
        return run(args)
    except KeyboardInterrupt:
        print("slurm-sim: interrupted; everything it started is torn down", file=sys.stderr)
        return 130
    except (RuntimeError, subprocess.TimeoutExpired, DdpkitError) as exc:
        print(f"slurm-sim: failed: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    with sigterm_as_interrupt(), SlurmOnSim(args.name, args.subnet, keep=args.keep) as slurm:
        print(f"slurm-sim: {slurm.version()}", flush=True)
        if args.record is not None:
            envs = slurm.record_env()
            args.record.write_text(json.dumps(envs.get("env-node1", {}), indent=1,
                                              sort_keys=True) + "\n")
            print(f"slurm-sim: node 1's environment ({len(envs.get('env-node1', {}))} variables) "
                  f"-> {args.record}", flush=True)
        failed = 0
        for label, job in (("ddpkit test --quick", ddpkit_test_argv),
                           ("ddpkit launch train.py", ddpkit_launch_argv)):
            started = time.monotonic()
            done = slurm.srun(job(str(slurm.work)), timeout=args.timeout)
            elapsed = time.monotonic() - started
            print(done.stdout, end="", flush=True)
            print(done.stderr, end="", file=sys.stderr, flush=True)
            verdict = "passed" if done.returncode == 0 else f"FAILED (srun exit {done.returncode})"
            print(f"slurm-sim: srun -N2 --ntasks-per-node=1 {label} {verdict} in {elapsed:.1f} s",
                  flush=True)
            failed += done.returncode != 0
        if failed:
            print(slurm.logs(), file=sys.stderr)
        return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
