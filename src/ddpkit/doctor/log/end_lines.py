"""The lines that say where a run ends (rules/run_end.py reads them; rules/shell_signals.py the
shell's and crash handlers' reports): a patterns' family of the scan's table
(doctor/log/patterns.py), tried in its place there. The tail pass finds them
(anchor_words.TAIL_ANCHORS, in the last TAIL_BYTES of a log), where a run's end is."""

from __future__ import annotations

import re

from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.line_pattern import LinePattern
from ddpkit.doctor.log.line_pattern import pattern as _p
from ddpkit.doctor.log.prefixes import LAUNCHER_TAGS, LINE_LABEL

# strsignal() of the signals a process crashes of (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL): what
# bash reports for a job they end
FATAL_SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                 "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
# C++'s std::terminate of an uncaught exception (libstdc++'s verbose terminate handler), its
# what() on the next line
TERMINATE = "terminate called after throwing"
# the same handler's other words (libstdc++-v3/libsupc++/vterminate.cc): std::terminate with no
# exception in flight (a std::thread destroyed while still joinable, a noexcept function's end),
# or a second terminate during the first; it aborts the process as well, naming nothing
TERMINATE_OTHER = ("terminate called without an active exception", "terminate called recursively")
# zsh's report of a job a signal ended (Src/jobs.c, printjob: "zsh: " + the signal's message +
# " (core dumped)" where it dumped core, then the job's command; the messages from
# Src/signames2.awk), in bash's strsignal() words
ZSH_SIGNALS = {"killed": "Killed", "segmentation fault": "Segmentation fault",
               "abort": "Aborted", "bus error": "Bus error",
               "floating point exception": "Floating point exception",
               "illegal hardware instruction": "Illegal instruction"}
# glibc's last words before it aborts a process whose heap or stack it found corrupt (malloc/
# malloc.c, malloc_printerr: the check's message, then abort(); debug/stack_chk_fail.c, "***
# stack smashing detected ***: terminated"): the process dies of SIGABRT
GLIBC_ABORTS = ("double free or corruption", "free(): invalid pointer", "free(): invalid size",
                "munmap_chunk(): invalid pointer", "corrupted size vs. prev_size",
                "malloc(): corrupted", "malloc_consolidate(): invalid chunk size",
                "stack smashing detected")
# DeepSpeed's launcher (launcher/launch.py, main): it states its node count, how many processes it
# starts on its node and its node rank ("nnodes=%d, num_local_procs=%d, node_rank=%d"; the facts'
# NODE_RANK_CLAIM reads it too) and logs each that ends with 0 ("Process %d
# exits successfully."); once every one has, the node's part of the run is over (one such line
# alone says nothing of the others)
DEEPSPEED_NODE = re.compile(r"\bnnodes=(\d{1,6}), num_local_procs=(\d{1,4}), node_rank=(\d{1,6})\b")
DEEPSPEED_DONE = re.compile(r"\[launch\.py:\d+:main\] Process \d+ exits successfully\.")
# The reason ProcessGroupNCCL's own shutdown (destroy_process_group() shuts it down) gives the
# communicators it aborts: "Process Group shutdown on rank %d" (ProcessGroupNCCL.cpp, the message
# catalogue's template from torch's sources). A
# communicator aborted with a reason reports it after "NCCL communicator encountered error set by
# ProcessGroupNCCL: " (checkForNCCLErrorsInternal), which the watchdog may still log at info level
# after the program's own teardown: the run's work is over, no failure of it
PG_SHUTDOWN = "error set by ProcessGroupNCCL: Process Group shutdown"
# A launcher's label and rank tags before a line the shell printed (srun's "0: ", pdsh's "node3: ",
# "[0]<stderr>:", "[rank1]:"; prefixes.LINE_LABEL, LAUNCHER_TAGS), or a
# progress bar the killed process left without its newline: tqdm redraws its bar after a carriage
# return and ends it with "| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
# (tqdm/std.py, format_meter), so the shell's report lands on the bar's line
# ("Loading checkpoint shards:   0%|   | 0/2 [00:00<?, ?it/s]Killed")
LINE_START = rf"^(?:{LINE_LABEL})?{LAUNCHER_TAGS}\s*"  # (a line's own text starts after it)
SHELL_PREFIX = LINE_START + r"(?:[^\n]*\| *[\d.]+[kMGT]?/[\d.?]+[kMGT]? \[[^\]\n]*\])?"
_FATAL = "|".join(FATAL_SIGNALS)
# Slurm's srun on the tasks a signal or its memory cgroup ended ("srun: error: %s: task(s) %s:
# %s": the node, the task ids as a hostlist range, then strsignal's words, "Killed" for SIGKILL,
# or "Out Of Memory"): the regex up to those words (this module's srun pattern, facts/extract.py's
# deaths, the out-of-memory pattern in patterns.py)
SRUN_TASKS = r"\btasks? [\d,\[\]-]{1,200}: "
# What Slurm (slurmstepd, srun) and Kubernetes print of a process their memory cgroup killed:
# slurmstepd's "Detected %u oom_kill event(s)" ("oom-kill" before 21.08) and "%s exceeded memory
# limit (%u > %u), being killed", srun's "task %s: Out Of Memory", Kubernetes' OOMKilled reason.
# The out-of-memory pattern's triggers (patterns.py), the anchors and rules/simple.py's words of
# the host's memory read them from here.
CGROUP_OOM_WORDS = ("oom_kill", "oom-kill", "exceeded memory limit", "Out Of Memory", "OOMKilled")


