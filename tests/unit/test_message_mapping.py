"""The message catalogue's mapping read from the sources (issue 24): what an NCCL WARN's code path
returns (tools/msgresult.py), the mapping it gives (tools/msgmap.py), and that doctor --log
uses each mapping at run time on a line built from the template (not a copied log)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tools_loader import shipped_catalogue, tool

from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.doctor.log.diagnose import diagnose

NEW_IDS = ("invalid-usage", "internal-error", "cuda-error")


def messages() -> list[dict[str, Any]]:
    loaded = shipped_catalogue()["messages"]
    assert isinstance(loaded, list)
    return loaded


# --- what a WARN's code path returns -------------------------------------------------------------

SOURCE = r'''
#define CHECKX(cmd, RES, label) do { \
    if ((cmd) != 0) { WARN("Widget call %s failed", #cmd); RES = ncclUnhandledCudaError; \
      goto label; } } while (0)
NCCL_API(ncclResult_t, ncclWidgetSet, ncclComm_t comm, int value);
ncclResult_t ncclWidgetSet(ncclComm_t comm, int value) {
  if (value < 0) { WARN("Widget value %d out of range", value); return ncclInvalidArgument; }
  return ncclSuccess;
}
static ncclResult_t widgetQueue(struct widget* w) {
  ncclResult_t ret = ncclSuccess;
  if (w == NULL) { WARN("widgetQueue: queue pointer lost"); return ncclInvalidArgument; }
  if (w->n > 8) {
    WARN("widgetQueue: %d entries is beyond the ring", w->n);
    ret = ncclInternalError;
    goto fail;
  }
  if (w->peerGone) { WARN("widgetQueue: peer widget went away"); ret = w->err; goto fail; }
  if (w->n == 0) {
    WARN("widgetQueue: nothing queued, going on with defaults");
  }
  if (w->bad) WARN("widgetQueue: stray state ignored here");
  return ncclSuccess;
fail:
  return ret;
}
static void* widgetThread(void* arg) {
  if (arg == NULL) { WARN("widgetThread: no argument, thread ends"); return NULL; }
  return NULL;
}
'''


def test_each_warn_records_what_its_code_path_returns() -> None:
    found = tool("msgresult").outcomes(SOURCE)
    assert found == {
        "Widget call <*> failed": {"ncclUnhandledCudaError"},
        "Widget value <*> out of range": {"ncclInvalidArgument", "api"},
        "widgetQueue: queue pointer lost": {"ncclInvalidArgument"},
        "widgetQueue: <*> entries is beyond the ring": {"ncclInternalError"},
        "widgetQueue: peer widget went away": {"propagated"},
        "widgetQueue: nothing queued, going on with defaults": {"continues"},
        "widgetQueue: stray state ignored here": {"continues"},
        "widgetThread: no argument, thread ends": {"returns"},
    }


@pytest.mark.parametrize(
    ("template", "result", "maps"),
    [
        ("Widget call <*> failed", {"ncclUnhandledCudaError"}, "cuda-error"),
        ("Widget value <*> out of range", {"ncclInvalidArgument", "api"}, "invalid-usage"),
        ("Widget got bad value <*>", {"ncclInvalidUsage"}, "invalid-usage"),
        ("Invalid config widget attribute value <*>", {"ncclInvalidArgument"}, "invalid-usage"),
        ("widgetQueue: queue pointer lost", {"ncclInvalidArgument"}, "internal-error"),
        ("widgetQueue: <*> entries is beyond the ring", {"ncclInternalError"}, "internal-error"),
        ("widget peer <*> went away", {"ncclRemoteError"}, "connection-lost"),
        ("widgetQueue: nothing queued, going on with defaults", {"continues"}, "benign"),
        ("widgetQueue: peer widget went away", {"propagated"}, "unexplained-failure"),
        ("widget ioctl said <*>", {"ncclSystemError"}, "unexplained-failure"),
    ],
)
def test_a_result_code_gives_the_mapping(template: str, result: set[str], maps: str) -> None:
    got, why = tool("msgmap").classify("nccl", "src/misc/widget.cc", template, "error",
                                       frozenset(result))
    assert got == maps
    codes = sorted(r for r in result if r.startswith("nccl"))
    assert all(code in why for code in codes if maps != "benign"), why


@pytest.mark.parametrize(
    ("file", "template", "level", "maps"),
    [
        # torch refusing what the program handed it (an argument, a tensor, a group): the call
        ("torch/distributed/distributed_c10d.py", "Default process group has not been "
         "initialized, please make sure to call init_process_group.", "error", "invalid-usage"),
        ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "Tensors must be CUDA and dense",
         "error", "invalid-usage"),
        # the same words in the aftermath of another failure, or a teardown that only warns
        ("torch/csrc/distributed/c10d/NCCLUtils.cpp", "NCCL communicator was aborted on rank "
         "<*>. <*>", "error", "rank-failed"),
        ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "Process Group destroyed on rank "
         "<*>", "error", "rank-failed"),
        ("torch/distributed/distributed_c10d.py", "Failed to abort process group <*>", "warning",
         "rank-failed"),
        # torch's checks whose meaning is a finding of its own
        ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "ProcessGroupNCCL is only "
         "supported with GPUs, no GPUs found!", "error", "cuda-error"),
        ("torch/distributed/elastic/agent/server/local_elastic_agent.py", "local_rank <*> "
         "exceeds available GPUs in CUDA_VISIBLE_DEVICES=<*>", "error", "duplicate-gpu"),
        ("torch/distributed/rendezvous.py", "`world_size` must be an integer. <*>", "error",
         "rendezvous-config"),
        # distributed checkpointing's strict load: the state_dict handed to load() holds a key
        # the checkpoint lacks (default_planner.py, state_dict.py)
        ("torch/distributed/checkpoint/default_planner.py", "Missing key in checkpoint "
         "state_dict: <*>.", "error", "invalid-usage"),
        ("torch/distributed/checkpoint/state_dict.py", "Missing optimizer state for parameter "
         "'<*>' in checkpoint. The parameter requires gradients but has no saved optimizer state.",
         "error", "invalid-usage"),
        # another of its checks, on what it computed itself, stays unexplained
        ("torch/distributed/checkpoint/filesystem.py", "req <*> mismatch sizes <*> vs <*>",
         "error", "unexplained-failure"),
        # another library's check with the same words is not torch refusing a call
        ("src/init.cc", "Invalid device count requested : <*>", "error", "rank-failed"),
        # torchrun's and torch.distributed.launch's checks of their own arguments that are not
        # rendezvous settings (run.py's determine_local_world_size, parse_args; launch.py's)
        ("torch/distributed/run.py", "Unsupported nproc_per_node value: <*>", "error",
         "invalid-usage"),
        ("torch/distributed/run.py", "--local_ranks_filter must be a comma-separated list of "
         "integers e.g. --local_ranks_filter=0,1,2", "error", "invalid-usage"),
        ("torch/distributed/launch.py", "When using the '--no-python' flag, you must also set "
         "the '--use-env' flag.", "error", "invalid-usage"),
        # while the node count's form is a rendezvous setting
        ("torch/distributed/run.py", "nnodes=<*> is not in \"MIN:MAX\" format", "error",
         "rendezvous-config"),
    ],
)
def test_torch_refusing_a_call_is_invalid_usage(file: str, template: str, level: str,
                                                maps: str) -> None:
    source = "torch" if file.startswith("torch/") else "nccl"
    assert tool("msgmap").classify(source, file, template, level, frozenset())[0] == maps


@pytest.mark.parametrize(
    ("call", "template", "maps"),
    [
        # Python's documented meanings: a value, a type, a case not accepted
        ("raise ValueError", "The module has CPU parameters or buffers when `sync_module_states`",
         "invalid-usage"),
        ("raise TypeError", "Cannot pickle RemoteModule in python pickler <*>", "invalid-usage"),
        ("raise NotImplementedError", "Unsupported placement type <*> for now", "invalid-usage"),
        # torch saying its own check is a bug, whatever it raises
        ("raise ValueError", "BUG! Expected rank_cond to be true for at least one process.",
         "internal-error"),
        # a check of the API's own state: a failure seen, which no setting explains
        ("raise RuntimeError", "Unknown node strategy <*>", "unexplained-failure"),
    ],
)
def test_torch_distributeds_apis_are_mapped_by_what_they_raise(call: str, template: str,
                                                                maps: str) -> None:
    """torch.distributed's APIs beyond the launch (TORCH_MORE_FILES): no rule of msgmap's reads
    their words, so what they raise says what kind of failure it is."""
    got, why = tool("msgmap").classify("torch", "torch/distributed/tensor/_api.py", template,
                                       "error", frozenset(), call)
    assert got == maps and "no setup cause" not in why


def test_a_remap_changes_the_mappings_and_matchers_only() -> None:
    document = shipped_catalogue()
    again = tool("catalogue_messages").remapped(document)
    assert again["releases"] == document["releases"] and again["notes"] == document["notes"]
    mapped = ("maps", "reason", "matcher")
    for before, after in zip(document["messages"], again["messages"], strict=True):
        assert {k: v for k, v in before.items() if k not in mapped} == {
            k: v for k, v in after.items() if k not in mapped}
        # the shipped file is msgmap's reading as it stands
        assert [before[k] for k in mapped] == [after[k] for k in mapped], before


def test_a_template_ending_in_a_value_matches_the_value_empty() -> None:
    # ("ValueError: Unsupported nproc_per_node value: " as a log keeps it: no trailing blank)
    regex = tool("msgmap").matcher("Unsupported nproc_per_node value: <*>")
    assert re.search(regex, "ValueError: Unsupported nproc_per_node value:")
    assert re.search(regex, "ValueError: Unsupported nproc_per_node value: gpu2")


def test_shipped_nccl_warns_carry_their_result_codes() -> None:
    warns = [m for m in messages() if m["source"] == "nccl" and m["call"] == "WARN"]
    assert len(warns) > 400
    assert all(m.get("result") for m in warns)
    allowed = set(tool("msgresult").RESULTS) | {"propagated", "returns", "continues", "fatal",
                                                "api"}
    assert all(set(m["result"]) <= allowed for m in warns)
    # the catalogue's generic entries all say why the source cannot say more
    for m in messages():
        if m["maps"] == "unexplained-failure":
            assert "no setup cause" not in m["reason"], m


def _named(entries: list[dict[str, Any]]) -> float:
    return sum(m["maps"] not in ("unexplained-failure", "unmapped") for m in entries) / len(entries)


def test_coverage_by_a_finding_or_benign_is_at_least_95_percent() -> None:
    """The launch, the rendezvous and the process groups (every program's files but the rest of
    torch.distributed's APIs) are at least 95% named. Those APIs (FSDP, DTensor, checkpointing,
    RPC, pipelining; ``TORCH_MORE_FILES``) raise mostly checks of their own state, which no setup
    explains and which stay unexplained-failure, each saying so: at least 70% of them are a
    refused call or benign."""
    more = tool("msgsources").TORCH_MORE_FILES
    apis = [m for m in messages() if m["source"] == "torch" and more.search(m["file"])]
    entries = [m for m in messages() if m not in apis]
    assert _named(entries) >= 0.95
    for source in ("nccl", "gloo", "torch"):
        assert _named([m for m in entries if m["source"] == source]) >= 0.95, source
    assert len(apis) > 1000 and _named(apis) >= 0.70


# --- doctor --log uses each mapping at run time ---------------------------------------------------

def line_for(message: dict[str, Any]) -> str:
    """A log line the program would print for ``message``: each hole filled with ``7`` and the
    source's own prefix (NCCL's WARN, an exception as a rank's traceback ends, a Gloo enforce as
    torch raises it, torchrun's error-level log line)."""
    # (a template of several lines: the line its matcher holds, msgmap.matcher's longest)
    lines = message["template"].split("\n")
    text = max(lines, key=lambda s: len(s.replace("<*>", ""))).replace("<*>", "7")
    source, file, call = message["source"], message["file"], message["call"]
    if source == "nccl":
        return f"gpu1:4242:4250 [0] {file.rsplit('/', 1)[-1]}:42 NCCL WARN {text}"
    if source == "aws-ofi-nccl":  # NCCL's logger, with the plugin's function for the file
        return f"gpu1:4242:4250 [0] nccl_net_ofi_init:42 NCCL WARN {text}"
    if source == "gloo":
        return f"[rank1]: RuntimeError: [enforce fail at /src/third_party/gloo/{file}:77] x. {text}"
    if call.startswith("raise "):
        return f"[rank1]: {call.split()[1]}: {text}"
    if call == "warnings.warn":  # Python's warnings module: "<file>:<line>: <category>: <text>"
        return f"/usr/lib/python3/site-packages/{file}:900: UserWarning: {text}"
    if file.endswith((".hpp", ".cpp", ".h")) and call == "LOG":  # glog's form, as torch prints it
        return f"[rank1]:[E1204 10:00:00.123000000 4242 {file.rsplit('/', 1)[-1]}:900] {text}"
    if file.endswith((".hpp", ".cpp", ".h")):
        return f"[rank1]: RuntimeError: {text}"
    return f"E1204 10:00:00.123000 4242 {file}:900] {text}"


