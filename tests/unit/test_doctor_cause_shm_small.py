"""causes/shm_small.py: Ray saying /dev/shm is smaller than its object store is shm, a warning.

The lines are Ray's own template (ray/_private/services.py, the object store's start: "WARNING:
The object store is using {} instead of /dev/shm because /dev/shm has only {} bytes available.
This will harm performance! ..."; Ray 1.x printed "This may slow down performance!"), behind
Python logging's format as Ray sets it ("%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s --
%(message)s"), with sizes drawn from Docker's default (64 MiB) and from a larger tmpfs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

from ddpkit.doctor.log.diagnose import diagnose

RAY = ("2024-03-02 10:11:12,345\tWARNING services.py:1996 -- WARNING: The object store is using "
       "/tmp instead of /dev/shm because /dev/shm has only {size} bytes available. {after}")
NOW = ("This will harm performance! You may be able to free up space by deleting files in "
       "/dev/shm. If you are inside a Docker container, you can increase /dev/shm size by "
       "passing '--shm-size=10.24gb' to 'docker run' (or add it to the run_options list in a Ray "
       "cluster config). Make sure to set this to more than 30% of available RAM.")
BEFORE = ("This may slow down performance! You may be able to free up space by deleting files in "
          "/dev/shm or terminating any running plasma_store_server processes.")


@pytest.mark.parametrize(("size", "shown"), [("67108864", "64 MiB"), ("5368709120", "5120 MiB"),
                                           ("524288", "524288 bytes")])
@pytest.mark.parametrize("after", [NOW, BEFORE])
def test_ray_finding_dev_shm_small_is_shm_as_a_warning(tmp_path: Path, size: str, shown: str,
                                                       after: str) -> None:
    found = top(tmp_path, [RAY.format(size=size, after=after), "INFO worker.py:1673 -- Started a "
                           "local Ray instance."])
    assert (found.id, found.severity) == ("shm", "warning")
    assert f"only {shown} free in /dev/shm" in found.explanation
    assert "df -h /dev/shm" in found.fix and "--shm-size" in found.fix


def test_an_error_the_logs_show_ranks_above_it(tmp_path: Path) -> None:
    # a failure of its own words: the warning is read beside it, below it
    log = tmp_path / "run.log"
    log.write_text("\n".join([RAY.format(size="67108864", after=NOW),
                              "Traceback (most recent call last):",
                              '  File "train.py", line 9, in <module>', "KeyError: 'labels'"]))
    found = diagnose([str(log)])
    assert found[0].severity == "error" and found[0].id != "shm"
    assert any(f.id == "shm" and f.severity == "warning" for f in found)


def test_other_words_about_dev_shm_are_not_this_cause(tmp_path: Path) -> None:
    found = top(tmp_path, ["tmpfs  64M  0  64M  0% /dev/shm", "/dev/shm has 64 MB of space"])
    assert found.id != "shm"