def hydra_exit(words: str) -> str:
    """MPICH's (and Intel MPI's) hydra on the process a signal ended, as a regex: "YOUR
    APPLICATION TERMINATED WITH THE EXIT STRING: %s (signal %d)" (ui/mpich/mpiexec.c, strsignal's
    words and the number; macOS's words add it, "Segmentation fault: 11"), ``words`` (a regex) in
    its ``exit_words`` group and the number in ``signum``: the one grammar of it (the pattern
    below, facts/extract.py's deaths)."""
    return (rf"\bTERMINATED WITH THE EXIT STRING: (?P<detail>(?P<exit_words>{words})"
            r"(?:: \d{1,2})? \(signal (?P<signum>\d{1,2})\))")


# Open MPI's launcher on a rank a signal ended (orte/tools/orterun/help-orterun.txt,
# [orterun:proc-aborted] and [orterun:proc-aborted-strsignal], v4; PRRTE's prterun, v5): "%s
# noticed that process rank %lu with PID %d on node %s exited on signal %d (%s)." -- no error
# word on the line; the rank is the MPI rank (the job's global rank). The one grammar of it
# (patterns.py's MPI_RANK_SIGNALED, facts/extract.py's deaths)
OPEN_MPI_SIGNALED = (r"noticed that process rank (?P<rank>\d{1,7}) with PID (?P<pid>\d{1,10}) on "
                     r"node (?P<host>[^\s]{1,255}) exited on signal (?P<signum>\d{1,2})\b")

# The launchers' report of the first process that exited non-zero, its name and its code on lines
# of their own after it (the one grammar of it: patterns.py's summary lines, facts/extract.py's
# deaths): Open MPI's mpirun (orte/tools/orterun/help-orterun.txt [orterun:non-zero-exit], v4:
# "%s detected that one or more processes exited with non-zero status, thus causing\nthe job to
# be terminated. The first process to do so was:\n\n  Process name: %s\n  Exit code:    %d";
# the name ORTE_NAME_PRINT's "[[family,local],vpid]", the vpid the MPI rank), PRRTE's prterun
# (Open MPI 5: the name "[nspace,rank]", its namespace "prterun-<host>-<pid>@1") and Horovod's
# runner (runner/gloo_run.py, "Gloo job detected ..." in its first releases: "Process name:
# {name}\nExit code: {code}", the name the index of the process's slot, in rank order)
FIRST_FAILED_HEAD = "detected that one or more processes exited with non-zero status"
FIRST_FAILED_NAME = (LINE_START + r"Process name: (?:\[\[\d{1,10},\d{1,10}\],"
                     r"|\[[^\s\[\],@]{1,255}@\d{1,10},)?(?P<rank>\d{1,7})\]?\s*$")
FIRST_FAILED_CODE = LINE_START + r"Exit code:\s{1,8}(?P<code>-?\d{1,3})\s*$"


def zsh_report(signals: str) -> str:
    """zsh's report of a job one of ``signals`` (an alternation of ZSH_SIGNALS' words) ended, as
    a regex: the one grammar of it (the patterns below, facts/extract.py's deaths); its
    ``detail`` is what zsh printed of the signal."""
    return (rf"{SHELL_PREFIX}zsh: (?P<detail>(?P<zsh_signal>{signals})(?: \(core dumped\))?)"
            r"(?: +(?P<command>\S[^\n]*?))?\s*$")


