"""causes/versions_differ.py: Ray's own check that a process runs the cluster's versions, failing,
is version-mismatch. Source of the lines: ray/_private/utils.py (Ray 2.x), check_version_info:
``"Version mismatch: The cluster was started with:\\n    Ray: " + ... + "\\n    Python: " + ...
+ "\\nThis process on node " + node_ip + " was started with:" + ...``, raised as a RuntimeError
from ray.init()."""

from __future__ import annotations

from pathlib import Path

from cause_logs import top

MESSAGE = ["RuntimeError: Version mismatch: The cluster was started with:",
           "    Ray: 2.9.0", "    Python: 3.10.12",
           "This process on node 10.0.0.7 was started with:",
           "    Ray: 2.10.0", "    Python: 3.10.12"]


def test_rays_version_check_is_a_version_mismatch(tmp_path: Path) -> None:
    found = top(tmp_path, ["Traceback (most recent call last):",
                           '  File "main_ppo.py", line 12, in <module>',
                           "    ray.init(address=\"auto\")", *MESSAGE])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert "Ray" in found.explanation and "same environment" in found.fix


def test_the_words_version_mismatch_alone_are_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["RuntimeError: Version mismatch between the checkpoint and the "
                           "model"])
    assert "cluster it joined" not in found.explanation
