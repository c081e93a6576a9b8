"""`ddpkit launch`'s torchrun and torch.distributed.launch flags: every one is accepted (both
spellings), and each is either handled by ddpkit, passed on to torchrun verbatim, or refused with
an error id when it cannot work with ddpkit's static rendezvous on the master."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.choices import parse_choice
from ddpkit.cli.options import add_flag
from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.launch.config import LocalRankMode
from ddpkit.launch.node.plan import option_flags
from ddpkit.launch.torchrun.command import PASSED_ON, TorchrunFlag, installed_flags
from ddpkit.launch.torchrun.local_rank import AUTO, MODES, OWN_WORKER, check_use_env
from ddpkit.launch.torchrun.rendezvous import C10D, STATIC, implied_node_rank, read_rendezvous

_DEST = "torchrun_flag_"
_INSTALLED = "torchrun_installed_flags"  # the Namespace's flags read from the installed torch


def add_torch_options(parser: argparse.ArgumentParser) -> None:
    """The local-rank argument, torch.distributed.launch's --use-env, and torchrun's own flags."""
    group = parser.add_argument_group(_("scripts written for torch.distributed.launch"))
    add_flag(group, "--local-rank-arg", choices=MODES, default=AUTO,
             help=_("pass each rank its local rank as --local-rank (dash), --local_rank "
                    "(underscore) or not at all (none); auto (default): the spelling the "
                    "script's add_argument declares, read from its source"))
    add_flag(group, "--use-env", action="store_true",
             help=_("accepted for torch.distributed.launch: LOCAL_RANK is always set; the "
                    "script gets no local-rank argument"))
    torchrun = parser.add_argument_group(
        _("torchrun's own flags (passed on verbatim unless said otherwise; docs/launch.md)"))
    add_flag(torchrun, "--rdzv-backend", default=None, metavar="static|c10d",
             help=_("'{static}', or '{c10d}' with a fixed --nnodes, read as the same job: ddpkit "
                    "runs torchrun's static rendezvous on the master", static=STATIC, c10d=C10D))
    add_flag(torchrun, "--rdzv-endpoint", default=None, metavar="HOST:PORT",
             help=_("read as --master-addr HOST --master-port PORT"))
    for flag in PASSED_ON:
        _add_passed_on(torchrun, flag)


def _add_passed_on(group: Any, flag: TorchrunFlag) -> None:
    names = [flag.name] + ([flag.short] if flag.short else [])
    if flag.takes_value:
        add_flag(group, *names, dest=_DEST + flag.name[2:].replace("-", "_"),
                 default=None, metavar="VALUE", help=flag.help or _("passed on"))
    else:
        add_flag(group, *names, dest=_DEST + flag.name[2:].replace("-", "_"),
                 action="store_true", help=flag.help or _("passed on"))


def _unknown_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The long options before the script that ``parser`` does not know (the script's own
    arguments are not looked at)."""
    known, unknown = parser._option_string_actions, []
    index = 0
    while index < len(argv) and argv[index] != "--" and argv[index].startswith("-"):
        token = argv[index]
        name = token.split("=", 1)[0]
        action = known.get(name)
        if action is None and name.startswith("--"):
            unknown.append(name)
        takes_value = action is None or action.nargs != 0  # an unknown one may: the next word
        if takes_value and "=" not in token and index + 1 < len(argv) \
                and not argv[index + 1].startswith("-"):
            index += 1  # its value (or, after an unknown switch, the script: nothing follows)
        index += 1
    return unknown


