"""Where a run's log ends (issue 24): a run that finished, a log that just stops, a log ddpkit
recognises nothing of. (The shell's report of a rank's death: rules/shell_signals.py.)

- End markers (``run-complete`` events: torchrun's agent reporting its workers SUCCEEDED, ddpkit's
  own summary, NCCL's ``Destroy COMPLETE``, nccl-tests' ``# Avg bus bandwidth``, Lightning's and
  the HF Trainer's end of training; DeepSpeed's launcher once every process it started exited with
  0) say the run finished.
- A log that shows a stage of the run (NCCL's bootstrap or init lines, nccl-tests' tables, other
  programs' stages from the quiet tail) and neither a failure nor an end marker answers
  ``no-result``: it stops partway, as a hang or a cut log does; it says where it stops.
- So does a log of which ddpkit recognises no line (the quiet tail's ``log-read`` count): it
  cannot say whether the run failed or finished; and a log whose last line ddpkit does not know
  (a failed run's log ends with its failure, in the words of whatever failed). A log of known
  lines, none a stage, with no failure and no end, that ends on a known line (or on an indented
  line continuing one: a Python warning's source line) stays ``no-failure``.
- A Python traceback whose exception line the log does not hold (the quiet tail's
  ``traceback`` stage) is a failure ddpkit cannot read: ``unexplained-failure``, a warning.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.end_lines import DEEPSPEED_DONE, DEEPSPEED_NODE
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.rules.ignored import reported_ignored
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.wording import commas

# Lines that show the run under way: NCCL's init sequence (its rings' links within a machine
# among them, which ncclCommInitRank prints as it connects them) and nccl-tests' table of devices.
STAGE_KINDS = frozenset({"nccl-bootstrap", "nccl-socket-ifaces", "nccl-socket-item",
                         "nccl-network", "nccl-trees", "nccl-comm", "nccltests-rank",
                         "nccl-local-link", "run-stage",
                         "stack-thread"})  # (py-spy's dump: the process was alive, somewhere)
RUN_END_KINDS = STAGE_KINDS | {"run-complete", "log-read", "gpu-topology", "warning-line", "job-fact",
                               "benign"}
_PCIE_PEERS = ("PIX", "PXB", "PHB", "NODE")  # nvidia-smi's links over PCIe within a NUMA node


class RunEnd:
    """Feed it the events of ``RUN_END_KINDS``; ask whether the run finished."""

    def __init__(self) -> None:
        self.completed = Bag(2)
        self.warnings = Bag(3)  # warnings in Python's or c10's format the catalogue lacks
        self.first_warning: Event | None = None
        self.stages = 0
        self.last_stage: dict[str, Event] = {}  # per file, the last stage line
        self.summaries: list[Event] = []  # nccl-tests' "# Avg bus bandwidth" lines
        self.tables: set[tuple[str, int]] = set()  # nccl-tests' rank table lines (file, line)
        self.topology: dict[int, list[str]] = {}  # nvidia-smi topo -m: GPU -> its links
        self.logs = 0  # logs whose quiet tail was read (scan.py): they showed no failure, no end
        self.lines = 0  # their lines
        self.recognised = 0  # their lines ddpkit recognised
        self.unknown_ends: list[Event] = []  # such logs' last lines, where ddpkit knows none
        # per file, the first traceback whose exception line the log does not hold
        self.tracebacks: dict[str, Event] = {}
        # per file, the last line printed at the process's exit (CUDA unloaded): a traceback
        # before it ended with that line, which the scan read as benign, not as an exception
        self.exits: dict[str, int] = {}
        # per file, the last report of an exception Python ignored (rules/ignored.py): the
        # traceback after its head is that report's, whose exception is no failure
        self.ignored: dict[str, int] = {}
        # per file, DeepSpeed's launcher's processes: how many it started, how many ended with 0
        self.deepspeed: dict[str, list[int]] = {}

    def feed(self, event: Event) -> None:
        kind = event.kind
        if kind in ("job-fact", "run-stage") and "num_local_procs=" in event.text or (
                "exits successfully" in event.text):
            self._deepspeed(event)
        if kind == "run-complete":
            self.completed.add(event)
            if "Avg bus bandwidth" in event.get("detail") and len(self.summaries) < 256:
                self.summaries.append(event)
        elif kind == "warning-line":
            self.warnings.add(event)
            self.first_warning = self.first_warning or event
        elif kind == "benign":
            kept = self.exits if event.get("at_exit") else self.ignored if event.get(
                "ignored") else None
            if kept is not None and (event.file in kept or len(kept) < 256):
                kept[event.file] = max(kept.get(event.file, 0), event.line)
        elif kind == "gpu-topology":
            if len(self.topology) < 64 and event.get("gpu").isdigit():
                self.topology[int(event.get("gpu"))] = event.get("links").split()
        elif kind == "log-read":  # (its counts may come over the wire: read, never trusted)
            if event.get("last_text") and len(self.unknown_ends) < 16:
                self.unknown_ends.append(Event(
                    "log-read", event.file, _count(event.get("last_line")),
                    event.get("last_text"), event.host, event.node, event.rank, {}))
            self.logs += 1
            self.lines += _count(event.get("lines"))
            self.recognised += _count(event.get("recognised"))
        elif kind in STAGE_KINDS:
            if kind == "nccltests-rank" and len(self.tables) < 4096:
                self.tables.add((event.file, event.line))
            if event.get("stage") == "traceback":  # a failure began, no stage of a run
                if event.file not in self.tracebacks and len(self.tracebacks) < 256:
                    self.tracebacks[event.file] = event
                return
            self.stages += event.repeat
            known = self.last_stage.get(event.file)
            # (the quiet tail's stages come after the scan's: the later line is the last stage)
            if (known is not None and event.line >= known.line
                    or known is None and len(self.last_stage) < 256):
                self.last_stage[event.file] = event

    def _deepspeed(self, event: Event) -> None:
        """DeepSpeed's launcher: once every process it started ended with 0, an end marker."""
        if event.file not in self.deepspeed and len(self.deepspeed) >= 256:
            return
        started, ended = self.deepspeed.setdefault(event.file, [0, 0])
        node = DEEPSPEED_NODE.search(event.text)
        if node is not None:
            started = int(node.group(2))
        elif DEEPSPEED_DONE.search(event.text) is not None:
            ended += 1
        self.deepspeed[event.file] = [started, ended]
        if 0 < started <= ended:
            self.completed.add(event)

    def cut_traceback(self) -> Finding | None:
        """``unexplained-failure``, a warning, for a Python traceback whose exception line the
        log does not hold (a log with no failure read and no end): a process failed there, and
        the line that says how was not kept."""
        cut = [ev for ev in self.tracebacks.values() if self.exits.get(ev.file, 0) < ev.line
               and not reported_ignored(self.ignored.get(ev.file), ev.line)]
        if self.completed or not cut:
            return None
        e = entry("unexplained-failure")
        first = min(cut, key=lambda ev: (ev.file, ev.line))
        text = _("The log holds a Python traceback (line {line}) whose exception line is not "
                 "in it: a process failed there, and the line that says how was not kept. "
                 "Without it ddpkit cannot name the cause.", line=first.line)
        fix = _("Give ddpkit the whole output of that process, down to the traceback's last "
                "line (the exception's type and message): torchrun --tee 3 or --log-dir keeps "
                "each rank's output.")
        bag = Bag()
        bag.add(first)
        return Finding(e.id, "warning", e.title, text, fix, merge(bag.items))

    def no_result(self, waited_on: str) -> Finding | None:
        """``no-result`` when the log shows a stage of a run and no end marker, or when ddpkit
        recognises none of its lines; None otherwise. ``waited_on`` says where the run was when
        the log stops (rules/decide.waited_on's words)."""
        if self.completed:
            return None
        if not self.stages:
            return self._unrecognised() or self._ends_unknown()
        e = entry("no-result")
        last = sorted(self.last_stage.values(), key=lambda ev: (ev.file, ev.line))
        stage = _stage_words(last[-1]) if last else ""
        text = (_("It stops after {stage}.", stage=stage) if stage else
                _("It stops in {waited_on}.", waited_on=waited_on))
        bag = Bag()
        for event in last:
            bag.add(event)
        return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                       e.fix, merge(bag.items))

    def _unrecognised(self) -> Finding | None:
        """``no-result`` for logs none of whose lines ddpkit recognises (no line of NCCL, Gloo,
        torch.distributed, a launcher, a traceback): nothing in them says whether a run failed
        or finished, so "no failure" would claim more than they show."""
        if not self.logs or self.recognised:
            return None
        e = entry("no-result")
        known = _("no line of NCCL, Gloo, torch.distributed, a launcher or a traceback, and "
                  "no stage or end of a run ddpkit knows. It cannot say whether the run failed "
                  "or finished.")
        if not self.lines:
            text = _("The log is empty: it shows neither a failure nor a run that finished.")
        elif self.logs == 1:
            text = _n("ddpkit recognises nothing in the log's one line: {known}",
                      "ddpkit recognises none of the log's {count} lines: {known}", self.lines,
                      count=self.lines, known=known)
        else:
            text = _("ddpkit recognises none of the {count} lines of these {logs} logs: {known}",
                     count=self.lines, logs=self.logs, known=known)
        fix = _("Give ddpkit the run's whole output, every rank's, with NCCL_DEBUG=INFO set "
                "(ddpkit launch --debug records it), or the run directory of a ddpkit launch: "
                "ddpkit doctor --log RUN_DIR.")
        if self.topology:
            text = _("The only lines ddpkit knows in it are nvidia-smi's GPU topology (nvidia-smi "
                     "topo -m), no line of a run: it cannot say whether the run failed or "
                     "finished.")
        pairs = self._pcie_pairs()
        if pairs:
            text = _("{text} {pairs} reach each other over PCIe, without NVLink. NCCL may use "
                     "PCIe peer-to-peer between them; where ACS or the IOMMU (VT-d, AMD-Vi) "
                     "sends that traffic through the CPU's root complex, it runs slowly or hangs "
                     "(NCCL's troubleshooting guide, ACS).", text=text, pairs=pairs)
            fix = _("If the run hung or crawled between these GPUs: rerun it once with "
                    "NCCL_P2P_DISABLE=1; if that runs, disable ACS on the PCIe switches and "
                    "bridges (or the IOMMU in the BIOS / iommu=pt) and run without it.\n{fix}",
                    fix=fix)
        return Finding(e.id, e.severity, e.title, text, fix, ())

    def _ends_unknown(self) -> Finding | None:
        """``no-result`` for a log that ends on a line ddpkit does not know, with no failure and
        no end before it: a failed run's log ends with its failure, in the words of whatever
        program failed, so "no failure" would claim more than the log shows."""
        if not self.unknown_ends:
            return None
        e = entry("no-result")
        text = _n("The log ends on a line ddpkit does not know (line {line}), with no failure "
                  "and no end of the run before it: that line may be the failure, in the words "
                  "of the program that failed.",
                  "{count} logs end on a line ddpkit does not know (the first at line {line}), "
                  "with no failure and no end of the run before it: those lines may be the "
                  "failure, in the words of the program that failed.", len(self.unknown_ends),
                  count=len(self.unknown_ends), line=self.unknown_ends[0].line)
        bag = Bag()
        for event in self.unknown_ends:
            bag.add(event)
        return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                       e.fix, merge(bag.items))

    def _pcie_pairs(self) -> str:
        """The GPU pairs the topology links over PCIe within a NUMA node: ``GPU0-GPU1 (PXB)``."""
        pairs = [f"GPU{a}-GPU{b} ({links[b]})" for a, links in sorted(self.topology.items())
                 for b in range(a + 1, len(links)) if links[b] in _PCIE_PEERS]
        return commas(pairs[:6])

    def separate_tests(self) -> Finding | None:
        """``rank-assignment`` (a warning) when nccl-tests printed its result summary more than
        once in a log with no table of ranks between two of them. nccl-tests prints through
        ``PRINT`` (``if (is_main_thread) printf``): the first thread of process 0 only. Two
        summaries of one launch mean two processes each were process 0: each ran as its own
        one-process job (built without MPI=1, or started without mpirun), never one job."""
        by_file: dict[str, list[int]] = {}
        for event in self.summaries:
            by_file.setdefault(event.file, []).append(event.line)
        repeated = [(name, lines) for name, lines in by_file.items() if len(lines) > 1 and any(
            not any((name, n) in self.tables for n in range(a + 1, b))
            for a, b in zip(lines, lines[1:], strict=False))]
        if not repeated:
            return None
        e = entry("rank-assignment")
        name, lines = repeated[0]
        text = _("nccl-tests printed its result summary {count} times ({file}, lines {lines}) "
                 "with no table of ranks between; it prints it from its process 0 only, so if "
                 "these come from one launch, each process was process 0 of a job of its own: "
                 "the ranks never joined one communicator. That is what a build without MPI=1 "
                 "(or a start without mpirun) does.",
                 count=len(lines), file=name, lines=commas([str(n) for n in lines[:8]]))
        fix = _("Rebuild nccl-tests with MPI support (make clean; make MPI=1 MPI_HOME=<mpi "
                "dir>) and start it with mpirun -np <ranks>: its table of ranks then lists "
                "every rank, and it prints one summary.")
        evidence = Bag()
        for event in self.summaries:
            if event.file == name:
                evidence.add(event)
        return Finding(e.id, "warning", e.title, text, fix, merge(evidence.items))

    def warnings_text(self) -> str:
        """A sentence for no-failure when the log ends with no end marker and holds warnings in
        Python's or c10's own format (empty otherwise): what they are, and what they do not
        show."""
        first = self.first_warning
        if self.completed or first is None:
            return ""
        return _n("The log holds a warning ({file}:{line}: `{text}`), in the format of the "
                  "program that printed it: a warning says that something is deprecated, slow "
                  "or done another way, not that the run failed. The log stops before the run's "
                  "end, so it does not show the run finishing either.",
                  "The log holds {count} warnings (the first at {file}:{line}: `{text}`), in "
                  "the format of the programs that printed them: a warning says that something "
                  "is deprecated, slow or done another way, not that the run failed. The log "
                  "stops before the run's end, so it does not show the run finishing either.",
                  self.warnings.count, count=self.warnings.count, file=first.file,
                  line=first.line, text=(first.get("warning") or first.text)[:160])

    def completion_text(self) -> str:
        """A sentence for no-failure: the line that shows the run finished (empty if none)."""
        first = self.completed.items[0] if self.completed else None
        if first is None:
            return ""
        return _("The run finished: `{text}` ({file}:{line}).", text=first.text[:160],
                 file=first.file, line=first.line)


