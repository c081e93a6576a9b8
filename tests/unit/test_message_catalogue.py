"""The message catalogue (issue 24): templates read from the sources, their mapping, coverage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tools_loader import CATALOGUE_DATA, run_catalogue, shipped_catalogue, tool

from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.doctor.log.diagnose import diagnose
from ddpkit.doctor.log.messages import build, catalogue, first_sentence

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "message-coverage.md"
CAPTURED = ROOT / "tests" / "fixtures" / "logs" / "captured"


def test_every_entry_is_complete_and_mapped() -> None:
    doc = shipped_catalogue()
    releases = doc["releases"]
    # the three libraries, and the launchers read at one release (catalogue_messages.py --add)
    assert isinstance(releases, dict) and set(releases) == {
        "nccl", "gloo", "torch", "deepspeed", "horovod", "aws-ofi-nccl", "accelerate", "lightning"}
    messages = doc["messages"]
    assert isinstance(messages, list) and len(messages) > 1000
    allowed = set(CATALOGUE) | {"benign", "unmapped"}
    for item in messages:
        assert item["maps"] in allowed, item
        assert item["reason"], item
        order = releases[item["source"]]
        assert order.index(item["first"]) <= order.index(item["last"]), item
        assert item["level"] in ("error", "warning", "info")
    covered = sum(m["maps"] != "unmapped" for m in messages)
    assert covered / len(messages) >= 0.95


def test_nccl_is_read_from_2_4_to_the_newest_release() -> None:
    nccl = shipped_catalogue()["releases"]["nccl"]  # type: ignore[index]
    assert nccl[0].startswith("v2.4.") and len(nccl) >= 60


def test_the_coverage_report_is_regenerated_from_the_data() -> None:
    doc = shipped_catalogue()
    report = tool("catalogue_messages").coverage(doc["messages"], doc["releases"])
    assert REPORT.read_text() == report


def test_extraction_of_c_macros() -> None:
    extract = tool("msgextract").extract_c
    code = r'''
    // WARN("commented out %d", x);
    WARN("Net : Connect to %s failed : %s", socketToString(&addr, line), strerror(errno));
    INFO(NCCL_INIT|NCCL_NET, "Call to " name " returned %s, retrying", strerror(errno));
    TORCH_CHECK(ok, "The client socket has failed to connect to ", host, ":", port, ".");
    C10D_WARNING("The server socket on {} has timed out, will retry.", addr);
    GLOO_THROW_IO_EXCEPTION(GLOO_ERROR_MSG("Connection closed by peer ", peer_.str()));
    LOG(ERROR) << "Heartbeat monitor timed out after " << secs << " seconds";
    recordError("The server could not listen on port={}, family={}", port_, family);
    '''
    found = {(f.template, f.level) for f in extract(code)}
    assert found == {
        ("Net : Connect to <*> failed : <*>", "error"),
        ("Call to <*> returned <*>, retrying", "info"),
        ("The client socket has failed to connect to <*>:<*>.", "error"),
        ("The server socket on <*> has timed out, will retry.", "warning"),
        ("Connection closed by peer <*>", "error"),
        ("Heartbeat monitor timed out after <*> seconds", "error"),
        ("The server could not listen on port=<*>, family=<*>", "warning"),
    }


def test_extraction_of_python_calls() -> None:
    extract = tool("msgextract").extract_python
    code = '''
logger.warning("Received %s death signal, shutting down workers", sig)
raise RendezvousTimeoutError(f"The node '{node}' has timed out after {t} seconds.")
log.info("[%s] Rendezvous complete for workers.", role)
logger.debug("not catalogued: debug level")
'''
    found = {(f.template, f.level) for f in extract(code)}
    assert found == {
        ("Received <*> death signal, shutting down workers", "warning"),
        ("The node '<*>' has timed out after <*> seconds.", "error"),
        ("[<*>] Rendezvous complete for workers.", "info"),
    }


def test_extraction_of_ddp_throws_and_asserts() -> None:
    """DDP raises through ``self._log_and_throw(ErrorClass, message)`` (torch 1.10 on), and
    torch 1.x checked its callers with ``assert cond, message``: both are raise sites."""
    extract = tool("msgextract").extract_python
    code = '''
self._log_and_throw(ValueError, f"device_ids can only be None or contain a single element.")
self._log_and_throw(ValueError, "x " + str(y) + " does not fit")
self._log_and_throw(make_error, "not a class: no raise site")
assert any(p.requires_grad for p in ps), "DDP is not needed when a module has no gradient."
assert ready
'''
    found = {(f.template, f.level, f.call) for f in extract(code)}
    assert found == {
        ("device_ids can only be None or contain a single element.", "error", "raise ValueError"),
        ("x <*> does not fit", "error", "raise ValueError"),
        ("DDP is not needed when a module has no gradient.", "error", "raise AssertionError"),
    }


def test_extraction_of_a_message_held_in_a_name() -> None:
    """A message built in a local name and raised or logged by it (Lightning's
    _check_bad_cuda_fork, torch's collective_utils): the name's last plain assignment before the
    call, in the same function; text appended to it on the way (``+=``, under a condition) is a
    hole; a name assigned only after the call, or in another function (a nested one too), holds
    nothing."""
    extract = tool("msgextract").extract_python
    code = '''
def check_fork():
    message = (
        "Lightning can't create new processes if CUDA is already initialized. Did you call"
        " `torch.cuda.*` functions?"
    )
    if interactive:
        message += " You will have to restart the Python kernel."
    raise RuntimeError(message)

def gather(rank):
    error_msg = f"Rank {rank} timed out in the store"
    logger.error(error_msg)
    error_msg = "assigned after the raise"

def elsewhere():
    raise ValueError(error_msg)

def outer():
    def inner():
        note = "an inner function's own text"
    raise ValueError(note)
'''
    found = {(f.template, f.level, f.call) for f in extract(code)}
    assert found == {
        ("Lightning can't create new processes if CUDA is already initialized. Did you call "
         "`torch.cuda.*` functions?<*>", "error", "raise RuntimeError"),
        ("Rank <*> timed out in the store", "error", "logger.error"),
    }


def test_torchs_launch_python_is_added_from_the_wheels(tmp_path: Path) -> None:
    """--add-torch-launch reads the launch's and the process group's Python anew from each wheel
    (torchelastic's rendezvous here), in place of those files' templates; the rest stays."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    rendezvous = '''
def _close(self):
    msg = f"The rendezvous '{self._name}' is closed, terminating pending rendezvous."
    raise RendezvousClosedError(msg)
'''
    _wheel(wheels / "torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl",
           {"torch/distributed/elastic/rendezvous/dynamic_rendezvous.py": rendezvous})
    fresh = run_catalogue(tmp_path, "--remap", str(CATALOGUE_DATA), "--add-torch-launch",
                          str(wheels))
    launch = tool("msgsources").TORCH_LAUNCH_FILES
    added = {(m["template"], m["maps"]) for m in fresh["messages"]  # type: ignore[attr-defined]
             if m["source"] == "torch" and launch.search(m["file"])}
    assert added == {("The rendezvous '<*>' is closed, terminating pending rendezvous.",
                      "rendezvous-timeout")}
    shipped = shipped_catalogue()["messages"]
    assert [m for m in fresh["messages"]  # type: ignore[attr-defined]
            if not (m["source"] == "torch" and launch.search(m["file"]))] == [
        m for m in shipped  # type: ignore[attr-defined]
        if not (m["source"] == "torch" and launch.search(m["file"]))]


def _wheel(path: Path, files: dict[str, str]) -> None:
    import zipfile
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)


def test_torch_core_files_are_added_from_the_wheels(tmp_path: Path) -> None:
    """--add-torch-wheels reads torch's own Python outside torch/distributed (DDP, torch.cuda,
    ...) from each wheel, maps it at each raise site, and keeps every other template."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    ddp = '''
class DistributedDataParallel:
    def __init__(self):
        self._log_and_throw(ValueError, "DistributedDataParallel device_ids and output_device "
                            "arguments only work with single-device GPU modules, but got {}.")
        self._log_and_throw(ValueError, "Param with name x found in module parameters, but not "
                            "DDP parameters. This indicates a bug in DDP, please report an issue")
        warnings.warn("The `check_reduction` argument in `DistributedDataParallel` module is "
                      "deprecated. Please avoid using it.")
'''
    cuda = '''
def _lazy_init():
    raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                       "multiprocessing, you must use the 'spawn' start method")
'''
    _wheel(wheels / "torch-1.9.1-cp39-none-macosx_10_9_x86_64.whl",
           {"torch/nn/parallel/distributed.py": ddp, "torch/cuda/__init__.py": cuda,
            "torch/nn/parallel/data_parallel.py": 'raise ValueError("not a CORE file at all")'})
    _wheel(wheels / "torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl",
           {"torch/nn/parallel/distributed.py": ddp})
    shipped = shipped_catalogue()
    fresh = run_catalogue(tmp_path, "--remap", str(CATALOGUE_DATA), "--add-torch-wheels",
                          str(wheels))
    core = tool("msgsources").TORCH_CORE_FILES
    added = {m["template"][:40]: m for m in fresh["messages"]  # type: ignore[attr-defined]
             if m["source"] == "torch" and core.search(m["file"])}
    want = {
        "DistributedDataParallel device_ids and output_device": ("invalid-usage", "v1.9.1",
                                                                 "v2.13.0"),
        "Param with name x found in module parameters": ("internal-error", "v1.9.1", "v2.13.0"),
        "The `check_reduction` argument in `DistributedDataParallel`": ("benign", "v1.9.1",
                                                                        "v2.13.0"),
        "Cannot re-initialize CUDA in forked subprocess": ("cuda-error", "v1.9.1", "v1.9.1"),
    }
    assert {key[:40]: value for key, value in want.items()} == {
        t: (m["maps"], m["first"], m["last"]) for t, m in added.items()}
    others = [m for m in fresh["messages"]  # type: ignore[attr-defined]
              if not (m["source"] == "torch" and core.search(m["file"]))]
    assert others == [m for m in shipped["messages"]  # type: ignore[attr-defined]
                      if not (m["source"] == "torch" and core.search(m["file"]))]
    assert not any(m["file"] == "torch/nn/parallel/data_parallel.py"
                   for m in fresh["messages"])  # type: ignore[attr-defined]


def test_the_rest_of_torch_distributed_is_added_from_the_wheels(tmp_path: Path) -> None:
    """--add-torch-distributed reads torch.distributed's Python beyond the launch and the process
    group (FSDP, DTensor, RPC, ...) from each wheel; a ValueError or TypeError raised there is
    a refused call by Python's documented meaning; the launch's own files are left to the main
    reading, and every other template stays."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    fsdp = '''
def _check_module_states(module_states):
    if module_states:
        raise ValueError(
            "The module has CPU parameters or buffers when `sync_module_states=True`, "
            "which requires them to be on GPU."
        )
    raise RuntimeError(f"Unknown node strategy {strategy}")
'''
    rpc = 'raise TypeError(f"Cannot pickle RemoteModule in python pickler {x}")\n'
    _wheel(wheels / "torch-2.12.1-cp312-cp312-macosx_14_0_arm64.whl",
           {"torch/distributed/fsdp/_init_utils.py": fsdp,
            "torch/distributed/run.py": 'raise ValueError("a run.py message read elsewhere")'})
    _wheel(wheels / "torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl",
           {"torch/distributed/fsdp/_init_utils.py": fsdp,
            "torch/distributed/nn/api/remote_module.py": rpc})
    shipped = shipped_catalogue()
    fresh = run_catalogue(tmp_path, "--remap", str(CATALOGUE_DATA), "--add-torch-distributed",
                          str(wheels))
    more = tool("msgsources").TORCH_MORE_FILES
    added = {m["template"][:22]: (m["maps"], m["first"], m["last"])
             for m in fresh["messages"]  # type: ignore[attr-defined]
             if m["source"] == "torch" and more.search(m["file"])}
    assert added == {"The module has CPU par": ("invalid-usage", "v2.12.1", "v2.13.0"),
                     "Unknown node strategy ": ("unexplained-failure", "v2.12.1", "v2.13.0"),
                     "Cannot pickle RemoteMo": ("invalid-usage", "v2.13.0", "v2.13.0")}
    assert not any("read elsewhere" in m["template"]
                   for m in fresh["messages"])  # type: ignore[attr-defined]
    assert [m for m in fresh["messages"]  # type: ignore[attr-defined]
            if not (m["source"] == "torch" and more.search(m["file"]))] == [
        m for m in shipped["messages"]  # type: ignore[attr-defined]
        if not (m["source"] == "torch" and more.search(m["file"]))]


def test_of_two_files_raising_the_same_text_the_one_filed_under_a_cause_is_matched() -> None:
    """torch.distributed's composable DDP raises DDP's own texts; DDP's are read by a rule of
    their own (invalid-usage), the copy's by none: the line is the message that names a cause,
    whichever file the catalogue lists first."""
    text = "Modules with uninitialized parameters can't be used with `DistributedDataParallel`."
    matcher = re.escape(text)
    items = [{"source": "torch", "file": file, "template": text, "level": "error",
              "first": "v2.13.0", "last": "v2.13.0", "maps": maps, "matcher": matcher}
             for file, maps in (("torch/distributed/_composable/_ddp.py", "unexplained-failure"),
                                ("torch/nn/parallel/distributed.py", "invalid-usage"))]
    for order in (items, items[::-1]):
        found = build({"messages": order}).match(f"RuntimeError: {text}")
        assert found is not None and found.maps == "invalid-usage"


@pytest.mark.parametrize(
    ("fixture", "line", "source", "maps"),
    [
        ("i24_torchrun_master_killed_waiting.log", 2, "torch", "stopped-while-waiting"),
        ("i24_torchrun_rank_fails_node0.log", 10, "gloo", "connection-lost"),
    ],
)
def test_real_lines_are_recognised(fixture: str, line: int, source: str, maps: str) -> None:
    text = (CAPTURED / fixture).read_text().splitlines()[line - 1]
    message = catalogue().match(text)
    assert message is not None and message.source == source and message.maps == maps


@pytest.mark.slow
@pytest.mark.skipif(not Path("/work/.mirror/NVIDIA+nccl/repo").is_dir(),
                    reason="needs the fetched NCCL git dir")
def test_the_script_regenerates_the_nccl_part(tmp_path: Path) -> None:
    fresh = run_catalogue(tmp_path, "--nccl", "/work/.mirror/NVIDIA+nccl/repo", timeout=300)
    shipped = shipped_catalogue()["messages"]
    assert isinstance(shipped, list)
    shipped = [m for m in shipped if m["source"] == "nccl"]
    assert fresh["messages"] == shipped


def test_a_message_built_for_a_warning_stream_is_a_warning() -> None:
    # ProcessGroupNCCL: LOG(WARNING) << c10::str(...): the level is the stream's, not "error"
    # (a thrown c10::str stays an error)
    code = ('void f() { x = 1; LOG(WARNING) << c10::str(logPrefix(), "using GPU ", dev, " to '
            'perform barrier as devices used by this process are currently unknown. "); '
            'TORCH_CHECK(ok, c10::str("the process group refused this reduce op here")); }')
    found = {(f.template, f.call): f.level for f in tool("msgextract").extract_c(code)}
    assert found[("<*>using GPU <*> to perform barrier as devices used by this process are "
                  "currently unknown.", "c10::str")] == "warning"
    assert found[("the process group refused this reduce op here", "c10::str")] == "error"


def test_a_launchers_messages_keep_their_levels_meaning() -> None:
    """DeepSpeed's hostfile it did not find and went on without is a warning, not a failure;
    its hostfile it cannot parse is the launch's settings; its launcher counting no GPU is
    cuda-error (deepspeed v0.19.5 deepspeed/launcher/runner.py)."""
    by_template = {m["template"]: m["maps"] for m in shipped_catalogue()["messages"]
                   if m["source"] == "deepspeed"}
    assert by_template["Unable to find hostfile, will proceed with training with local "
                       "resources only."] == "benign"
    assert by_template["Hostfile is empty or not formatted correctly, unable to proceed with "
                       "launching."] == "rendezvous-config"
    assert by_template["Unable to proceed, no GPU resources available"] == "cuda-error"
    # its asserts (read since msgextract reads assert statements): the launch's settings, an
    # argument refused, an earlier launch's pid file
    assert by_template["Master Addr is required when elastic training is enabled"] == \
        "rendezvous-config"
    assert by_template["--no_local_rank argument is not supported in Elastic training"] == \
        "invalid-usage"
    assert by_template["pid file exists but shouldn't"] == "rendezvous-config"


def test_the_efa_plugins_messages_carry_its_prefix_and_their_meaning() -> None:
    """aws-ofi-nccl (NCCL's net plugin over libfabric, AWS EFA) prints through NCCL's logger with
    "NET/OFI " pasted before each format (include/nccl_ofi_log.h, NCCL_OFI_WARN and _INFO): its
    templates carry that prefix, so its short formats ("Initializing %s") match no other
    program's line; a failed libfabric call, completion or memory registration is ib-error."""
    found = {(f.template, f.level, f.call) for f in tool("msgextract").extract_c(
        'NCCL_OFI_WARN("Unable to register memory (type = %d) for device %d. RC: %d, Error: %s",'
        ' type, dev, ret, fi_strerror(-ret));\n'
        'NCCL_OFI_INFO(NCCL_INIT | NCCL_NET, "Initializing %s", name);')}
    assert found == {("NET/OFI Unable to register memory (type = <*>) for device <*>. RC: <*>, "
                      "Error: <*>", "error", "NCCL_OFI_WARN"),
                     ("NET/OFI Initializing <*>", "info", "NCCL_OFI_INFO")}
    by_template = {m["template"]: m for m in shipped_catalogue()["messages"]
                   if m["source"] == "aws-ofi-nccl"}
    for template in ("NET/OFI OFI fi_getinfo() call failed: <*>",
                     "NET/OFI Couldn't open a fabric provider. RC: <*>, ERROR: <*>",
                     "NET/OFI Unable to register memory (type = <*>) for device <*>. RC: <*>, "
                     "Error: <*>"):
        assert by_template[template]["maps"] == "ib-error", template
    assert "v1.1.5" in {m["first"] for m in shipped_catalogue()["messages"]
                        if str(m["template"]).startswith("NET/OFI Unable to register memory")}
    deepspeed = "[INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed"
    matched = catalogue().match(deepspeed)
    assert matched is None or matched.source != "aws-ofi-nccl"
    line = ("ip-10-1-2-3:4821:4990 [3] nccl_net_ofi_rdma_init:1474 NCCL WARN NET/OFI OFI "
            "fi_getinfo() call failed: No data available")
    matched = catalogue().match(line)
    assert matched is not None and (matched.source, matched.maps) == ("aws-ofi-nccl", "ib-error")


def test_a_message_wrapped_after_its_first_sentence_is_still_recognised(tmp_path: Path) -> None:
    """torch.cuda's lazy init (torch/cuda/__init__.py, every release the catalogue read): "Cannot
    re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the
    'spawn' start method", posted wrapped after its first sentence: that sentence, ending its
    line or going on as the template does, is the message; a part of it, or other words after
    it, are not."""
    first = "RuntimeError: Cannot re-initialize CUDA in forked subprocess."
    matched = catalogue().match(first)
    assert matched is not None and matched.file == "torch/cuda/__init__.py"
    assert matched.maps == "cuda-error"
    assert catalogue().match("RuntimeError: Cannot re-initialize CUDA in forked") is None
    assert catalogue().match(first + " Something else entirely was said here") is None
    clipped = first + " To use CUDA with multiprocessing, you mu…"  # (findings.clip's cut)
    assert catalogue().match(clipped) == matched
    # cut inside the next sentence by a page or a terminal (no ellipsis): it goes on as the
    # template does, for a dozen characters at least
    assert catalogue().match(first + " To use CUDA with multipro") == matched
    assert catalogue().match(first + " To use CUD") is None  # (too little of it to tell)
    log = tmp_path / "rank.log"
    log.write_text(first + "\nTo use CUDA with multiprocessing, you must use the 'spawn' start "
                   "method\n")
    assert diagnose([str(log)])[0].id == "cuda-error"
    assert first_sentence(r"Short\ one\.\ Then\ more") is None  # too little to hold on to
    assert first_sentence(r"No\ sentence\ ends\ here\ at\ all\ in\ this\ long\ matcher") is None


def test_accelerates_and_lightnings_launchers_keep_their_meaning(tmp_path: Path) -> None:
    """accelerate's launchers (src/accelerate/launchers.py, commands/launch.py, state.py; v0.10
    to v1.14) and Lightning's launchers and cluster environments (1.6 to 2.6), read at their
    raise sites: CUDA initialised before the notebook launcher forks, a refused flag, the
    scheduler's counts that do not match Lightning's."""
    by_template = {m["template"]: m["maps"] for m in shipped_catalogue()["messages"]
                   if m["source"] in ("accelerate", "lightning")}
    assert by_template["You need to use at least 2 processes to use `--multi_gpu`."] == \
        "invalid-usage"
    assert by_template["When using multiple machines, you need to specify the main process "
                       "port."] == "rendezvous-config"
    assert any(maps == "cuda-error" for template, maps in by_template.items()
               if "initialized before the `notebook_launcher`" in template)
    assert any(maps == "rendezvous-config" for template, maps in by_template.items()
               if template.startswith("You set `num_nodes=<*>` in Lightning"))
    log = tmp_path / "notebook.log"
    log.write_text("Traceback (most recent call last):\n"
                   "ValueError: To launch a multi-GPU training from your notebook, the "
                   "`Accelerator` should only be initialized inside your training function. "
                   "Restart your notebook and make sure no cells initializes an `Accelerator`.\n")
    assert diagnose([str(log)])[0].id == "cuda-error"
    # Lightning's own words for the same fork (strategies/launchers/multiprocessing.py, a message
    # held in a name before it is raised)
    assert any(maps == "cuda-error" for template, maps in by_template.items()
               if template.startswith("Lightning can't create new processes if CUDA is already"))
    log.write_text("RuntimeError: Lightning can't create new processes if CUDA is already "
                   "initialized. Did you manually call `torch.cuda.*` functions, have moved the "
                   "model to the device, or allocated memory on the GPU any other way? Please "
                   "remove any such calls, or change the selected strategy.\n")
    assert diagnose([str(log)])[0].id == "cuda-error"