# Where the line alone does not reach the catalogued finding, and why.
NOT_AT_RUN_TIME = {
    # logger.exception: the traceback's last line that follows it is the failure line
    "Failed to parse reply file: <*>",
    # its seconds decide (rules/exit_barrier.py): 7 s is the master's store closing after a job
    # that succeeded, no wait that ran out (test_doctor_exit_barrier.py reads both)
    "Error waiting on exit barrier. Elapsed: <*> seconds",
    # torch 1.8's triple-quoted message: its longest line, the matcher's, is an indented
    # continuation that carries no exception word of its own
    "DDP join() API does not support Single-Process Multi-GPU\n                    mode training. "
    "The recommended approach for DDP training is\n                    to spawn a single "
    "process that works on a single GPU.",
}


def runtime_cases() -> list[dict[str, Any]]:
    from_source = {why for _where, _what, _maps, why in (*tool("msgsource_rules").SOURCE_RULES,
                                                          *tool("msgrules").TORCH_CORE_RULES)}
    # torch.distributed's APIs' Python warnings (warnings.warn, logger.warning): the scan's
    # anchors do not find a UserWarning line (one more anchor is one more pass over every log),
    # and a warning alone, with nothing failed, is no failure (issue 30)
    more = tool("msgsources").TORCH_MORE_FILES
    # a text that two files of one name print (NCCL moved group.cc into misc/ and back) with
    # different mappings: the line, which names the file but not its folder, cannot tell them
    # apart
    named: dict[tuple[str, str, str], set[str]] = {}
    for m in messages():
        named.setdefault((m["source"], m["file"].rsplit("/", 1)[-1], m["template"]),
                         set()).add(m["maps"])
    cases = []
    for m in messages():
        if m["maps"] in ("unmapped", "unexplained-failure") or m["template"] in NOT_AT_RUN_TIME:
            continue
        if len(named[m["source"], m["file"].rsplit("/", 1)[-1], m["template"]]) > 1:
            continue
        if m["level"] != "error" and m["source"] == "torch" and more.search(m["file"]):
            continue
        if m["maps"] in NEW_IDS or m["reason"] in from_source or re.match(r"returns ncclRemote",
                                                                          m["reason"]):
            cases.append(m)
    return cases