def add_installed_torchrun_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Before parsing ``argv``: the options in it that this parser does not know but the installed
    torchrun does (a flag newer than ddpkit) are added, to be passed on like the listed ones.
    torch is imported only when such an option is there."""
    extra = installed_flags(_unknown_options(parser, argv))
    for flag in extra:
        _add_passed_on(parser, flag)
    if extra:
        parser.set_defaults(**{_INSTALLED: (*(parser.get_default(_INSTALLED) or ()), *extra)})


@dataclass(frozen=True)
class TorchOptions:
    """What the torch-vocabulary flags amount to, for LaunchConfig and the other nodes."""

    local_rank_arg: LocalRankMode
    use_env: bool
    torchrun_options: tuple[tuple[str, str | None], ...]
    notes: tuple[str, ...]

    def config_fields(self) -> dict[str, Any]:
        return {"local_rank_arg": self.local_rank_arg, "use_env": self.use_env,
                "torchrun_options": self.torchrun_options, "notes": self.notes}

    def check_whole_job(self) -> None:
        """For --hosts and join tokens: refuse what names one machine only."""
        if any(flag == "--local-addr" for flag, _value in self.torchrun_options):
            raise UsageError("local-addr-per-node",
                             _("--local-addr names one machine's address, but this command "
                               "starts several machines"),
                             _("drop --local-addr: each node's address is chosen there, by its "
                               "route to the master"))

    def node_flags(self) -> list[str]:
        """The same options as flags of a per-node ``ddpkit launch`` (for --hosts)."""
        return option_flags(self.local_rank_arg, self.use_env, self.torchrun_options)

    def job_options(self) -> dict[str, Any]:
        """JSON-safe, for a join token's job: every node gets the same."""
        return {"local_rank_arg": self.local_rank_arg, "use_env": self.use_env,
                "torchrun_options": [[flag, value] for flag, value in self.torchrun_options
                                     if flag != "--local-addr"],
                "notes": list(self.notes)}


def resolve(args: argparse.Namespace) -> tuple[argparse.Namespace, TorchOptions]:
    """Check the torch flags against ddpkit's choices. Returns a copy of ``args`` with
    --rdzv-endpoint (and a fixed-size c10d rendezvous: ddpkit.launch.torchrun.rendezvous) folded
    into the master's address and port, which the job mode is decided from, and the options."""
    rendezvous = read_rendezvous(args.rdzv_backend, args.rdzv_endpoint,
                                 master_addr=args.master_addr, master_port=args.master_port,
                                 nnodes=args.nnodes)
    notes = list(rendezvous.notes)
    node_rank = args.node_rank
    if node_rank is None and args.rdzv_backend == C10D and args.nnodes > 1 \
            and rendezvous.master_addr is not None:
        node_rank, note = implied_node_rank(args.nnodes, rendezvous.master_addr, _holds_locally)
        notes.append(note)
    args = argparse.Namespace(**{**vars(args), "master_addr": rendezvous.master_addr,
                                 "master_port": rendezvous.master_port, "node_rank": node_rank})
    given: list[tuple[str, str | None]] = []
    for flag in (*PASSED_ON, *getattr(args, _INSTALLED, ())):
        value = getattr(args, _DEST + flag.name[2:].replace("-", "_"))
        if flag.takes_value and value is not None:
            given.append((flag.name, str(value)))
        elif not flag.takes_value and value:
            given.append((flag.name, None))
    if rendezvous.standalone and not any(flag == "--standalone" for flag, _value in given):
        given.append(("--standalone", None))
    names = {flag for flag, _ in given}
    if "--standalone" in names and args.nnodes > 1:
        raise UsageError("standalone-multi-node",
                         _("--standalone starts a rendezvous on this machine only, but --nnodes "
                           "is {nnodes}", nnodes=args.nnodes),
                         _("drop --standalone (ddpkit's rendezvous runs on the master given by "
                           "--master-addr)"))
    if getattr(args, "module", False) and names & {"--no-python", "--run-path"}:
        other = sorted(names & {"--no-python", "--run-path"})[0]
        raise UsageError("entry-flags-conflict",
                         _("-m runs a module with python, {flag} runs the entry another way",
                           flag=other), _("drop -m or {flag}", flag=other))
    check_use_env(args.local_rank_arg, bool(args.use_env))
    if args.use_env:
        notes.append(_("--use-env: always on (torchrun sets LOCAL_RANK for every rank)"))
    mode = parse_choice(args.local_rank_arg, (*MODES, OWN_WORKER), "--local-rank-arg")
    return args, TorchOptions(mode, bool(args.use_env), tuple(given), tuple(notes))


def _holds_locally(host: str) -> bool:
    """Whether an interface of this machine holds an address ``host`` resolves to."""
    from ddpkit.net.interfaces import discover, interface_holding
    from ddpkit.net.route import resolve as resolve_host

    nics = discover()
    return any(interface_holding(address, nics) is not None for address in resolve_host(host))
