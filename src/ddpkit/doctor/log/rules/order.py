"""The rule table of ``ddpkit doctor --log``: the one place its order is stated.

:data:`RULES` lists the rule families' entries in the order they are asked, each stating the ids
it gives and, as data, when it is asked: ``when`` (all hold), ``unless`` (none holds), ``reads``
(handed to it). "Found" conditions read only what the entries above found, so the order below is
the whole of the dependencies (tests/unit/test_doctor_table.py checks that each names an entry
or an id above it). The causes (:data:`ddpkit.doctor.log.causes.registry.CAUSES`, one file
each) need no place in it: they are asked after every entry, and their ``supersedes`` and
``yields_to`` say what they replace; :func:`ddpkit.doctor.log.causes.registry.rank` then orders
everything found. The table's order also breaks ties in that ranking (equal severity, priority
and evidence position keep the order found).
"""

from __future__ import annotations

from ddpkit.doctor.log.rules import decide
from ddpkit.doctor.log.rules.entry import (
    CATALOGUED,
    AnyFound,
    Either,
    ErrorBefore,
    ErrorFound,
    Fact,
    Fired,
    IdFound,
    Rule,
)

# --- the facts the entries' conditions name ---------------------------------------------------
INIT_HUNG = Fact("NCCL init started and no communicator completed", lambda r: r.init_hung())
INIT_STARTED = Fact("NCCL init started", lambda r: r.init_started())
COMM_COMPLETED = Fact("a communicator completed its init", lambda r: bool(r.comm_completed))
FAILING = Fact("a failed rank, an NCCL error, a lost or refused connection, a timeout",
               lambda r: r.failing())
OOM_LINES = Fact("a line says memory ran out", lambda r: "out-of-memory" in r.simple)
ONE_NODE_GPUS = Fact("a communicator spans one node with several GPUs",
                     lambda r: r.single_node_multi_gpu)
# the job failed or its init hung: a difference between machines is then its likely cause
TROUBLE = Either((INIT_HUNG, ErrorFound(), FAILING))

SINGLE_NODE = Fact("NCCL reported a single node", lambda r: r.single_node)
CONNECT_FAILED = Fact("a connection failed", lambda r: bool(r.net.conns))
BOOTSTRAP_FAILED = Fact("NCCL's bootstrap failed", lambda r: bool(r.net.bootstrap_failed))
NCCL_WARNED = Fact("NCCL printed a WARN line", lambda r: r.net.nccl_warned)
_WRONG = frozenset({"wrong-interface"})
# one wrong address: the first of these that fires says it
_TRAPS = (Fired("wrong-or-container"), Fired("gloo-loopback"))
_SIMPLE_IDS = ("shm", "duplicate-gpu", "p2p", "out-of-memory", "ib-error", "port-in-use",
               "rendezvous-timeout", "rendezvous-config")