CASES = runtime_cases()


def test_the_runtime_cases_cover_every_new_id() -> None:
    assert {m["maps"] for m in CASES} >= set(NEW_IDS)
    assert all(finding in CATALOGUE for finding in NEW_IDS)
    assert len(CASES) > 100


@pytest.mark.parametrize("message", CASES, ids=lambda m: f"{m['source']}:{m['template'][:40]}")
def test_a_line_built_from_the_template_gets_its_finding(tmp_path: Path,
                                                         message: dict[str, Any]) -> None:
    log = tmp_path / "rank.log"
    log.write_text("starting the job\n" + line_for(message) + "\n")
    findings = diagnose([str(log)])
    want = "no-failure" if message["maps"] == "benign" else message["maps"]
    if message["maps"] == "benign" and message["file"].endswith("net_ib.cc"):
        want = "ib-error"  # ib-error's own rule claims every NET/IB WARN line first
    assert findings[0].id == want, (line_for(message), [f.id for f in findings])
    if want in NEW_IDS and message["template"] not in READ_BY_A_CAUSE and \
            message["template"] not in PRINTED_BY_SEVERAL:
        assert message["source"] in findings[0].explanation.lower()


# Texts that more than one program prints word for word (DeepSpeed's launcher copies torchrun's
# checks): the line is the one more releases print (Catalogue.match), whichever was built
def _printed_by_several() -> set[str]:
    sources: dict[str, set[str]] = {}
    for m in messages():
        sources.setdefault(m["template"], set()).add(m["source"])
    return {template for template, by in sources.items() if len(by) > 1}