def _stage_words(event: Event) -> str:
    """What a ``run-stage`` line (quiet.py), or NCCL's ring links within a machine, show the run
    had reached; empty for other lines."""
    if event.kind == "stack-thread":
        return _("py-spy's dump of a process's threads (line {line}): a dump shows where a "
                 "process was when it was taken, not whether the run failed or finished; none "
                 "of its main threads waits in torch.distributed", line=event.line)
    if event.kind == "nccl-local-link":
        return _("NCCL connected its rings within the machine (line {line}), inside its init: "
                 "NCCL's own lines would say where it waits from there (NCCL_DEBUG=INFO)",
                 line=event.line)
    stage = event.get("stage")
    if stage == "nccltests-ranks":
        return _("nccl-tests' table of ranks (line {line}), before its results",
                 line=event.line)
    if stage == "nccltests-results":
        return _("nccl-tests' results for size {size} B (line {line}), before its last line "
                 "(# Avg bus bandwidth)", size=event.get("size"), line=event.line)
    if stage == "lightning-setup":
        return _("PyTorch Lightning's setup (line {line}), before the fit loop said it "
                 "stopped", line=event.line)
    if stage == "lightning-init":
        return _("PyTorch Lightning's process-group init (line {line}), where each process waits "
                 "in init_process_group for every member: nothing after it shows that they all "
                 "came (its rank 0 then says 'All distributed processes registered')",
                 line=event.line)
    if stage == "lightning-registered":
        return _("every process registered in PyTorch Lightning's process group (line {line}), "
                 "before the fit loop said it stopped", line=event.line)
    if stage == "gloo-connected":
        return _("Gloo connected its ranks (line {line})", line=event.line)
    if stage == "launcher":
        return _("{program}'s launcher starting the run's processes (line {line}), before any "
                 "of their own lines", program=event.get("program"), line=event.line)
    if stage == "nccl-info":
        return _("an INFO line of NCCL's (line {line}, from its {file}), printed while it made or "
                 "used a communicator: nothing after it shows the run going further, and NCCL's "
                 "next lines would say where it waits (NCCL_DEBUG=INFO on every rank)",
                 line=event.line, file=event.get("file"))
    if stage == "c10d-store":
        return _("a process reached the c10d store (line {line}), where the rendezvous and "
                 "init_process_group start: nothing after it shows the run going further",
                 line=event.line)
    if stage == "elastic-rendezvous":
        return _("torchrun's agent entered its rendezvous (line {line}), where it waits for the "
                 "other nodes: nothing after it shows that they all joined", line=event.line)
    if stage == "c10d-barrier":
        return _("a rank entered init_process_group's store-based barrier (line {line}), where "
                 "it waits for every rank: nothing after it shows that they all arrived",
                 line=event.line)
    if stage == "c10d-barrier-done":
        return _("every rank passed init_process_group's store-based barrier (line {line}): the "
                 "process group was up, and nothing after it shows the run going further",
                 line=event.line)
    if stage == "nccl-barrier":
        return _("a rank entered a barrier with the GPU ProcessGroupNCCL guessed for it (line "
                 "{line}), where it waits for every rank: nothing after it shows that they all "
                 "arrived (torch warns that a wrong guess can hang it)", line=event.line)
    if stage == "paddle-nccl-init":
        return _("PaddlePaddle's NCCL context init (line {line}): NCCL's own lines would say "
                 "where it waits (NCCL_DEBUG=INFO)", line=event.line)
    return ""


def _count(text: str) -> int:
    """A count a ``log-read`` event carries; 0 when it is none."""
    return int(text) if text.isdigit() and len(text) < 16 else 0