END_PATTERNS: tuple[LinePattern, ...] = (
    # End markers: torchrun's agent once its workers exited 0 (api.py's "[%s] worker group
    # successfully finished. ...", "Local worker group finished (%s). ..." with the SUCCEEDED
    # state; torch 1.9's events "torchelastic.worker.status.SUCCEEDED"), ddpkit's own summary
    # ("all {count} nodes finished successfully", "node {rank} finished in ..."), NCCL's
    # "comm %p rank %d nranks %d cudaDev %d busId %lx - Destroy COMPLETE" (2.12 on) and
    # nccl-tests' "# Avg bus bandwidth : %g", printed once every size ran.
    _p(EventKind.RUN_COMPLETE, ("SUCCEEDED", "finished"),
       r"(?P<detail>worker group successfully finished|Local worker group finished \("
       r"(?:WorkerState\.)?SUCCEEDED\)|torchelastic\.worker\.status\.SUCCEEDED"
       r"|all \d+ nodes? finished successfully|node \d+ finished in \d)"),
    _p(EventKind.RUN_COMPLETE, ("Avg bus bandwidth",), r"(?P<detail>Avg bus bandwidth\s*: ?[\d.]+)"),
    _p(EventKind.RUN_COMPLETE, ("Destroy COMPLETE",),
       r"(?P<detail>comm 0x\w+ rank \d+ n[Rr]anks \d+[^\n]* - Destroy COMPLETE)"),
    # Lightning's fit loop ("`Trainer.fit` stopped: `max_epochs={!r}` reached.", or max_steps)
    # and the Hugging Face Trainer's ("Training completed. Do not forget to share your model on
    # huggingface.co/models =)") at the end of training
    _p(EventKind.RUN_COMPLETE, ("Trainer.fit` stopped", "Training completed."),
       r"(?P<detail>`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached"
       r"|Training completed\. Do not forget to share your model)"),
    # ProcessGroupNCCL's destructor (torch v2.4.0 on, torch/csrc/distributed/c10d/
    # ProcessGroupNCCL.cpp, ~ProcessGroupNCCL: TORCH_WARN_ONCE "WARNING: process group has NOT
    # been destroyed before we destruct ProcessGroupNCCL. On normal program exit, ...", reworded
    # in later releases to "WARNING: destroy_process_group() was not called before program exit,
    # which can leak resources. ...", whose comment says the destructor runs only as the whole
    # program exits): the process reached its exit without destroy_process_group (harmless in
    # itself; a failure before it shows in its own lines)
    _p(EventKind.RUN_COMPLETE, ("NOT been destroyed", "was not called before program exit"),
       r"(?P<detail>process group has NOT been destroyed before we destruct ProcessGroupNCCL"
       r"|destroy_process_group\(\) was not called before program exit)"),
    # The shell's report of a process killed by SIGKILL, alone on its line: bash's
    # strsignal(SIGKILL) "Killed" (interactive, foreground), its non-interactive "%s: line %d: "
    # + "<pid> Killed <command>" (jobs.c, notify_of_job_status) and "[1]+  Killed  <command>".
    _p(EventKind.KILLED, ("Killed",),
       rf"{SHELL_PREFIX}(?:[^\s:]+: line \d+: +(?P<pid>\d+) +"
       r"|\[\d+\][+-]? +)?Killed(?! +process \d)(?: +(?P<command>\S[^\n]*?))?\s*$"),
    # The same report of a process a fatal signal ended (bash's strsignal() texts, "(core
    # dumped)" if it dumped core): alone on its line, or after the script's "line N: <pid> " or
    # the job's "[1]+ ", which its command may follow.
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       rf"{SHELL_PREFIX}(?:[^\s:]+: line \d+: +(?P<pid>\d+) +|\[\d+\][+-]? +)"
       rf"(?P<signal_text>{_FATAL})(?P<core> \(core dumped\))?(?: +(?P<command>\S[^\n]*?))?\s*$"),
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       rf"{SHELL_PREFIX}(?P<signal_text>{_FATAL})(?P<core> \(core dumped\))?\s*$"),
    # zsh's report of the same (ZSH_SIGNALS), its command after it: each of its words stands for
    # bash's (the event's signal_text)
    _p(EventKind.KILLED, ("zsh: killed",), zsh_report("killed")),
    *(_p(EventKind.FATAL_SIGNAL, (f"zsh: {word}",), zsh_report(re.escape(word)),
         fixed=(("signal_text", bash),))
      for word, bash in ZSH_SIGNALS.items() if word != "killed"),
    # Slurm's srun on the tasks a fatal signal ended ("srun: error: %s: task(s) %s: %s",
    # strsignal's words, " (core dumped)" after them); its "Killed" is read as a death fact
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       rf"\bsrun: error: \S+: {SRUN_TASKS}(?P<detail>(?P<signal_text>{_FATAL})"
       r"(?P<core> \(core dumped\))?)"),
    # MPICH's hydra on the process a fatal signal ended (hydra_exit)
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       hydra_exit(f"(?P<signal_text>{_FATAL})")),
    # glibc aborting a process it found corrupt (GLIBC_ABORTS): SIGABRT
    _p(EventKind.FATAL_SIGNAL, GLIBC_ABORTS,
       r"(?P<detail>(?:\*\*\* )?(?:" + "|".join(re.escape(text) for text in GLIBC_ABORTS)
       + r")[^\n]{0,200})", fixed=(("signal_text", "Aborted"),)),
    # A crash handler's report in the process itself: Open MPI's (opal/util/stacktrace.c:
    # "[%s:%05d] *** Process received signal ***", then "[%s:%05d] Signal: %s (%d)") and UCX's
    # (ucs/debug/debug.c: "Caught signal %d (%s)", the signal's strsignal() text and its code's)
    _p(EventKind.FATAL_SIGNAL, ("Process received signal",),
       r"(?P<detail>\*\*\* Process received signal \*\*\*)"),
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       rf"\] (?P<detail>Signal: (?P<signal_text>{_FATAL}) \(\d+\))\s*$"),
    _p(EventKind.FATAL_SIGNAL, tuple(FATAL_SIGNALS),
       rf"(?P<detail>Caught signal \d+ \((?P<signal_text>{_FATAL})[:)][^\n]*)"),
)