PRINTED_BY_SEVERAL = _printed_by_several()


# Lines a cause of ddpkit's own reads more closely than the catalogue: its words, not the
# catalogue's (which name the program that printed the line), explain the finding.
READ_BY_A_CAUSE = {
    "Unable to proceed, no GPU resources available",  # causes/no_gpu.py
}


def test_an_exception_named_by_the_catalogue_comes_before_rank_failed(tmp_path: Path) -> None:
    log = tmp_path / "rank.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                   "[rank1]: ValueError: monitored_barrier is only implemented for GLOO backend.\n")
    ids = [f.id for f in diagnose([str(log)])]
    assert ids[0] == "invalid-usage" and "rank-failed" in ids


def test_the_exit_barrier_is_a_wait_for_the_other_nodes(tmp_path: Path) -> None:
    log = tmp_path / "node0.log"
    log.write_text("E1204 10:00:00.123000 4242 torch/distributed/elastic/agent/server/api.py:1009]"
                   " Error waiting on exit barrier. Elapsed: 300.1 seconds\n")
    (top, *_) = diagnose([str(log)])
    assert top.id == "stopped-while-waiting" and "exit barrier" in top.explanation
    assert top.evidence[0].line == 1


def test_a_strict_checkpoint_load_of_a_key_the_checkpoint_lacks_is_the_calls_fault(
        tmp_path: Path) -> None:
    # torch/distributed/checkpoint/default_planner.py, create_default_local_load_plan: raised
    # under strict loading for a key of the state_dict handed to load() that the checkpoint lacks
    log = tmp_path / "rank.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        "  File \"/opt/conda/lib/python3.11/site-packages/torch/distributed/checkpoint/"
        "default_planner.py\", line 499, in create_default_local_load_plan\n"
        "    raise RuntimeError(f\"Missing key in checkpoint state_dict: {fqn}.\")\n"
        "RuntimeError: Missing key in checkpoint state_dict: model.layers.0.attention.wq.weight.\n")
    ids = [f.id for f in diagnose([str(log)])]
    assert ids[0] == "invalid-usage", ids
