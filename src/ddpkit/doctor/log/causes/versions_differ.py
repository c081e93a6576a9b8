"""A program's own check that its processes run the same versions, failing: version-mismatch.

Ray compares each process's Ray and Python versions with the cluster's as it connects
(ray/_private/utils.py, check_version_info) and raises "Version mismatch: The cluster was started
with: Ray: <v> Python: <v> This process on node <ip> was started with: Ray: <v> Python: <v>":
a node's environment is not the head's (another conda env, another image, another Python). The
ranks a job starts there would run other builds as well, which is the catalogue's
``version-mismatch``.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.log.causes.base import NotingValues
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.i18n import _


class VersionsDiffer(NotingValues):
    needs = frozenset({FactKind.VERSIONS_DIFFER})
    specificity = 20
    finding_id = "version-mismatch"
    supersedes = GENERIC | {"peer-unreachable", "connection-lost"}

    def words(self) -> tuple[str, str]:
        text = _("{programs} found that this process runs other versions than the cluster it "
                 "joined (its own check, as a process connects): the node's environment is not "
                 "the head node's.", programs=self.listed)
        fix = _("Run every node from the same environment: the same image or conda env, the "
                "same Python, Ray, torch and NCCL (the message lists the versions on each side); "
                "then restart the cluster.")
        return text, fix
