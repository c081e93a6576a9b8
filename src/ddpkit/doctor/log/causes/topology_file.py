"""NCCL told by the environment to take its topology or its channel graph from a file, failing in
its topology code: the file describes another machine.

Two of NCCL's variables replace what it would detect with a file, and the code that reads each
says so at INFO level: ``NCCL_TOPO_FILE`` (graph/topo.cc, ncclTopoGetSystem: "NCCL_TOPO_FILE set
by environment to %s"; an XML description of the node's GPUs, PCI switches and NICs, read instead
of sysfs) and ``NCCL_GRAPH_FILE`` (graph/search.cc, ncclTopoCompute: "NCCL_GRAPH_FILE set by
environment to %s", then ncclTopoGetGraphFromXml; the rings and trees to use, read instead of
searched: "XML Import Channel : dev %d not found" where the file names a GPU the communicator
lacks). Cloud images set them for their
own machine type (Azure's HPC images under /opt/microsoft/<sku>/, AWS's net plugin under its
share/aws-ofi-nccl/xml/), so an instance of another size or a job on fewer GPUs gets a file that
does not fit. A WARN from NCCL's topology code (``graph/``) after such a setting is that file
refused: invalid-usage, a setting to remove or correct.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _

FILE_SETTINGS = ("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE")
# a WARN printed by NCCL's topology code (src/graph/: topo.cc, xml.cc, search.cc, paths.cc,
# connect.cc, rings.cc, trees.cc, tuning.cc), as NCCL prefixes it with its source file
TOPOLOGY_WARN = re.compile(r"\bgraph/\w+\.cc:\d+ NCCL WARN")


class TopologyFile(Cause):
    kinds = frozenset({"nccl-env", "nccl-warn"})
    specificity = 20
    supersedes = GENERIC | {"internal-error"}

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}  # the file variables set, in the order they came
        self.warning = ""  # the first WARN of the topology code, as NCCL worded it
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.kind == "nccl-env":
            name = event.get("var")
            if name in FILE_SETTINGS and name not in self.settings:
                self.settings[name] = event.get("value")
                self.bag.add(event)
        elif not self.warning and TOPOLOGY_WARN.search(event.text):
            self.warning = event.get("detail").rstrip(". ")
            self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if not (self.settings and self.warning):
            return None
        settings = ", ".join(f"{name}={value}" for name, value in self.settings.items())
        text = _("The environment gave NCCL its topology from a file ({settings}), and NCCL's "
                 "topology code then refused it: \"{warning}\". Such a file describes one "
                 "machine type's GPUs, PCI switches and NICs (a cloud image sets it for its own "
                 "instance size); on a machine or a job with other GPUs, what it lists is not "
                 "there.", settings=settings, warning=self.warning)
        fix = _("Unset {names} for this job (or point it at a file made for this machine type): "
                "find where it is set with env | grep NCCL_, /etc/nccl.conf and the image's "
                "profile scripts (ddpkit nccl-conf show), and let NCCL detect the topology "
                "itself.", names=" / ".join(self.settings))
        return made("invalid-usage", "error", text, fix, merge(self.bag.items))
