"""Findings about the launch and the job: rendezvous, ranks, collectives, hangs, failures."""

from __future__ import annotations

from ddpkit.doctor.catalogue.base import Entry
from ddpkit.i18n import _

# What finds the cause when this log cannot: one home for the wording (stopped-while-waiting,
# no-result).
NEXT_STEPS = _("Read the other nodes' logs from the same run, all together:\n"
               "  ddpkit doctor --log node0.log node1.log ...   (or the run directories)\n"
               "If a node shows nothing either, check the cluster while it is up: ddpkit doctor "
               "--nnodes <N> ...; rerun with ddpkit launch --debug to see where each rank waits.")

ENTRIES = (
    Entry(
        "rendezvous-config", "error",
        _("The rendezvous settings are malformed or inconsistent"),
        _("torchrun/c10d could not even start the rendezvous: a malformed endpoint or port, a "
        "missing MASTER_ADDR/MASTER_PORT, a master hostname that does not resolve, a rendezvous "
        "that is already closed (a stale store from a previous run), or nodes that disagree on "
        "the number of nodes."),
        _("Pass the same, well-formed settings on every node, e.g.\n"
        "  ddpkit launch --nnodes 2 --node-rank <0|1> --master-addr 10.0.0.2 --master-port 29500 "
        "train.py\n"
        "For a closed rendezvous, use a fresh --rdzv-id (or restart the store on the master)."),
        "ValueErrors about the rendezvous endpoint/port, `environment variable MASTER_ADDR "
        "expected, but not set`, `is not in \"MIN:MAX\" format`, `RendezvousClosedError`, "
        "`RendezvousStateError`, `Name or service not known` (also torchelastic's `host not found`) "
        "for the master; as a warning, a restarted attempt refused at an address of the attempt "
        "before on one machine (torchrun's agent reporting two failed attempts, or a later "
        "`attempt_N` in its `--log-dir`): the store torchrun shares with its workers; "
        "`RendezvousConnectionError: The connection to the C10d store has failed` after the "
        "agent's own store dials timed out or were refused (no agent hosted the c10d "
        "rendezvous's store: `--rdzv-conf is_host=1`); a `file://` init_method followed, on one "
        "machine, by Gloo refused at this machine's own address (an earlier run's FileStore "
        "file); a dial to port 0 (c10d's `No socket on (localhost, 0) is listening yet`); a "
        "training library refusing a launcher's variables beside Slurm's (Ignite's `Defined "
        "env variables '[...]' should not be specified with SLURM`).",
        91,
    ),
    Entry(
        "local-rank-argument", "error", _("The script and its launcher disagree on the local-rank argument"),
        _("Scripts written for `python -m torch.distributed.launch` take their local rank as an argv "
        "option (`--local_rank`), not from LOCAL_RANK. torchrun passes none, torch 2.x's launch "
        "passes the dashed `--local-rank`: the ranks exit at start-up with an argparse error, or "
        "run with the option's default (often -1) and fail choosing their GPU."),
        _("Start it with ddpkit, which reads the script (never runs it) and passes each rank the "
        "spelling it declares (or --local-rank-arg dash|underscore|none):\n  ddpkit launch "
        "--nproc_per_node=<G> --nnodes=<N> --node_rank=<R> --master_addr=<addr> train.py\n"
        "or make the script read it: local_rank = int(os.environ[\"LOCAL_RANK\"])"),
        "argparse's `unrecognized arguments: --local-rank=0` (or `--local_rank=0`), `the following "
        "arguments are required: --local_rank`; `invalid device ordinal` or `Device index must "
        "not be negative` in a log that shows `local_rank=-1` or `set_device(-1)`; oneCCL's `could not get "
        "local_idx/count from environment variables` in a run that failed.",
        96,
    ),
    Entry(
        "rank-assignment", "error",
        _("Global ranks are duplicated or missing, or world sizes disagree"),
        _("Two processes claimed the same global rank, or ranks disagree on how many ranks there "
        "are. Typically two nodes were started with the same --node-rank, or with different "
        "--nnodes/--nproc-per-node."),
        _("Start every node with the same --nnodes and --nproc-per-node and a unique --node-rank "
        "0..N-1:\n"
        "  ddpkit launch --nnodes <N> --node-rank <R> --nproc-per-node <G> --master-addr <addr> "
        "train.py"),
        "`Bootstrap Root : rank X of N ranks has already checked in`, `mismatch in rank count`, "
        "NCCL comm lines with different `nranks`, the same rank reported by two hosts; two logs "
        "whose launchers state the same node rank (DeepSpeed's `nnodes=2, num_local_procs=8, "
        "node_rank=0`).",
        90,
    ),
    Entry(
        "rendezvous-timeout", "error",
        _("Not every node joined the rendezvous in time"),
        _("The rendezvous waited for all nodes/ranks and gave up: some node was never started, "
        "started with other settings, or could not reach the master's store."),
        _("Start every node (same --nnodes, unique --node-rank) within the rendezvous timeout, "
        "and check reachability of the master first:\n"
        "  ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>"),
        "`RendezvousTimeoutError`, `Timed out after N seconds waiting for clients. X/Y clients "
        "joined`, `Timed out initializing process group in store based barrier`; a Gloo "
        "process group's connect timing out on a rank's key (`wait timeout after Nms, keys: "
        "/default_pg/0//cpu//0/<rank>`: that rank never reached init_process_group); torchrun's "
        "agents timing out on every node's `torchelastic/role_info/<node rank>` (a node rank "
        "no agent holds: two nodes given the same `--node-rank`).",
        65,
    ),
    Entry(
        "job-hung", "error",
        _("The job hung: a rank is somewhere the others are not"),
        _("ddpkit dumped every rank's Python stack (py-spy) because no rank made progress (no "
        "output, no CPU time) for --hang-timeout seconds, or because you asked for it; or torch's "
        "flight recorder dumped each rank's last collectives. Ranks are grouped by where they "
        "are; a rank that is not inside a collective while the others wait in one (or is in a "
        "different collective, at a different line, or behind in the collectives' sequence) "
        "holds the job up."),
        _("Look at the named rank's stack (stacks/rank<R>.txt) and its source line: make every rank "
        "call the same collectives in the same order; a rank that only computes silently for a "
        "long time without using CPU (waiting on a GPU, a download) needs a larger "
        "--hang-timeout."),
        "A `stacks/` directory written by `ddpkit launch` (its `stacks.json`), torch's "
        "flight-recorder dumps (`flight-recorder/rank_<R>`), or a run directory that has either.",
        88,
    ),
    Entry(
        "dump-unreadable", "warning",
        _("A flight-recorder dump could not be read"),
        _("One of torch's flight-recorder dumps is not a dump ddpkit can read: cut short (the rank "
        "died while writing it), not a dump at all, or one that asks for a class or a "
        "function (refused: nothing in a dump is ever run). The other dumps and the logs are "
        "still diagnosed without it."),
        _("Diagnose the rest without it (move it aside and rerun `ddpkit doctor --log RUN_DIR`), "
        "or read it with torch's own analyser, which trusts the file (only on a dump you know "
        "the origin of):\n  python -m torch.distributed.flight_recorder.fr_trace <dump folder>"),
        "A file named like a dump (`flight-recorder/rank_<R>`, in torch's binary format) that the "
        "reader refuses.",
        30,
    ),
    Entry(
        "collective-timeout", "error",
        _("A collective operation timed out"),
        _("A collective (all_reduce, broadcast, ...) did not complete within the process-group "
        "timeout: some rank never joined it, because it was stuck, slower, crashed, or issued "
        "collectives in a different order than the others."),
        _("Look at what the lagging rank was doing at that point (its own log and traceback); "
        "make every rank issue the same collectives in the same order.\n"
        "More detail next time: TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_NCCL_DUMP_ON_TIMEOUT=1\n"
        "If the work is just slow, raise init_process_group(timeout=...)."),
        "`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=...)`, Gloo's "
        "`Timed out waiting Nms for recv/send operation`, `failed to pass monitoredBarrier`; "
        "ranks running different collectives: `Detected mismatch between collectives` "
        "(TORCH_DISTRIBUTED_DEBUG=DETAIL), Gloo's `op.preamble.length <= op.nbytes. X vs Y`, "
        "a program's own collective finding the ranks out of step (fairseq's `all_gather_list "
        "requires all workers to enter the function together`).",
        60,
    ),
    Entry(
        "connection-lost", "error",
        _("A peer dropped the connection mid-job"),
        _("An established connection to another rank was reset or closed: the peer process died "
        "(look for its own failure first) or the network between the nodes dropped."),
        _("Find the first failure on the peer named in the evidence (its log above this point); "
        "if it shows none, check the link between the nodes: ddpkit test --nnodes <N> ..."),
        "`Connection reset by peer`, `Connection closed by peer`, `Broken pipe`, NCCL's "
        "`remote process exited or there was a network error` (ncclRemoteError); "
        "torch.distributed.rpc's TensorPipe agent's `encountered error when ... to <worker>: "
        "eof`.",
        50,
    ),
    Entry(
        "rank-failed", "error",
        _("A rank failed and took the job down"),
        _("One rank exited first (with an error or killed by a signal), and its launcher "
        "(torchrun, mp.spawn, DeepSpeed's, mpirun, Horovod's) stopped the others because of it."),
        _("Read that rank's own output above its failure (torchrun --tee 3 or --log-dir keeps "
        "each rank's output apart) and fix what it reports; then rerun."),
        "torchrun's `Root Cause (first observed failure)` block (`rank : N`, `exitcode : X`), "
        "`failed (exitcode: X) local_rank: N`, Open MPI's, PRRTE's and Horovod's report of the "
        "first process that exited non-zero (`Process name: [[J,1],N]`, `Exit code: X`) or of a "
        "rank a signal ended (`process rank N ... exited on signal S`), an NCCL error (`unhandled"
        " system error`, `unhandled cuda error`, `internal error`; also nccl-tests' `Test NCCL "
        "failure common.cu:N '<error>'`) without a more specific cause; one rank's uncaught "
        "exception of its own (not the transport's words, not NCCL's, Gloo's or c10d's) beside "
        "peers whose exceptions are a lost connection or a timeout (`[rankN]: ` tags, or torchrun"
        " `--log-dir`'s files), named ahead of them; mp.spawn's `-- Process N terminated with the"
        " following error:` and the child's own exception after it; in torchrun `--log-dir`, a "
        "rank's empty `stderr.log` beside another rank's lost connection (that rank printed no "
        "error before it ended: killed, crashed in native code or returned early); the shell's "
        "report of a crash in bash's words or zsh's (`zsh: segmentation fault`), and glibc's "
        "abort of a corrupt heap or stack (`double free or corruption`).",
        40,
    ),
    Entry(
        "stopped-while-waiting", "error",
        _("This node was stopped while it waited for its peers"),
        _("Nothing failed on this node before the launcher or the scheduler stopped it: it was "
        "healthy and waiting for the other nodes (at the rendezvous, in process-group or NCCL "
        "init, or in a collective). The cause is on another node, which failed, hung or never "
        "started: its log says which."),
        NEXT_STEPS,
        "torchrun's `Received 15 death signal, shutting down workers` (or `SignalException: "
        "Process N got signal: 15`), slurm's `*** JOB N ON host CANCELLED AT ...`, DeepSpeed's "
        "`Main process received SIGTERM, exiting`, with no failure line before it in the same log; "
        "torchrun's agent losing the store in its rendezvous (`_assign_worker_ranks`) before any "
        "worker started.",
        35,
    ),
    Entry(
        "invalid-usage", "error",
        _("An NCCL setting or a distributed API call is invalid"),
        _("NCCL or torch.distributed refused a setting or a call: an NCCL_* variable or a "
        "communicator config value (blocking, cgaClusterSize, CTA policy, NCCL_NET, "
        "NCCL_MNNVL_ENABLE, ...) that NCCL rejects (ncclInvalidArgument, ncclInvalidUsage), a "
        "communicator used after it was destroyed or before its init returned, or a "
        "torch.distributed or torchrun argument that is not accepted (a backend name, "
        "device_id, --log-dir, --nproc-per-node). The line names the setting or the call."),
        _("Check the setting or the call the line names: the NCCL_* variables on every node "
        "(ddpkit nccl-conf show; env | grep NCCL_) and the framework's NCCL config (the "
        "process group's NCCL options, TORCH_NCCL_* variables); remove or correct it and "
        "rerun. For an API error, fix the call at the traceback's line."),
        "NCCL's `Invalid config ... attribute value`, `Error: network X not found.`, `comm X has "
        "already been destroyed` (ncclInvalidArgument/ncclInvalidUsage, read from the source), "
        "torch.distributed's and torchrun's ValueErrors about their arguments: catalogued "
        "templates, when no more specific finding holds; DDP's reducer checks and autograd's "
        "`modified by an inplace operation` on a saved tensor, read by what the line shows; a "
        "package of the distributed stack refusing what it was given (a ValueError, TypeError "
        "or NotImplementedError raised in it, an assert on its configuration or one whose "
        "message names a setting of the run, such as one parallel size against another).",
        84,
    ),
    Entry(
        "internal-error", "error",
        _("A library-internal check failed"),
        _("NCCL, Gloo or torch.distributed hit one of its own consistency checks "
        "(ncclInternalError, a GLOO_ENFORCE on its own state, an internal assertion). It is a "
        "bug, or, more often across nodes, builds that do not fit together (different NCCL or "
        "torch versions, a mismatched net plugin), or the aftermath of another failure that "
        "aborted an operation midway."),
        _("Install the same torch build (it bundles NCCL) and the same NCCL plugins on every "
        "node, and compare them: ddpkit doctor --nnodes <N> ...; look in the other nodes' logs "
        "for an earlier failure. If it persists with matching builds, upgrade torch/NCCL and "
        "report it upstream (NVIDIA/nccl, pytorch/pytorch, facebookincubator/gloo) with the log "
        "(NCCL_DEBUG=INFO)."),
        "NCCL WARN lines whose code path returns ncclInternalError (or ncclInvalidArgument "
        "inside NCCL's own functions), Gloo's enforce failures on its own state (`tx_ cannot "
        "be empty`, `duplicate buffer for slot`), torch's internal assertions: catalogued "
        "templates, when no more specific finding holds.",
        45,
    ),
    Entry(
        "unexplained-failure", "error",
        _("The run failed, and no rule names the cause"),
        _("The log shows a failure (an error line, a traceback, an errno, a fatal signal, a "
        "non-zero exit, a watchdog or a retry loop) that none of ddpkit's rules explains. The "
        "quoted lines are the decisive ones; the cause is often in another node's log, which "
        "failed first."),
        _("Read the other nodes' logs from the same run together: ddpkit doctor --log node0.log "
        "node1.log ... (or the run directories); check the cluster while it is up: ddpkit "
        "doctor --nnodes <N> ...; rerun with ddpkit launch --debug (NCCL_DEBUG=INFO, "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL) to see the step that fails."),
        "An error-level line of NCCL, Gloo or torch.distributed (the message catalogue, "
        "`src/ddpkit/doctor/log/messages.json`, built from their sources), an exception, a "
        "traceback, `errno`, `Segmentation fault`, `core dumped`, `terminate called`, a "
        "non-zero `exit code` or `ERROR` line, when no other error finding "
        "holds.",
        25,
    ),
    Entry(
        "no-result", "warning",
        _("The log shows neither a failure nor the run finishing"),
        _("Nothing in the log failed, and nothing shows the run finishing either: no launcher, "
        "NCCL or benchmark line that a run prints at its end. The log stops partway, which is "
        "what a hang looks like, and also a log cut short (an excerpt, a node whose output was "
        "not all kept). The other nodes' logs, or the cluster while the job is up, tell which."),
        NEXT_STEPS,
        "NCCL init or nccl-tests lines (the stage the run reached), and none of the end markers: "
        "torchrun's agent `worker group successfully finished` / `Local worker group finished "
        "(SUCCEEDED)` / `torchelastic.worker.status.SUCCEEDED`, NCCL's `- Destroy COMPLETE`, "
        "nccl-tests' `# Avg bus bandwidth`, ddpkit's `all N nodes finished successfully` / "
        "`node N finished in`, Lightning's `Trainer.fit stopped`, the Hugging Face Trainer's "
        "`Training completed`; no failure line either. Also a log of which ddpkit recognises no "
        "line at all (nothing of NCCL, Gloo, torch, a launcher, a traceback, nor a stage of "
        "nccl-tests, Lightning or Paddle): an empty log, a script's own prints, a table. A log "
        "whose lines ddpkit knows, none of them a stage, stays no-failure.",
        3,
    ),
    Entry(
        "no-failure", "info",
        _("No failure found in the log"),
        _("Nothing in the log indicates a failure. Lines such as `NET/Plugin : No plugin found`, "
        "`Failed to open libibverbs` and `NET/IB : No device found` are normal on machines "
        "without InfiniBand: NCCL then uses TCP sockets."),
        _("Nothing to fix in the log. If the job still misbehaves, rerun with NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET and run the preflight checks: ddpkit doctor"),
        "Only benign lines, or nothing that matches any other finding.",
        0,
    ),
)
