"""`ddpkit plan` memory first, through the CLI: issue 25's 7B x 2 x 8 x 4090 case and ResNet-50."""

from __future__ import annotations

ISSUE = ["plan", "--params", "7B", "--nodes", "2", "--gpus-per-node", "8", "--inter-node",
         "10Gbit", "--step-compute", "1.5s", "--grad-dtype", "bf16", "--gpu", "4090"]
RESNET = ["plan", "--params", "25.6M", "--nodes", "2", "--gpus-per-node", "4", "--inter-node",
          "1Gbit", "--step-compute", "0.3s"]


def test_seven_billion_on_4090s_says_ddp_does_not_fit(run_cli) -> None:
    result = run_cli(*ISSUE)
    assert result.code == 0, result.err
    assert all(len(line) <= 100 for line in result.out.splitlines()), result.out
    assert "plain DDP does not fit" in result.out
    doc = run_cli(*ISSUE, "--json").json()
    assert doc["schema"] == "ddpkit.plan/2"
    rows = {r["strategy"]: r for r in doc["memory"]["strategies"]}
    usable = doc["memory"]["usable_bytes"]
    # 7B x 16 bytes of mixed-precision Adam state does not fit a 24 GB GPU.
    assert rows["ddp"]["fits"] is False and rows["ddp"]["memory_per_gpu"]["total"] > 7e9 * 16
    assert rows["ddp"]["shortfall_bytes"] == rows["ddp"]["memory_per_gpu"]["total"] - usable
    verdict = doc["verdict"]
    chosen = rows[verdict["strategy"]]
    assert chosen["fits_one_node"] if verdict["decision"] == "stay-on-one-node" else chosen["fits"]
    assert verdict["apply"] and any("fully_shard" in line or "zero_optimization" in line
                                    for line in verdict["apply"])
    # The verdict names per-GPU memory and the traffic per step through the inter-node link.
    assert "per GPU" in verdict["text"] and "across each node's link per step" in verdict["text"]
    assert all(0 < (r["efficiency"] or 0) <= 1 for r in rows.values())


def test_resnet_answer_is_unchanged_by_memory(run_cli) -> None:
    before = run_cli(*RESNET, "--json").json()["verdict"]
    with_gpu = run_cli(*RESNET, "--gpu", "3090", "--intra-node", "20GB/s", "--json").json()
    assert with_gpu["memory"]["strategies"][0]["fits"] is True
    assert with_gpu["verdict"]["decision"] == before["decision"]
    assert with_gpu["verdict"]["setting"] == before["setting"]
    assert with_gpu["verdict"]["strategy"] == "ddp" and before["strategy"] is None
    text = run_cli(*RESNET).out
    assert "memory: plain DDP needs" in text and "--gpu" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_nothing_fits(run_cli) -> None:
    doc = run_cli("plan", "--params", "70B", "--nodes", "2", "--gpus-per-node", "1",
                  "--inter-node", "10Gbit", "--gpu-memory", "8GiB", "--step-compute", "1s",
                  "--json").json()
    assert doc["verdict"]["decision"] == "does-not-fit"
    assert "short" in doc["verdict"]["text"]


def test_unknown_gpu_is_a_usage_error(run_cli) -> None:
    result = run_cli(*ISSUE[:-1], "voodoo5")
    assert result.code == 2 and "unknown-gpu" in result.err