RULES: tuple[Rule, ...] = (
    # --- the network's wiring (rules/network.py, traps.py, gloo_mesh.py) ---
    Rule("interface-not-found", frozenset({"interface-not-found"}),
         lambda r, _read: r.net.interface_not_found()),
    Rule("wrong-or-container", frozenset({"wrong-interface", "container-network"}),
         lambda r, _read: r.net.wrong_or_container(r.multi_node, r.init_hung())),
    Rule("gloo-loopback", _WRONG, lambda r, _read: r.net.gloo_loopback(r.multi_node),
         unless=_TRAPS[:1]),
    Rule("gloo-mesh", _WRONG, lambda r, _read: r.net.gloo_mesh(), unless=_TRAPS),
    Rule("mixed-sockets", _WRONG, lambda r, _read: r.net.mixed_sockets(),
         unless=(*_TRAPS, Fired("gloo-mesh"), SINGLE_NODE)),
    Rule("silent-bootstrap", _WRONG, lambda r, _read: r.net.silent_bootstrap(),
         when=(BOOTSTRAP_FAILED,), unless=(AnyFound(), CONNECT_FAILED, NCCL_WARNED)),
    Rule("unresolved-master", frozenset({"rendezvous-config"}),
         lambda r, _read: r.net.unresolved_master()),
    # a connection an entry above explains is not reported again
    Rule("firewall", frozenset({"firewall"}), decide.firewall, reads=_TRAPS[1:]),
    Rule("peer-unreachable", frozenset({"peer-unreachable"}), decide.peer_unreachable,
         reads=(*_TRAPS[1:], AnyFound())),
    # --- the lines of one kind each ---
    *(Rule(finding_id, frozenset({finding_id}), decide.simple(finding_id))
      for finding_id in _SIMPLE_IDS),
    Rule("local-rank", frozenset({"local-rank-argument"}),
         lambda r, _read: r.local_rank.finding()),
    Rule("rank-assignment", frozenset({"rank-assignment"}), decide.rank_assignment),
    Rule("separate-tests", frozenset({"rank-assignment"}),
         lambda r, _read: r.run_end.separate_tests()),
    Rule("versions", frozenset({"version-mismatch"}), decide.version_mismatch, reads=(TROUBLE,)),
    Rule("node-mismatch", frozenset({"node-mismatch"}), decide.node_differences,
         reads=(Either((INIT_HUNG, ErrorBefore("versions"), FAILING)), INIT_HUNG)),
    Rule("shared-devices", frozenset({"node-mismatch"}),
         lambda r, _read: r.shared_devices.finding(), priority_of="duplicate-gpu"),
    Rule("collective-timeout", frozenset({"collective-timeout"}),
         lambda r, _read: r.job.collective_timeout(r.world_size())),
    Rule("p2p-suspect", frozenset({"p2p"}), decide.p2p_suspect,
         when=(ONE_NODE_GPUS,), unless=(IdFound("p2p"),)),
    Rule("unreached-peers", frozenset({"peer-unreachable"}), decide.peers_unreached,
         unless=(ErrorFound(), COMM_COMPLETED)),
    # the shell's "Killed": the out-of-memory finding's, when a line says memory ran out
    Rule("shell-signals", frozenset({"rank-failed", "shm"}), lambda r, _read: r.signals.finding(),
         unless=(OOM_LINES,)),
    Rule("connection-lost", frozenset({"connection-lost"}),
         lambda r, read: r.job.connection_lost(read[0], bool(r.net.conns)),
         reads=(ErrorFound(),)),
    Rule("rank-failed", frozenset({"rank-failed"}),
         lambda r, read: r.job.rank_failed(read[0]), reads=(ErrorFound(),)),
    # the library's raise site may name the failure's kind
    Rule("named", frozenset({CATALOGUED}), lambda r, _read: r.unexplained.named(),
         when=(Fired("rank-failed"),), unless=(ErrorBefore("rank-failed"),)),
    Rule("bus-error", frozenset({"shm"}), decide.bus_error,
         when=(Fired("rank-failed"),), unless=(IdFound("shm"),)),
    Rule("init-hang", frozenset({"p2p", "firewall"}), decide.init_hung,
         when=(INIT_STARTED,), unless=(AnyFound(), COMM_COMPLETED)),
    Rule("unexplained", frozenset({"unexplained-failure", "stopped-while-waiting", CATALOGUED}),
         lambda r, _read: r.unexplained.finding(decide.waited_on(r)), unless=(ErrorFound(),)),
    # a traceback the log holds without its exception line: a failure, not read
    Rule("cut-traceback", frozenset({"unexplained-failure"}),
         lambda r, _read: r.run_end.cut_traceback(), unless=(AnyFound(),)),
    Rule("no-result", frozenset({"no-result"}),
         lambda r, _read: r.run_end.no_result(decide.waited_on(r)), unless=(AnyFound(),)),
    # an exception's line ddpkit cannot place: no failure would claim more than the log shows
    Rule("unplaced-exception", frozenset({"no-result"}),
         lambda r, _read: r.unexplained.unplaced_exception(), unless=(AnyFound(),)),
    Rule("no-failure", frozenset({"no-failure"}), decide.no_failure, unless=(AnyFound(),)),
)
# The entries whose finding is the message catalogue's reading of a failure line (the finding its
# template is filed under, in general words): a cause that reads the same line gives it no way.
CATALOGUE_RULES = frozenset({"named", "unexplained"})
