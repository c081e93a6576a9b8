"""apply_comm_hook on real Gloo groups: world size 1 in-process, and 2 processes on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddpkit.ddp import CommHookSpec, apply_comm_hook, parse_comm_hook_spec
from ddpkit.errors import ConfigError, ExitCode


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TORCH_", "PET_", "MASTER_", "DDPKIT_"))}
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("none", CommHookSpec("none")),
        ("BF16", CommHookSpec("bf16")),
        ("fp16", CommHookSpec("fp16")),
        ("powersgd:4", CommHookSpec("powersgd", 4, 1000)),
        ("powersgd:1:warmup=10", CommHookSpec("powersgd", 1, 10)),
    ],
)
def test_parse_spec(spec: str, parsed: CommHookSpec) -> None:
    assert parse_comm_hook_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["", "int8", "powersgd", "powersgd:x", "bf16:2", "powersgd:2:w=3"])
def test_unknown_spec(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_comm_hook_spec(spec)
    assert info.value.error_id == "unknown-comm-hook"
    assert info.value.exit_code == ExitCode.CONFIG
    assert "powersgd:R" in info.value.hint


@pytest.mark.parametrize("spec", ["powersgd:0", "powersgd:2:warmup=1"])
def test_out_of_range_spec(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_comm_hook_spec(spec)
    assert info.value.error_id == "bad-comm-hook"


def test_importing_ddpkit_ddp_does_not_import_torch() -> None:
    code = "import sys, ddpkit.ddp; assert 'torch' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def gloo_world_of_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a default process group already exists in this test process")
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield torch
    finally:
        dist.destroy_process_group()


def _model(torch: Any, seed: int = 0) -> Any:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def _ddp(torch: Any, model: Any, bucket_cap_mb: int | None = None) -> Any:
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)


def _train(torch: Any, ddp: Any, steps: int) -> None:
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(steps):
        torch.manual_seed(100 + step)
        optimizer.zero_grad()
        ddp(torch.randn(16, 32)).pow(2).mean().backward()
        optimizer.step()


@pytest.mark.parametrize(
    ("spec", "implementation"),
    [
        ("none", "DDP built-in all-reduce"),
        ("bf16", "ddpkit cast-allreduce-cast hook (bf16)"),
        ("fp16", "torch default_hooks.fp16_compress_hook"),
        ("powersgd:1:warmup=2", "torch powerSGD_hook.powerSGD_hook"),
    ],
)
def test_each_hook_applies_and_trains(gloo_world_of_one: Any, spec: str, implementation: str) -> None:
    torch = gloo_world_of_one
    ddp = _ddp(torch, _model(torch), bucket_cap_mb=64)
    before = [p.detach().clone() for p in ddp.parameters()]
    info = apply_comm_hook(ddp, spec)
    assert info.backend == "gloo"
    assert info.implementation == implementation
    assert info.name == spec.split(":")[0]
    _train(torch, ddp, 4)  # PowerSGD compresses from step 2 on
    after = list(ddp.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
    if spec.startswith("powersgd"):
        assert info.state is not None and info.state.iter >= 2
        assert info.spec == "powersgd:1:warmup=2"


def test_bf16_hook_rounds_gradients_to_bf16(gloo_world_of_one: Any) -> None:
    torch = gloo_world_of_one
    plain, hooked = _ddp(torch, _model(torch)), _ddp(torch, _model(torch))
    apply_comm_hook(hooked, "bf16")
    torch.manual_seed(7)
    batch = torch.randn(16, 32)
    for ddp in (plain, hooked):
        ddp(batch).pow(2).mean().backward()
    for p, h in zip(plain.parameters(), hooked.parameters()):
        assert p.grad is not None and h.grad is not None
        assert h.grad.dtype == torch.float32
        assert torch.equal(h.grad, p.grad.to(torch.bfloat16).to(torch.float32))
    # ...and the rounding really happened (fp32 gradients are not all bf16-representable).
    assert any(not torch.equal(h.grad, p.grad)
               for p, h in zip(plain.parameters(), hooked.parameters()))


def test_powersgd_on_gloo_refuses_default_buckets(gloo_world_of_one: Any) -> None:
    torch = gloo_world_of_one
    ddp = _ddp(torch, _model(torch))  # default bucket_cap_mb: several buckets
    with pytest.raises(ConfigError) as info:
        apply_comm_hook(ddp, "powersgd:2:warmup=2")
    assert info.value.error_id == "powersgd-gloo-buckets"
    assert "bucket_cap_mb=1" in info.value.hint
    # The explicit opt-out registers it anyway, with a note saying why that is risky.
    hooked = apply_comm_hook(ddp, "powersgd:2:warmup=2", allow_gloo_multi_bucket=True)
    assert any("allow_gloo_multi_bucket" in note for note in hooked.notes)


def test_powersgd_on_gloo_refuses_a_cap_smaller_than_the_gradients(gloo_world_of_one: Any) -> None:
    torch = gloo_world_of_one
    big = torch.nn.Linear(1024, 600)  # 2.4 MB of fp32 gradients
    ddp = _ddp(torch, big, bucket_cap_mb=1)
    with pytest.raises(ConfigError) as info:
        apply_comm_hook(ddp, "powersgd:1")
    assert info.value.error_id == "powersgd-gloo-buckets"
    assert "bucket_cap_mb=3" in info.value.hint
    assert info.value.details["gradient_bytes"] == (1024 * 600 + 600) * 4


def test_second_hook_is_refused(gloo_world_of_one: Any) -> None:
    torch = gloo_world_of_one
    ddp = _ddp(torch, _model(torch))
    apply_comm_hook(ddp, "fp16")
    with pytest.raises(ConfigError) as info:
        apply_comm_hook(ddp, "bf16")
    assert info.value.error_id == "comm-hook-already-set"


def test_not_a_ddp_model(gloo_world_of_one: Any) -> None:
    torch = gloo_world_of_one
    with pytest.raises(ConfigError) as info:
        apply_comm_hook(_model(torch), "fp16")
    assert info.value.error_id == "not-a-ddp-model"


_TWO_RANKS = textwrap.dedent(
    """
    import gc, json, sys
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from ddpkit.ddp import apply_comm_hook

    rank, store, spec, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(0)  # same initial weights on both ranks
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    ddp = DistributedDataParallel(model, bucket_cap_mb=64)
    info = apply_comm_hook(ddp, spec)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(1000 + rank)  # different data per rank: only the all-reduce keeps them equal
    for _ in range(5):
        opt.zero_grad()
        ddp(torch.randn(16, 32)).pow(2).mean().backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in ddp.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(2)]
    dist.all_gather(gathered, flat)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"identical": bool(torch.equal(gathered[0], gathered[1])),
                       "implementation": info.implementation,
                       "norm": float(flat.norm())}, f)
    # Free the model before the group, or Gloo can abort this rank at interpreter exit
    # ("terminate called without an active exception"; see ddpkit/launch/torchrun/tracebacks.py).
    del ddp, opt, model
    gc.collect()
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("spec", ["bf16", "fp16", "powersgd:1:warmup=2"])
def test_two_ranks_stay_identical(tmp_path: Path, spec: str) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "two_ranks.py"
    script.write_text(_TWO_RANKS)
    out = tmp_path / "result.json"
    store = tmp_path / "store"
    env = _child_env()
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(store), spec, str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    try:
        deadline = time.monotonic() + 150
        outputs = [p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert not any(psutil.pid_exists(p.pid) and psutil.Process(p.pid).status() != "zombie"
                   for p in procs)
    result = json.loads(out.read_text())
    assert result["identical"], result
    assert result["norm"] > 0


def test_powersgd_without_numpy_names_the_missing_package(gloo_world_of_one: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's PowerSGD imports numpy, which the torch wheel does not bring: a clear error, not
    torch's own ModuleNotFoundError from deep inside PowerSGDState."""
    from ddpkit.errors import EnvironmentProblem

    torch = gloo_world_of_one
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now raises ModuleNotFoundError
    ddp = _ddp(torch, _model(torch), bucket_cap_mb=64)
    with pytest.raises(EnvironmentProblem) as info:
        apply_comm_hook(ddp, "powersgd:1:warmup=2")
    assert info.value.error_id == "missing-package"
    assert "numpy" in info.value.message and "pip install numpy" in info.value.hint
