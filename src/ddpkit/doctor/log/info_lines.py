"""The facts NCCL, nccl-tests, Gloo and a node's listing state at INFO level: the bootstrap's and
the sockets' interfaces, NCCL's settings, network and plugin, the versions, the communicators,
trees and links NCCL made, nccl-tests' device table. A patterns' family of the scan's table
(doctor/log/patterns.py), tried first there; none claims its line (a line may carry more)."""

from __future__ import annotations

from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.line_pattern import pattern as _p
from ddpkit.doctor.log.prefixes import LAUNCHER_TAGS, LINE_LABEL

INFO_PATTERNS: tuple[LinePattern, ...] = (
    _p(EventKind.NCCL_BOOTSTRAP, ("NCCL INFO Bootstrap",),
       r"Bootstrap ?: Using (?P<iface>[^\s:]+):(?P<addr>[^\s<]+)<(?P<port>\d+)>"),
    _p(EventKind.NCCL_SOCKET_IFACES, ("NCCL INFO NET/",),
       r"NET/Socket ?: Using (?P<ifaces>(?:\[\d+\][^\s<]+<\d+>\s*)+)"),
    _p(EventKind.NCCL_ENV, ("NCCL INFO NCCL_",),
       r"(?P<var>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>\S*)"),
    _p(EventKind.NCCL_NETWORK, ("NCCL INFO Using network",), r"Using network (?P<name>\S[^\n]*?)\s*$"),
    _p(EventKind.NCCL_NETWORK, ("NCCL INFO Using internal Network",),  # releases before 2.5
       r"Using internal Network (?P<name>\S+)"),
    _p(EventKind.NCCL_PLUGIN, ("NCCL INFO NET/",), r"NET/Plugin ?:? ?(?P<detail>\S[^\n]*)"),
    _p(EventKind.NCCL_PLUGIN, ("NCCL INFO Plugin Path",), r"(?P<detail>Plugin Path ?: ?\S+)"),
    # The torch build a node runs (torch bundles NCCL): collect_env's line, a pip listing.
    _p(EventKind.TORCH_VERSION, ("PyTorch version: ", "torch=="),
       r"(?:PyTorch version: |(?:^|[\s\]])torch==)(?P<version>\d+\.\d+[\w.+-]*)"),
    # (NCCL 2.4 to 2.17 print "Failed to open libibverbs.so[.1]" as a WARN: every machine
    # without InfiniBand's libraries does, and NCCL goes on with sockets)
    _p(EventKind.BENIGN, ("NCCL INFO NET/", "NCCL INFO Failed to open libibverbs",
                  "NCCL WARN Failed to open libibverbs", "NCCL WARN NET/IB : No device found"),
       r"(?P<what>No plugin found|Could not find: libnccl-net|Failed to open libibverbs"
       r"|NET/IB ?: No device found)"),
    # The out-of-band (bootstrap) interface NET/IB names, when no "Bootstrap : Using" was posted.
    # A link NCCL made as within one machine (P2P, shared memory): each end's rank and GPU.
    _p(EventKind.NCCL_LOCAL_LINK, ("Ring ",),
       r"Ring \d+ : (?P<src>\d+)\[(?P<srcdev>[0-9a-f]+)\] -> (?P<dst>\d+)\[(?P<dstdev>[0-9a-f]+)\]"
       r" via (?:P2P|SHM|direct)"),
    _p(EventKind.NCCL_OOB, ("NCCL INFO NET/",),
       r"NET/IB ?: Using [^\n]*?; OOB (?P<iface>[^\s:]+):(?P<addr>[^\s<]+)<(?P<port>\d+)>"),
    # NCCL's return-code trail through bootstrap.cc: the bootstrap failed (posted without a WARN).
    _p(EventKind.BOOTSTRAP_RETCODE, ("NCCL INFO bootstrap.cc:",),
       r"NCCL INFO bootstrap\.cc:(?P<line>\d+) -> (?P<code>[1-9]\d*)"),
    # A rank's place in NCCL's trees (``Trees [0] -1/-1/-1->1->0 ...``, 2.4 ``Trees [0] 1->0->-1``):
    # NCCL lays them out inside ncclCommInitRank, so init had started. (The ring layout says the
    # same, but its ``Channel`` word also starts every connection line, far too many to read.)
    _p(EventKind.NCCL_TREES, ("NCCL INFO Trees",), r"\bTrees \[\d+\] -?\d+(?:/-?\d+)*->"),
    # nccl-tests' table of devices (the lines after ``# Using devices``): each rank's host.
    _p(EventKind.NCCLTESTS_RANK, (),
       r"Rank +(?P<rank>\d+) +(?:Group +\d+ +)?Pid +\d+ on +(?P<host>[\w.-]+) +device +\d+"),
    _p(EventKind.NCCL_VERSION, ("NCCL version",), r"NCCL version (?P<version>\d+\.\d+\.\d+)"
       r"(?:\+(?P<cuda>cuda[\d.]+))?"),
    _p(EventKind.NCCL_COMM, ("NCCL INFO ncclCommInit", "NCCL INFO comm 0x"),
       r"comm 0x(?P<comm>[0-9a-fA-F]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)",
       r"nNodes (?P<nnodes>\d+) localRanks (?P<local_ranks>\d+)", r"commId 0x(?P<commid>\w+)",
       r"Init (?P<phase>START|COMPLETE)", skip_if=("Destroy COMPLETE",)),
    # Gloo could not resolve the host's name and bound to loopback (a trap in a multi-node job).
    _p(EventKind.GLOO_LOOPBACK_FALLBACK, ("Unable to resolve hostname",),
       r"(?P<detail>Unable to resolve hostname to a \(local\) address)"),
    _p(EventKind.GLOO_MESH_FAILED, ("onnect",), r"(?P<detail>Gloo connectFullMesh failed)"),
    # One interface of a NET/Socket list posted one per line (read after a bare "Using"), after
    # the launcher's label and tags where each line has them
    _p(EventKind.NCCL_SOCKET_ITEM, (),
       rf"^(?:{LINE_LABEL})?{LAUNCHER_TAGS}\s*\[\d+\](?P<iface>[^\s:\[\]]+):(?P<addr>[^\s<]+)<\d+>\s*$"),
)
