"""The rendezvous store refused the values it was made with: a master port that is no TCP port.

torch's TCPStore is a C++ class bound with pybind11; its constructor takes the host, the port, the
world size, whether it is the server, the timeout and more (torch/csrc/distributed/c10d/init.cpp,
``py::init([](const std::string& host, uint16_t port, std::optional<int> worldSize, ...)``). A
value that a parameter's C++ type cannot hold makes pybind11 refuse the call (pybind11.h,
``cpp_function::dispatcher``): ``TypeError: __init__(): incompatible constructor arguments. The
following argument types are supported:``, each signature on a numbered line (``1.
torch._C._distributed_c10d.TCPStore(host_name: str, port: int, ...)``), then ``Invoked with: ``
and the arguments' reprs, with ``; kwargs: key=value`` for those given by keyword. The port is a
``uint16_t``: 0 to 65535. init_process_group's ``env://`` handler (torch/distributed/
rendezvous.py) takes ``int(MASTER_PORT)``, which reads 80000 without complaint, and torchrun's
static rendezvous takes ``--master-port`` the same way, so a port above 65535 is first refused
here, as a type error.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _
from ddpkit.net.ports import LARGEST_PORT  # TCPStore's port parameter is a uint16_t

STORE = "TCPStore"  # the class whose signature a refusal lists
_PORT_KEYWORD = re.compile(r"(?:^|, )port=([^,]*)")
_INTEGER = re.compile(r"-?\d+")


def given_port(positional: str, keywords: str) -> str | None:
    """The port argument as pybind11 printed it: the second positional one (after the host),
    or ``port=`` among the keywords; None where neither was given."""
    by_keyword = _PORT_KEYWORD.search(keywords)
    if by_keyword:
        return by_keyword.group(1).strip()
    if positional.startswith(("'", '"')):  # the host's repr, quoted: a comma in it is its own
        quote = positional[0]
        end = positional.find(quote, 1)
        rest = positional[end + 1 :] if end > 0 else ""
        parts = rest.split(", ")[1:2] if rest.startswith(",") else []
    else:
        parts = positional.split(", ")[1:2]
    return parts[0].strip() if parts and parts[0].strip() else None


class StoreArguments(Cause):
    needs = frozenset({FactKind.BINDING_SIGNATURE, FactKind.INVOKED_WITH})
    specificity = 20
    supersedes = GENERIC

    def __init__(self) -> None:
        self.refusing: set[str] = set()  # files whose refused signature was TCPStore's
        self.invoked: tuple[str, str] | None = None  # (positional, keywords)
        self.bag = Bag()

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        for fact in facts:
            if fact.kind is FactKind.BINDING_SIGNATURE:
                if fact.value.rsplit(".", 1)[-1] == STORE:
                    self.refusing.add(event.file)
                    self.bag.add(event)
                else:
                    self.refusing.discard(event.file)  # another call's refusal
            elif (fact.kind is FactKind.INVOKED_WITH and event.file in self.refusing
                  and self.invoked is None):
                self.invoked = (fact.value, fact.detail)
                self.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        if self.invoked is None:
            return None
        port = given_port(*self.invoked)
        if port is not None and _INTEGER.fullmatch(port) and not 0 <= int(port) <= LARGEST_PORT:
            text = _("The rendezvous store (torch's TCPStore, which init_process_group and "
                     "torchrun make from MASTER_ADDR and MASTER_PORT) was given port {port}, and "
                     "a TCP port is a number from 0 to 65535: the store refused to be made, as a "
                     "type error.", port=port)
        elif port is not None and not _INTEGER.fullmatch(port):
            text = _("The rendezvous store (torch's TCPStore) was given {port} as its port, not a "
                     "number: the store refused to be made, as a type error. A script that makes "
                     "the store itself passes the port as an int.", port=port)
        else:
            text = _("The rendezvous store (torch's TCPStore) refused the values it was made with "
                     "({given}): the host must be a string, the port a number from 0 to 65535, "
                     "the world size a number.",
                     given=(self.invoked[0] or self.invoked[1])[:120])
        fix = _("Give a master port from 1024 to 65535 that no other program uses, the same on "
                "every node: --master-port 29500 (MASTER_PORT=29500 for env://); ddpkit launch "
                "--dry-run prints the command it would run.")
        return made("rendezvous-config", "error", text, fix, merge(self.bag.items))
